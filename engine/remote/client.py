"""A client for OpenAI-compatible ``/v1/completions`` servers (vLLM, llama.cpp's server, TGI, Ollama).

``RemoteBackend`` has the Engine facade's shape (engine/engine_api.md): ``complete(prefix, suffix,
params, cancel, on_token)`` returns variants as ``Completion``s and streams text to ``on_token``, so the
worker, the type-through store and the disk cache treat its answers like the local model's.

- Standard library only: one ``http.client`` connection kept alive across requests (HTTP/1.1), TLS
  through ``ssl.create_default_context()`` (certificates and host names verified, always):
  engine/remote/connection.py. Plain HTTP only to a loopback address unless ``allow_insecure_http`` says
  otherwise.
- Streaming (server-sent events); a watchdog thread closes the connection the moment the request is
  cancelled or its overall deadline passes (every request has one, ``REQUEST_CAP_S`` when the caller gave
  none), so a stalled or dripping server never holds the caller: at the deadline the text streamed so far
  is the answer (``finish_reason="deadline"``); with nothing streamed it is a ``RemoteError``. A cancelled
  or cut stream costs the connection (HTTP/1.1 cannot abort a response otherwise); the next request opens
  a new one. What an answer may bring is capped (engine/remote/stream.py).
- GET /models (the served model's name, and the check ``probe`` makes at load) runs on its own
  connection with its own overall deadline and an optional cancel, so a settings change (``shut``) or a
  completion never waits behind it.
- FIM (``fim`` = template / suffix / none) and the request body: engine/remote/wire.py, with the
  configuration, the base URL's checks and the event-stream parsing.
- Variants: one request each, in turn on the same connection (variant 0 greedy, the others sampled
  with their own seed), while the deadline allows; servers differ too much in ``n`` support.
- Failures (refused, reset, HTTP 4xx/5xx, a malformed or truncated stream, no answer in time) raise
  ``RemoteError`` and start a backoff (engine/policy/routing.py's ``Backoff``): ``ready()`` is False until the
  pause is over, so callers use the local model meanwhile; a job queued before the failure fails at once
  instead of asking again. The API key (settings or environment) is sent as a bearer token and registered
  with engine/remote/secrets.py: whatever the server sends back (error bodies, events, a model name, even
  completion text) reaches no log line, message, status or cache with the key in it.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace

from engine.policy.routing import Backoff
from engine.remote import secrets
from engine.remote.connection import Cancellable, Connection, Watchdog, describe
from engine.remote.stream import Stream, read_events
from engine.remote.wire import (
    API_KEY_ENV,
    FIM_MODES,
    MAX_LINE_BYTES,
    MAX_MODELS_BYTES,
    REQUEST_CAP_S,
    RemoteConfig,
    RemoteError,
    fim_prompt,
    parse_endpoint,
    request_body,
)
from engine.text.window import from_line_start
from engine.types import CancelToken, Completion, GenParams, Timings, TokenCallback

log = logging.getLogger("flint.remote")


class RemoteBackend:
    """An OpenAI-compatible completions server as a backend. Not thread-safe: one worker thread owns it
    (``ready`` and ``close`` may be called from anywhere)."""

    kind = "remote"

    def __init__(self, cfg: RemoteConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._clock = clock  # the backoff's time (tests move it by hand)
        if cfg.fim not in FIM_MODES:
            raise ValueError(f"remote FIM mode must be one of {', '.join(FIM_MODES)}, got {cfg.fim!r}")
        if cfg.fim == "template":
            fim_prompt(cfg.fim_template, "", "")  # raises on a template without {prefix}
        self.endpoint = parse_endpoint(cfg.url, cfg.allow_insecure_http)
        key = cfg.api_key or os.environ.get(API_KEY_ENV, "")
        secrets.register(key)  # whatever the server sends back, this never leaves Flint (secrets.redact)
        self.http = Connection(self.endpoint, cfg.connect_timeout_s, key)  # completions, kept alive
        # GET /models (the health and name check): its own connection, so a completion never waits behind it
        self.health = Connection(self.endpoint, cfg.connect_timeout_s, key)
        self._closed = False
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
        return self.backoff.ready(self._clock() if now is None else now)

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> None:
        """Nothing to warm here (the server keeps its own caches)."""
        return None

    def prefill_seconds(self, prefix: str, suffix: str = "") -> None:
        """Not known here (the server's prompt pass, on its own CPU)."""
        return None

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
        """Close both connections (from any thread: a request blocked on one returns at once)."""
        self.http.close()
        self.health.close()

    def shut(self) -> None:
        """For good (a settings change replaced this backend): what runs now ends, nothing new starts."""
        self._closed = True
        self.close()

    def probe(self, timeout_s: float = 2.0, cancel: Cancellable | None = None) -> bool:
        """Learn the served model's name now (it is part of the cache identity), if the server answers
        within ``timeout_s`` (overall) and ``cancel`` (anything with ``cancelled``) does not say stop first;
        a server that is down is not an error here (the first request retries)."""
        if self._model is not None:
            return True
        try:
            self._model = self._discover_model(time.monotonic() + timeout_s, cancel)
            return True
        except RemoteError as e:
            if not self._closed and not (cancel is not None and cancel.cancelled):
                log.info("remote %s not reachable yet: %s", self.endpoint.label, e)
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
        if self._closed:
            raise RemoteError("the remote settings changed: this client is closed")
        if not self.ready():  # queued before a failure: it fails at once instead of trying a server just failed
            raise RemoteError(f"backing off after: {self.backoff.last_error}")
        if params.deadline is None:  # every request has an overall deadline
            params = replace(params, deadline=time.monotonic() + REQUEST_CAP_S)
        try:
            if self._model is None:
                self._model = self._discover_model(params.deadline or time.monotonic() + REQUEST_CAP_S, cancel)
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
            if self._closed:  # shut under it (a settings change): not the server's failure
                raise RemoteError("the remote settings changed: this client is closed") from None
            self.failures += 1
            pause = self.backoff.failed(self._clock(), str(e))
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
    def _discover_model(self, deadline: float, cancel: Cancellable | None) -> str:
        """The served model's name (GET {url}/models), for the cache identity and the request body; on the
        health connection, within ``deadline`` overall (a server dripping a byte a second included)."""
        conn = self.health
        try:
            with Watchdog(conn, cancel, deadline) as watch:
                try:
                    resp = conn.send("GET", "/models", None, stream=False, deadline=deadline)
                    conn.check_status(resp)
                    obj = conn.read_json(resp, MAX_MODELS_BYTES, "GET /models")
                except RemoteError:
                    if watch.tripped:
                        raise RemoteError(f"GET /models from {self.endpoint.label}: {_why(watch.tripped)}") from None
                    raise
        finally:
            conn.close()  # asked rarely: no connection kept for it
        try:
            data = obj["data"]  # type: ignore[index]
            name = data[0]["id"] if data else ""
        except (KeyError, TypeError, IndexError):
            raise RemoteError("malformed answer to GET /models") from None
        if not isinstance(name, str) or not name:
            raise RemoteError("the server lists no model")
        return secrets.redact(name)[:200]  # a name goes into the status and the cache identity

    def _one(self, prefix: str, suffix: str, params: GenParams, variant: int, cancel: CancelToken | None,
             on_token: TokenCallback | None, t: Timings) -> Completion:
        """One streamed variant."""
        body = json.dumps(request_body(self.cfg, self._model or "", prefix, suffix, params, variant)).encode()
        self.completion_requests += 1
        t0 = time.perf_counter()
        assert params.deadline is not None
        with Watchdog(self.http, cancel, params.deadline) as watch:
            try:
                resp = self.http.send("POST", "/completions", body, stream=True, deadline=params.deadline)
            except RemoteError:
                if watch.tripped:
                    return _ended("", 0, watch.tripped, 0.0, variant)
                raise
            if watch.tripped:  # the answer's head arrived just as time ran out
                self.close()
                return _ended("", 0, watch.tripped, 0.0, variant)
            try:
                self.http.check_status(resp)
            except RemoteError:
                if watch.tripped:
                    return _ended("", 0, watch.tripped, 0.0, variant)
                raise
            got = Stream(t0)
            try:
                read_events(resp, got, params, variant, cancel, on_token, t, self.endpoint.label,
                            self.cfg.stop_texts, lambda: watch.tripped, describe)
            except RemoteError:
                self.close()  # a cap, a malformed event: this response cannot be read to its end
                raise
            if watch.tripped:
                self.close()
                return _ended(got.final(), got.ntok, watch.tripped, got.ttft, variant)
        self._end_response(resp, got)
        t.decode_tokens += got.ntok
        return Completion(text=got.final(), token_ids=[0] * got.ntok, finish_reason=got.finish or "eos",
                          ttft_ms=got.ttft, total_ms=(time.perf_counter() - t0) * 1000, variant=variant,
                          source="model")

    def _end_response(self, resp: http.client.HTTPResponse, got: Stream) -> None:
        """After a stream was read: keep the connection for the next request if the response was read to its
        end, else close it (a stream cut by a stop rule); one that ended before ``[DONE]`` is a failure."""
        if got.finish in ("lines", "stop") and not got.done:
            self.http.close()  # cut before the server finished: this response cannot be read to its end
        elif not got.done:
            self.http.close()
            raise RemoteError(f"stream from {self.endpoint.label} ended before [DONE]")
        else:
            try:
                resp.read(MAX_LINE_BYTES)  # the chunked terminator: the connection stays usable
                if not resp.isclosed():
                    self.http.close()  # more than a terminator after [DONE]: not worth reading
            except Exception:
                self.http.close()


def _why(tripped: str) -> str:
    return "no answer before the deadline" if tripped == "deadline" else "cancelled"


def _ended(text: str, ntok: int, reason: str, ttft: float, variant: int) -> Completion:
    """A stream stopped by a cancel or the deadline: what it wrote so far (nothing at a deadline for the
    first variant is a failure: the server did not answer in time)."""
    if reason == "deadline" and not text and variant == 0:
        raise RemoteError("no answer before the deadline")
    return Completion(text=text, token_ids=[0] * ntok, finish_reason=reason, ttft_ms=ttft, variant=variant,
                      source="model")
