"""A client for OpenAI-compatible ``/v1/completions`` servers (vLLM, llama.cpp's server, TGI, Ollama).

``RemoteBackend`` has the Engine facade's shape (engine/engine_api.md): ``complete(prefix, suffix,
params, cancel, on_token)`` returns variants as ``Completion``s and streams text to ``on_token``, so the
worker, the type-through store and the disk cache treat its answers like the local model's.

- Standard library only: one ``http.client`` connection kept alive across requests (HTTP/1.1), TLS
  through ``ssl.create_default_context()`` (certificates and host names verified, always). Plain HTTP
  only to a loopback address unless ``allow_insecure_http`` says otherwise.
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
  ``RemoteError`` and start a backoff (``engine.routing.Backoff``): ``ready()`` is False until the
  pause is over, so callers use the local model meanwhile. The API key is sent as a bearer token and
  appears in no log line, error message or ``repr``.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import ssl
import threading
import time

from engine.policy.routing import Backoff
from engine.remote.wire import (
    API_KEY_ENV,
    ERROR_BODY_CHARS,
    FIM_MODES,
    RemoteConfig,
    RemoteError,
    event_text,
    fim_prompt,
    parse_endpoint,
    parse_event,
    request_body,
)
from engine.types import CancelToken, Completion, GenParams, Timings, TokenCallback, stop_cut

log = logging.getLogger("flint.remote")


WATCH_S = 0.01  # how often the watchdog looks at the cancel token and the deadline


class RemoteBackend:
    """An OpenAI-compatible completions server as a backend. Not thread-safe: one worker thread owns it
    (``ready``, ``status`` and ``close`` may be called from anywhere)."""

    kind = "remote"

    def __init__(self, cfg: RemoteConfig) -> None:
        self.cfg = cfg
        if cfg.fim not in FIM_MODES:
            raise ValueError(f"remote FIM mode must be one of {', '.join(FIM_MODES)}, got {cfg.fim!r}")
        if cfg.fim == "template":
            fim_prompt(cfg.fim_template, "", "")  # raises on a template without {prefix}
        self.endpoint = parse_endpoint(cfg.url, cfg.allow_insecure_http)
        self._api_key = cfg.api_key or os.environ.get(API_KEY_ENV, "")
        self._conn: http.client.HTTPConnection | None = None
        self._conn_lock = threading.Lock()
        self._model: str | None = cfg.model or None
        self.backoff = Backoff(cfg.backoff_base_s, cfg.backoff_cap_s)
        self.config = cfg  # the prompt windows (max_prefix_chars / max_suffix_chars), as Engine.config
        self.requests = 0  # HTTP requests sent
        self.completion_requests = 0  # POST /completions among them
        self.connections = 0  # connections opened
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
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

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
    def _headers(self, stream: bool) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json",
             "Connection": "keep-alive", "User-Agent": "flint"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    def _connection(self) -> http.client.HTTPConnection:
        with self._conn_lock:
            if self._conn is None:
                ep = self.endpoint
                if ep.scheme == "https":
                    self._conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=self.cfg.connect_timeout_s,
                                                             context=ssl.create_default_context())
                else:
                    self._conn = http.client.HTTPConnection(ep.host, ep.port, timeout=self.cfg.connect_timeout_s)
                self.connections += 1
            return self._conn

    def _send(self, method: str, path: str, body: bytes | None, stream: bool, deadline: float | None,
              watched: bool = True) -> http.client.HTTPResponse:
        """Send a request on the kept-alive connection (a fresh one if the server closed it meanwhile).
        ``watched``: a watchdog enforces the deadline while the answer is read (else a socket timeout)."""
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                if conn.sock is None:
                    conn.connect()
                timeout = self.cfg.connect_timeout_s
                if deadline is not None:
                    timeout = max(0.05, min(timeout, deadline - time.monotonic()))
                conn.sock.settimeout(timeout)
                conn.request(method, self.endpoint.path + path, body=body, headers=self._headers(stream))
                self.requests += 1
                # the first byte may take a whole prompt pass: the watchdog enforces the deadline
                if watched and deadline is not None:
                    conn.sock.settimeout(None)
                elif deadline is not None:
                    conn.sock.settimeout(max(0.05, deadline - time.monotonic()))
                else:
                    conn.sock.settimeout(max(30.0, self.cfg.connect_timeout_s))
                return conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self.close()
                if attempt == 0 and reused:
                    continue  # the server closed the idle connection: once more on a new one
                raise RemoteError(f"connection to {self.endpoint.label} lost: {type(e).__name__}") from None
            except TimeoutError:
                self.close()
                raise RemoteError(f"{self.endpoint.label} did not answer in time") from None
            except ssl.SSLError as e:
                self.close()
                raise RemoteError(f"TLS with {self.endpoint.host} failed: {e.reason or e}") from None
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise RemoteError(f"cannot reach {self.endpoint.label}: {_describe(e)}") from None
        raise AssertionError("unreachable")

    def _check_status(self, resp: http.client.HTTPResponse) -> None:
        if resp.status == 200:
            return
        try:
            body = resp.read(4096).decode("utf-8", "replace")
        except Exception:
            body = ""
        self.close()
        detail = body
        try:
            obj = json.loads(body)
            err = obj.get("error", obj) if isinstance(obj, dict) else obj
            detail = str(err.get("message", err) if isinstance(err, dict) else err)
        except ValueError:
            pass
        raise RemoteError(f"HTTP {resp.status} {resp.reason}: {detail.strip()[:ERROR_BODY_CHARS]}")

    def _discover_model(self, params: GenParams, cancel: CancelToken | None) -> str:
        """The served model's name (GET {url}/models), for the cache identity and the request body."""
        deadline = params.deadline if params.deadline is not None else time.monotonic() + 30.0
        resp = self._send("GET", "/models", None, stream=False, deadline=deadline, watched=False)
        self._check_status(resp)
        try:
            obj = json.loads(resp.read(1 << 20))
            data = obj["data"]
            name = data[0]["id"] if data else ""
        except (ValueError, KeyError, TypeError, IndexError):
            self.close()
            raise RemoteError("malformed answer to GET /models") from None
        except OSError as e:
            self.close()
            raise RemoteError(f"GET /models from {self.endpoint.label} failed: {_describe(e)}") from None
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
        text, ntok, ttft, finish = "", 0, 0.0, None
        try:
            try:
                resp = self._send("POST", "/completions", body, stream=True, deadline=params.deadline)
            except RemoteError:
                if tripped:
                    return _ended(text, ntok, tripped[0], ttft, variant)
                raise
            if tripped:  # the answer's head arrived just as time ran out
                self.close()
                return _ended(text, ntok, tripped[0], ttft, variant)
            self._check_status(resp)
            done = False
            while True:
                try:
                    line = resp.readline(1 << 20)
                except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
                    if tripped:
                        break
                    raise RemoteError(f"stream from {self.endpoint.label} broke: {_describe(e)}") from None
                if not line:
                    break
                ev = parse_event(line)
                if ev is None:
                    continue
                if ev == "done":
                    done = True
                    break
                assert isinstance(ev, dict)
                piece, fr = event_text(ev)
                if piece:
                    if not ntok:
                        ttft = (time.perf_counter() - t0) * 1000
                        if variant == 0:
                            t.ttft_ms = ttft
                    ntok += 1
                    reason, text = stop_cut(text + piece, params, self.cfg.stop_texts)
                    if on_token is not None and not (cancel is not None and cancel.cancelled):
                        on_token(variant, text)
                    if reason is not None:
                        finish = reason
                        break
                if fr is not None and finish is None:
                    finish = "length" if fr == "length" else "eos"
            if tripped:
                self.close()
                return _ended(text, ntok, tripped[0], ttft, variant)
            if finish in ("lines", "stop") and not done:
                self.close()  # cut before the server finished: this response cannot be read to its end
            elif not done:
                self.close()
                raise RemoteError(f"stream from {self.endpoint.label} ended before [DONE]")
            else:
                try:
                    resp.read()  # the chunked terminator: the connection stays usable
                except Exception:
                    self.close()
            t.decode_tokens += ntok
            return Completion(text=text, token_ids=[0] * ntok, finish_reason=finish or "eos", ttft_ms=ttft,
                              total_ms=(time.perf_counter() - t0) * 1000, variant=variant, source="model")
        finally:
            stop.set()

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
            conn = self._conn
            sock = conn.sock if conn is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return


def _ended(text: str, ntok: int, reason: str, ttft: float, variant: int) -> Completion:
    """A stream stopped by a cancel or the deadline: what it wrote so far (nothing at a deadline for the
    first variant is a failure: the server did not answer in time)."""
    if reason == "deadline" and not text and variant == 0:
        raise RemoteError("no answer before the deadline")
    return Completion(text=text, token_ids=[0] * ntok, finish_reason=reason, ttft_ms=ttft, variant=variant,
                      source="model")


def _describe(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    msg = str(e)
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
