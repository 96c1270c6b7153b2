"""The OpenAI-compatible client (engine/remote/client.py) against a fault-injecting server made here on
127.0.0.1: the failures a real server cannot be made to produce on demand (5xx, 401, malformed or cut
streams, stalls), keep-alive, cancellation, the API key's handling, and the pure request building.
The real llama.cpp server is exercised in tests/test_remote_e2e.py."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.remote.client import RemoteBackend
from engine.remote.wire import (
    QWEN_FIM_TEMPLATE,
    RemoteConfig,
    RemoteError,
    fim_prompt,
    parse_endpoint,
    parse_event,
    request_body,
)
from engine.types import CancelToken, GenParams
from engine.types import stop_cut as cut

# ---------------------------------------------------------------------------------------- the fake server


class FakeRemote:
    """An OpenAI-compatible /v1 server on 127.0.0.1 whose answers are scripted per request.

    A behaviour is a dict: ``{"stream": [pieces], "delay": s, "end": "done" | "cut" | "malformed"}``,
    ``{"status": code, "body": text}`` or ``{"stall": seconds}`` (headers, then silence)."""

    def __init__(self) -> None:
        self.script: list[dict] = []
        self.default: dict = {"stream": ["x"], "end": "done"}
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.connections = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                fake.connections += 1
                super().setup()

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "fake-coder", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                fake.requests.append(json.loads(self.rfile.read(n)))
                fake.headers.append(dict(self.headers))
                b = fake.script.pop(0) if fake.script else fake.default
                if "status" in b:
                    body = b.get("body", "").encode()
                    self.send_response(b["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if "stall" in b:
                    self.wfile.flush()
                    time.sleep(b["stall"])
                    self.close_connection = True
                    return
                try:
                    for piece in b["stream"]:
                        self._chunk(b"data: " + json.dumps({"choices": [{"text": piece, "index": 0,
                                                                         "finish_reason": None}]}).encode()
                                    + b"\n\n")
                        time.sleep(b.get("delay", 0.0))
                    end = b.get("end", "done")
                    if end == "cut":
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if end == "malformed":
                        self._chunk(b"data: {not json\n\n")
                    self._chunk(b'data: {"choices": [{"text": "", "index": 0, "finish_reason": "stop"}]}\n\n')
                    self._chunk(b"data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the client hung up (a cancel)
                    self.close_connection = True

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    f = FakeRemote()
    yield f
    f.close()


def backend(fake: FakeRemote, **kw) -> RemoteBackend:
    return RemoteBackend(RemoteConfig(url=fake.url, **kw))


# ------------------------------------------------------------------------------------------------- pure


def test_endpoint_rules():
    assert parse_endpoint("http://127.0.0.1:8080/v1").label == "http://127.0.0.1:8080/v1"
    assert parse_endpoint("http://localhost:11434/v1/").path == "/v1"
    assert parse_endpoint("http://[::1]:8000/v1/completions").path == "/v1"  # a full endpoint URL: its base
    assert parse_endpoint("https://gpu.example.com/v1").port == 443
    with pytest.raises(ValueError, match="unencrypted"):
        parse_endpoint("http://gpu.example.com/v1")
    assert parse_endpoint("http://gpu.example.com/v1", allow_insecure_http=True).host == "gpu.example.com"
    with pytest.raises(ValueError, match="credentials"):
        parse_endpoint("https://user:secret@gpu.example.com/v1")
    with pytest.raises(ValueError, match="http:// or https://"):
        parse_endpoint("ftp://127.0.0.1/v1")


def test_fim_prompt_fills_in_one_pass():
    code_pre, code_suf = "x = '{suffix}'\nf(", ") # {prefix}\n"
    p = fim_prompt(QWEN_FIM_TEMPLATE, code_pre, code_suf)
    assert p == f"<|fim_prefix|>{code_pre}<|fim_suffix|>{code_suf}<|fim_middle|>"
    assert fim_prompt("<SUF>{suffix}<PRE>{prefix}<MID>", "a", "b") == "<SUF>b<PRE>a<MID>"  # SPM order
    with pytest.raises(ValueError):
        fim_prompt("no placeholders", "a", "b")


def test_request_body_per_fim_mode_and_variant():
    single = GenParams(max_tokens=48, max_lines=1, n=3, seed=7)
    body = request_body(RemoteConfig(url="http://127.0.0.1/v1"), "m", "def f(", "):\n", single, 0)
    assert body["prompt"] == "<|fim_prefix|>def f(<|fim_suffix|>):\n<|fim_middle|>"
    assert "suffix" not in body and body["stop"] == ["\n"] and body["temperature"] == 0.0
    assert body["stream"] is True and body["model"] == "m" and body["max_tokens"] == 48
    body = request_body(RemoteConfig(url="http://127.0.0.1/v1", fim="suffix"), "", "def f(", "):\n",
                        GenParams(max_lines=9), 2)
    assert body["prompt"] == "def f(" and body["suffix"] == "):\n" and "model" not in body
    assert body["temperature"] == GenParams().variant_temperature and body["seed"] == 2 and "stop" not in body
    body = request_body(RemoteConfig(url="http://127.0.0.1/v1", fim="none"), "", "a", "b", GenParams(), 0)
    assert body["prompt"] == "a" and "suffix" not in body


def test_sse_parsing_and_cutting():
    assert parse_event(b": ping\r\n") is None and parse_event(b"\n") is None
    assert parse_event(b"data: [DONE]\r\n") == "done"
    assert parse_event(b'data: {"choices": []}\n') == {"choices": []}
    with pytest.raises(RemoteError, match="malformed"):
        parse_event(b"data: {oops\n")
    with pytest.raises(RemoteError, match="overloaded"):
        parse_event(b'data: {"error": {"message": "overloaded"}}\n')
    p = GenParams(max_lines=2)
    assert cut("a\nb", p) == (None, "a\nb")
    assert cut("a\nb\nc", p) == ("lines", "a\nb")
    assert cut("x<|file_sep|>y", GenParams(), ("<|file_sep|>",)) == ("stop", "x")


# ------------------------------------------------------------------------------------- against the fake


def test_streams_and_keeps_one_connection(fake):
    fake.default = {"stream": ["return", " a", " + b"], "end": "done"}
    be = backend(fake)
    seen: list[str] = []
    comps, t = be.complete("def add(a, b):\n    ", "\n", GenParams(max_lines=1), on_token=lambda i, s: seen.append(s))
    assert [c.text for c in comps] == ["return a + b"] and comps[0].finish_reason == "eos"
    assert seen == ["return", "return a", "return a + b"]
    assert len(comps[0].token_ids) == 3 and t.ttft_ms > 0
    assert be.model_id == f"remote:fake-coder@{fake.url}"  # discovered from GET /models
    for _ in range(3):
        be.complete("x = ", "", GenParams(max_lines=1))
    assert fake.connections == 2  # GET /models on its own; 4 completions on one kept-alive connection
    assert fake.requests[0]["model"] == "fake-coder"
    assert be.ready()


def test_variants_are_one_request_each_and_deduplicated(fake):
    fake.script = [{"stream": ["a"]}, {"stream": ["b"]}, {"stream": ["a"]}]
    comps, _ = backend(fake, model="m").complete("p", "", GenParams(n=3))
    assert [c.text for c in comps] == ["a", "b"] and [c.variant for c in comps] == [0, 1]
    assert [r["seed"] for r in fake.requests] == [0, 1, 2]
    assert fake.requests[0]["temperature"] == 0.0 and fake.requests[1]["temperature"] > 0


def test_line_limit_cuts_the_stream_and_the_next_request_reconnects(fake):
    fake.default = {"stream": ["a\n", "b\n", "c\n", "d\n"], "delay": 0.01}
    be = backend(fake, model="m")
    comps, _ = be.complete("p", "", GenParams(max_lines=2))
    assert comps[0].text == "a\nb" and comps[0].finish_reason == "lines"
    comps, _ = be.complete("p", "", GenParams(max_lines=2))
    assert comps[0].text == "a\nb" and fake.connections == 2


@pytest.mark.parametrize("behaviour,match", [
    ({"status": 500, "body": '{"error": {"message": "CUDA out of memory"}}'}, "HTTP 500.*CUDA out of memory"),
    ({"status": 404, "body": "no such model"}, "HTTP 404"),
    ({"stream": ["a"], "end": "malformed"}, "malformed"),
    ({"stream": ["a", "b"], "end": "cut"}, "ended before|broke"),
])
def test_failures_raise_remote_error_and_back_off(fake, behaviour, match):
    fake.script = [behaviour]
    be = backend(fake, model="m")
    with pytest.raises(RemoteError, match=match):
        be.complete("p", "", GenParams())
    assert not be.ready() and be.backoff.failures == 1
    be.backoff.retry_at = 0.0  # the pause is over: the next request tries again, and succeeds
    comps, _ = be.complete("p", "", GenParams())
    assert comps[0].text == "x" and be.backoff.failures == 0


def test_refused_connection_is_a_remote_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    be = RemoteBackend(RemoteConfig(url=f"http://127.0.0.1:{port}/v1", model="m"))
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="refused"):
        be.complete("p", "", GenParams(deadline=time.monotonic() + 5))
    assert time.monotonic() - t0 < 2 and not be.ready()


def test_a_stalled_server_never_holds_past_the_deadline(fake):
    fake.script = [{"stall": 10}]
    be = backend(fake, model="m")
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="deadline|in time"):
        be.complete("p", "", GenParams(deadline=time.monotonic() + 0.4))
    assert time.monotonic() - t0 < 1.5


def test_a_slow_stream_returns_what_it_has_at_the_deadline(fake):
    fake.default = {"stream": ["a", "b", "c", "d", "e", "f"], "delay": 0.3}
    comps, _ = backend(fake, model="m").complete("p", "", GenParams(deadline=time.monotonic() + 0.75))
    assert comps[0].finish_reason == "deadline" and comps[0].text in ("ab", "abc")


def test_cancel_stops_a_stream_at_once(fake):
    fake.default = {"stream": list("abcdefghij"), "delay": 0.2}
    cancel = CancelToken()
    be = backend(fake, model="m")
    t0 = time.monotonic()
    threading.Timer(0.3, cancel.cancel).start()
    comps, _ = be.complete("p", "", GenParams(), cancel=cancel)
    assert comps[0].finish_reason == "cancelled" and time.monotonic() - t0 < 0.8
    assert 1 <= len(comps[0].text) <= 3
    assert be.ready()  # a cancel is not the server's fault


def test_api_key_is_sent_but_never_shown(fake, caplog, monkeypatch):
    key = "sk-test-SECRET-123"
    fake.script = [{"status": 401, "body": '{"error": {"message": "bad key"}}'}]
    be = backend(fake, model="m", api_key=key)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(RemoteError) as e:
        be.complete("p", "", GenParams())
    assert fake.headers[0]["Authorization"] == f"Bearer {key}"
    assert key not in str(e.value) and key not in caplog.text and key not in repr(be) and key not in repr(be.cfg)
    monkeypatch.setenv("FLINT_REMOTE_API_KEY", "sk-from-env")
    be2 = backend(fake, model="m")
    be2.complete("p", "", GenParams())
    assert fake.headers[-1]["Authorization"] == "Bearer sk-from-env"


def test_a_variant_cut_by_the_deadline_keeps_the_ones_before(fake):
    fake.script = [{"stream": ["a"]}, {"stall": 5}]
    comps, _ = backend(fake, model="m").complete("p", "", GenParams(n=2, deadline=time.monotonic() + 1.0))
    assert [c.text for c in comps] == ["a"] and comps[0].finish_reason == "eos"


def test_a_server_that_accepts_but_never_answers_cannot_hang_the_model_lookup():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)  # accepts connections (the kernel does), never reads or answers
    try:
        be = RemoteBackend(RemoteConfig(url=f"http://127.0.0.1:{srv.getsockname()[1]}/v1"))
        t0 = time.monotonic()
        assert be.probe(timeout_s=0.5) is False
        with pytest.raises(RemoteError):
            be.complete("p", "", GenParams(deadline=time.monotonic() + 0.5))
        assert time.monotonic() - t0 < 3.0
    finally:
        srv.close()


def test_tls_verification_stays_on(fake, tmp_path):
    """A server with a certificate nobody vouches for is refused (no silent fallback to unverified TLS)."""
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    fake.httpd.socket = ctx.wrap_socket(fake.httpd.socket, server_side=True)
    be = RemoteBackend(RemoteConfig(url=f"https://127.0.0.1:{fake.port}/v1", model="m"))
    with pytest.raises(RemoteError, match="TLS|certificate"):
        be.complete("p", "", GenParams(deadline=time.monotonic() + 5))
    assert fake.requests == []  # nothing was sent over the unverified connection
