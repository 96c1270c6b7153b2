"""Reading one streamed answer (server-sent events) for the remote client (engine/remote/client.py), bounded
whatever the server sends: a line of at most ``MAX_LINE_BYTES``, an answer of at most ``MAX_STREAM_BYTES``,
at most about twice the ``max_tokens`` asked for and ``MAX_TEXT_CHARS`` of text (a server ignoring
``max_tokens``); past any of them the request fails with the cap named (the caller closes the connection).
The overall deadline is the watchdog's (engine/remote/connection.py).

The text is code for the user's file: a known secret in it (a server echoing the API key) is replaced, and
while it streams, a tail that could be the start of one is held back until the next piece tells.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.remote.secrets import held, scrub
from engine.remote.wire import (
    MAX_LINE_BYTES,
    MAX_STREAM_BYTES,
    MAX_TEXT_CHARS,
    RemoteError,
    event_text,
    parse_event,
)
from engine.types import CancelToken, GenParams, Timings, TokenCallback, stop_cut

_MIN_HELD_PIECE = 6  # a tail this long that starts a known secret is dropped from a finished text


@dataclass
class Stream:
    """What one variant's event stream gave so far."""

    t0: float  # when the request was sent (perf_counter)
    raw: str = ""  # the server's text (stop rules applied)
    text: str = ""  # ``raw`` with known secrets replaced: what goes out
    shown: str = ""  # what on_token was given last
    ntok: int = 0  # pieces received (the server's tokens, near enough)
    nbytes: int = 0
    ttft: float = 0.0
    finish: str | None = None
    done: bool = False  # [DONE] arrived: the response was read to its end

    def final(self) -> str:
        """The text to keep: without a tail that starts a known secret (a stream cut inside one)."""
        h = held(self.text)
        return self.text[:-h] if h >= _MIN_HELD_PIECE else self.text


def read_events(resp: http.client.HTTPResponse, got: Stream, params: GenParams, variant: int,
                cancel: CancelToken | None, on_token: TokenCallback | None, t: Timings, label: str,
                stop_texts: tuple[str, ...], tripped: Callable[[], str | None],
                broke: Callable[[BaseException], str]) -> None:
    """Read the event stream into ``got`` until ``[DONE]``, its end, a stop rule, or the watchdog cut it
    (``tripped()``), streaming the text so far to ``on_token``. ``broke(e)`` describes a read error."""
    allowance = 2 * max(1, params.max_tokens) + 16
    while True:
        try:
            line = resp.readline(MAX_LINE_BYTES + 1)
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
            if tripped():
                return
            raise RemoteError(f"stream from {label} broke: {broke(e)}") from None
        if not line:
            return
        got.nbytes += len(line)
        if len(line) > MAX_LINE_BYTES:
            raise RemoteError(f"stream from {label}: a line passed {MAX_LINE_BYTES // 1024} KiB: cut")
        if got.nbytes > MAX_STREAM_BYTES:
            raise RemoteError(f"stream from {label}: the answer passed {MAX_STREAM_BYTES >> 20} MiB: cut")
        ev = parse_event(line)
        if ev is None:
            continue
        if ev == "done":
            got.done = True
            return
        assert isinstance(ev, dict)
        piece, fr = event_text(ev)
        if piece:
            if not got.ntok:
                got.ttft = (time.perf_counter() - got.t0) * 1000
                if variant == 0:
                    t.ttft_ms = got.ttft
            got.ntok += 1
            if got.ntok > allowance or len(got.raw) + len(piece) > MAX_TEXT_CHARS:
                raise RemoteError(f"stream from {label}: more text than max_tokens={params.max_tokens} "
                                  f"asked for ({got.ntok} pieces, {len(got.raw) + len(piece)} characters): cut")
            reason, got.raw = stop_cut(got.raw + piece, params, stop_texts)
            got.text = scrub(got.raw)
            visible = got.text[: len(got.text) - held(got.text)]
            if on_token is not None and visible != got.shown and not (cancel is not None and cancel.cancelled):
                on_token(variant, visible)
            got.shown = visible
            if reason is not None:
                got.finish = reason
                return
        if fr is not None and got.finish is None:
            got.finish = "length" if fr == "length" else "eos"
