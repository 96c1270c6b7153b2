"""A client for OpenAI-compatible ``/v1/completions`` servers (vLLM, llama.cpp's server, TGI, Ollama).

``RemoteBackend`` has the Engine facade's shape (engine/engine_api.md): ``complete(prefix, suffix,
params, cancel, on_token)`` returns variants as ``Completion``s and streams text to ``on_token``, so the
worker, the type-through store and the disk cache treat its answers like the local model's.

- Standard library only: one ``http.client`` connection kept alive across requests (HTTP/1.1), TLS
  through ``ssl.create_default_context()`` (certificates and host names verified, always):
  engine/remote/connection.py. Plain HTTP only to a loopback address unless ``allow_insecure_http`` says
  otherwise.
- Streaming (server-sent events); a watchdog thread closes the connection the moment the request is
  cancelled or its deadline passes, so a stalled server never holds the caller: at the deadline the
  text streamed so far is the answer (``finish_reason="deadline"``); with nothing streamed it is a
  ``RemoteError``. A cancelled or cut stream costs the connection (HTTP/1.1 cannot abort a response
  otherwise); the next request opens a new one.
- FIM (``fim`` = template / suffix / none) and the request body: engine/remote/wire.py, with the
  configuration, the base URL's checks and the event-stream parsing.
- Variants: one request each, in turn on the same connection (variant 0 greedy, the others sampled
  with their own seed), while the deadline allows; servers differ too much in ``n`` support.
- Failures (refused, reset, HTTP 4xx/5xx, a malformed or truncated stream, no answer in time) raise
  ``RemoteError`` and start a backoff (engine/policy/routing.py's ``Backoff``): ``ready()`` is False until the
  pause is over, so callers use the local model meanwhile. The API key is sent as a bearer token and
  appears in no log line, error message or ``repr``.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import threading
import time
from dataclasses import dataclass

from engine.policy.routing import Backoff
from engine.remote.connection import Connection, describe
from engine.remote.wire import (
    API_KEY_ENV,
    FIM_MODES,
    RemoteConfig,
    RemoteError,
    event_text,
    fim_prompt,
    parse_endpoint,
    parse_event,
    request_body,
)
from engine.text.window import from_line_start
from engine.types import CancelToken, Completion, GenParams, Timings, TokenCallback, stop_cut

log = logging.getLogger("flint.remote")


WATCH_S = 0.01  # how often the watchdog looks at the cancel token and the deadline


class RemoteBackend:
    """An OpenAI-compatible completions server as a backend. Not thread-safe: one worker thread owns it
    (``ready`` and ``close`` may be called from anywhere)."""

    kind = "remote"

    def __init__(self, cfg: RemoteConfig) -> None:
        self.cfg = cfg
        if cfg.fim not in FIM_MODES:
            raise ValueError(f"remote FIM mode must be one of {', '.join(FIM_MODES)}, got {cfg.fim!r}")
        if cfg.fim == "template":
            fim_prompt(cfg.fim_template, "", "")  # raises on a template without {prefix}
        self.endpoint = parse_endpoint(cfg.url, cfg.allow_insecure_http)
        self.http = Connection(self.endpoint, cfg.connect_timeout_s, cfg.api_key or os.environ.get(API_KEY_ENV, ""))
        self._model: str | None = cfg.model or None
        self.backoff = Backoff(cfg.backoff_base_s, cfg.backoff_cap_s)
        self.config = cfg  # the prompt windows (max_prefix_chars / max_suffix_chars), as Engine.config
        self.completion_requests = 0  # POST /completions sent
        self.failures = 0

    def __repr__(self) -> str:
        return f"RemoteBackend({self.endpoint.label}, model={self._model or '?'})"

    # ---- identity and health ----------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._model or self.cfg.model or "default"

    @property
    def model_id(self) -> str:
        """Identity for caches: the served model and where it is served."""
        return f"remote:{self.model_name}@{self.endpoint.label}"

    def ready(self, now: float | None = None) -> bool:
        """May a request try the remote now (not backing off after a failure)?"""
        return self.backoff.ready(time.monotonic() if now is None else now)

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> bool:
        """Nothing to warm here (the server keeps its own caches)."""
        return False

    def set_context(self, block: object) -> bool:
        """A remote server gets no repository context block (its prompt is text; the block is for a local
        KV cache): nothing changes."""
        return False

    @property
    def context_digest(self) -> str:
        return ""

    @property
    def context_labels(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        self.http.close()

    def probe(self, timeout_s: float = 2.0) -> bool:
        """Learn the served model's name now (it is part of the cache identity), if the server answers
        within ``timeout_s``; a server that is down is not an error here (the first request retries)."""
        if self._model is not None:
            return True
        try:
            self._model = self._discover_model(GenParams(deadline=time.monotonic() + timeout_s), None)
            return True
        except RemoteError as e:
            log.info("remote %s not reachable yet: %s", self.endpoint.label, e)
            self.close()
            return False

    # ---- the facade ---------------------------------------------------------------------------------
    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: TokenCallback | None = None
                 ) -> tuple[list[Completion], Timings]:
        # a line of whitespace only is written from its start, as the local engine does
        return from_line_start(lambda p, seen: self._complete(p, suffix, params, cancel, seen), prefix, suffix, on_token)

    def _complete(self, prefix: str, suffix: str, params: GenParams | None, cancel: CancelToken | None,
                  on_token: TokenCallback | None) -> tuple[list[Completion], Timings]:
        params = params or GenParams()
        t = Timings()
        from engine.text.window import clip_window

        prefix, suffix = clip_window(prefix, suffix, self.cfg.max_prefix_chars, self.cfg.max_suffix_chars)
        try:
            if self._model is None:
                self._model = self._discover_model(params, cancel)
            outs: list[Completion] = []
            for i in range(max(1, params.n)):
                if i > 0:
                    left = None if params.deadline is None else params.deadline - time.monotonic()
                    spent = (time.perf_counter() - t.started)
                    if (cancel is not None and cancel.cancelled) or (left is not None and left < spent / i):
                        break  # no time for another variant
                c = self._one(prefix, suffix, params, i, cancel, on_token, t)
                if c.finish_reason in ("cancelled", "deadline"):
                    if c.text or i == 0:
                        outs.append(c)
                    break
                outs.append(c)
        except RemoteError as e:
            self.failures += 1
            pause = self.backoff.failed(time.monotonic(), str(e))
            log.warning("remote %s failed: %s (next try in %.1f s)", self.endpoint.label, e, pause)
            self.close()
            raise
        self.backoff.succeeded()
        t.total_ms = (time.perf_counter() - t.started) * 1000
        seen: set[str] = set()
        uniq: list[Completion] = []
        for c in outs:
            if c.text in seen and uniq:
                continue
            seen.add(c.text)
            c.variant = len(uniq)
            c.total_ms = t.total_ms
            uniq.append(c)
        return uniq, t

    # ---- HTTP -------------------------------------------------------------------------------------------
    def _discover_model(self, params: GenParams, cancel: CancelToken | None) -> str:
        """The served model's name (GET {url}/models), for the cache identity and the request body."""
        deadline = params.deadline if params.deadline is not None else time.monotonic() + 30.0
        resp = self.http.send("GET", "/models", None, stream=False, deadline=deadline, watched=False)
        self.http.check_status(resp)
        try:
            obj = json.loads(resp.read(1 << 20))
            data = obj["data"]
            name = data[0]["id"] if data else ""
        except (ValueError, KeyError, TypeError, IndexError):
            self.close()
            raise RemoteError("malformed answer to GET /models") from None
        except OSError as e:
            self.close()
            raise RemoteError(f"GET /models from {self.endpoint.label} failed: {describe(e)}") from None
        if not isinstance(name, str) or not name:
            raise RemoteError("the server lists no model")
        return name

    def _one(self, prefix: str, suffix: str, params: GenParams, variant: int, cancel: CancelToken | None,
             on_token: TokenCallback | None, t: Timings) -> Completion:
        """One streamed variant."""
        body = json.dumps(request_body(self.cfg, self._model or "", prefix, suffix, params, variant)).encode()
        self.completion_requests += 1
        t0 = time.perf_counter()
        stop = threading.Event()
        tripped: list[str] = []
        watchdog = threading.Thread(target=self._watch, args=(cancel, params.deadline, stop, tripped),
                                    name="flint-remote-watchdog", daemon=True)
        watchdog.start()
        try:
            try:
                resp = self.http.send("POST", "/completions", body, stream=True, deadline=params.deadline)
            except RemoteError:
                if tripped:
                    return _ended("", 0, tripped[0], 0.0, variant)
                raise
            if tripped:  # the answer's head arrived just as time ran out
                self.close()
                return _ended("", 0, tripped[0], 0.0, variant)
            self.http.check_status(resp)
            got = _Stream(t0)
            self._read(resp, got, params, variant, cancel, on_token, t, tripped)
            if tripped:
                self.close()
                return _ended(got.text, got.ntok, tripped[0], got.ttft, variant)
            self._end_response(resp, got)
            t.decode_tokens += got.ntok
            return Completion(text=got.text, token_ids=[0] * got.ntok, finish_reason=got.finish or "eos",
                              ttft_ms=got.ttft, total_ms=(time.perf_counter() - t0) * 1000, variant=variant,
                              source="model")
        finally:
            stop.set()

    def _read(self, resp: http.client.HTTPResponse, got: _Stream, params: GenParams, variant: int,
              cancel: CancelToken | None, on_token: TokenCallback | None, t: Timings, tripped: list[str]) -> None:
        """Read the event stream into ``got`` until ``[DONE]``, its end, a stop rule, or the watchdog cut it
        (``tripped``), streaming the text so far to ``on_token``."""
        while True:
            try:
                line = resp.readline(1 << 20)
            except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
                if tripped:
                    return
                raise RemoteError(f"stream from {self.endpoint.label} broke: {describe(e)}") from None
            if not line:
                return
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
                reason, got.text = stop_cut(got.text + piece, params, self.cfg.stop_texts)
                if on_token is not None and not (cancel is not None and cancel.cancelled):
                    on_token(variant, got.text)
                if reason is not None:
                    got.finish = reason
                    return
            if fr is not None and got.finish is None:
                got.finish = "length" if fr == "length" else "eos"

    def _end_response(self, resp: http.client.HTTPResponse, got: _Stream) -> None:
        """After a stream was read: keep the connection for the next request if the response was read to its
        end, else close it (a stream cut by a stop rule); one that ended before ``[DONE]`` is a failure."""
        if got.finish in ("lines", "stop") and not got.done:
            self.close()  # cut before the server finished: this response cannot be read to its end
        elif not got.done:
            self.close()
            raise RemoteError(f"stream from {self.endpoint.label} ended before [DONE]")
        else:
            try:
                resp.read()  # the chunked terminator: the connection stays usable
            except Exception:
                self.close()

    def _watch(self, cancel: CancelToken | None, deadline: float | None, stop: threading.Event,
               tripped: list[str]) -> None:
        """Close the connection when the request is cancelled or out of time (unblocks the reader)."""
        while not stop.wait(WATCH_S):
            reason = None
            if cancel is not None and cancel.cancelled:
                reason = "cancelled"
            elif deadline is not None and time.monotonic() >= deadline:
                reason = "deadline"
            if reason is None:
                continue
            tripped.append(reason)
            self.http.shutdown()
            return


@dataclass
class _Stream:
    """What one variant's event stream gave so far."""

    t0: float  # when the request was sent (perf_counter)
    text: str = ""
    ntok: int = 0  # pieces received (the server's tokens, near enough)
    ttft: float = 0.0
    finish: str | None = None
    done: bool = False  # [DONE] arrived: the response was read to its end


def _ended(text: str, ntok: int, reason: str, ttft: float, variant: int) -> Completion:
    """A stream stopped by a cancel or the deadline: what it wrote so far (nothing at a deadline for the
    first variant is a failure: the server did not answer in time)."""
    if reason == "deadline" and not text and variant == 0:
        raise RemoteError("no answer before the deadline")
    return Completion(text=text, token_ids=[0] * ntok, finish_reason=reason, ttft_ms=ttft, variant=variant,
                      source="model")
