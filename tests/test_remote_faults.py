"""A hostile or broken OpenAI-compatible server (docs/reliability.md, "A hostile or broken remote"), against the
remote client itself (engine/remote/client.py): a real socket server on 127.0.0.1 in a thread, writing raw
HTTP so it can misbehave in ways http.server would not (drip a byte a second, never end a line, repeat the
request's headers in an error page). Every test is bounded in time. The same server behind a whole session
and a real `flint serve`: tests/test_remote_faults_session.py."""

from __future__ import annotations

import json
import logging
import secrets as pysecrets
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from engine.remote import secrets
from engine.remote.client import RemoteBackend
from engine.remote.wire import MAX_STREAM_BYTES, RemoteConfig, RemoteError
from engine.types import GenParams
from tests.fakes import Clock, wait_for

# a key no shape rule knows (no "sk-", no "key …" before it): only its registration can hide it
KEY = "Zq" + pysecrets.token_hex(12) + "Vx"

Behaviour = Callable[[dict], Iterator["bytes | float"]]  # yields bytes to send, or seconds to sleep


def head(status: int = 200, reason: str = "OK", ctype: str = "text/event-stream", length: int | None = None,
         extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n{size}Connection: close\r\n{extra}\r\n".encode()


def reply(status: int, body: str, reason: str = "Error", ctype: str = "application/json") -> Behaviour:
    def go(req: dict) -> Iterator[bytes | float]:
        data = body.replace("{AUTH}", req["headers"].get("authorization", "")).encode()
        yield head(status, reason, ctype, len(data)) + data
    return go


def event(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"text": text, "index": 0, "finish_reason": None}]}).encode() + b"\n\n"


def stream(*pieces: str, delay: float = 0.0, tail: bytes = b"data: [DONE]\n\n") -> Behaviour:
    def go(req: dict) -> Iterator[bytes | float]:
        yield head()
        for p in pieces:
            yield event(p)
            if delay:
                yield delay
        yield tail
    return go


def models(name: str = "hostile-coder") -> Behaviour:
    return reply(200, json.dumps({"object": "list", "data": [{"id": name}]}), "OK")


def drip(inner: Behaviour, every_s: float = 1.0) -> Behaviour:
    """``inner``'s answer, one byte every ``every_s`` seconds."""
    def go(req: dict) -> Iterator[bytes | float]:
        for chunk in inner(req):
            if isinstance(chunk, float):
                continue
            for i in range(len(chunk)):
                yield chunk[i:i + 1]
                yield every_s
    return go


def endless(unit: bytes, total: int | None = None, newline: bool = True) -> Behaviour:
    """A 200 event stream of ``unit`` repeated (to ``total`` bytes, or forever)."""
    def go(req: dict) -> Iterator[bytes | float]:
        yield head() + (b"" if newline else b"data: ")
        block = unit * max(1, 65536 // len(unit))
        sent = 0
        while total is None or sent < total:
            yield block
            sent += len(block)
        yield b"\n\ndata: [DONE]\n\n"
    return go


class Hostile:
    """The server. ``routes[(case, kind)]`` (kind ``models`` | ``completions``; case the first path part of a
    ``/{case}/v1`` base URL, "" for ``/v1``) says what it does; ``sent[case]`` counts the bytes it wrote
    before the client went away; ``auth`` holds every Authorization header it saw."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Behaviour] = {}
        self.sent: dict[str, int] = {}
        self.auth: list[str] = []
        self.seen: list[tuple[str, str]] = []  # (case, kind) per request
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(65537).decode("latin-1")
                if not line:
                    return
                method, path = line.split()[:2]
                headers = {}
                while (h := self.rfile.readline(65537).decode("latin-1").strip()):
                    k, _, v = h.partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = self.rfile.read(int(headers.get("content-length", 0) or 0))
                parts = path.strip("/").split("/")
                case = "" if parts[0] == "v1" else parts[0]
                kind = "models" if parts[-1] == "models" else "completions"
                fake.auth.append(headers.get("authorization", ""))
                fake.seen.append((case, kind))
                req = {"method": method, "headers": headers, "body": json.loads(body) if body else None}
                act = fake.routes.get((case, kind)) or (models() if kind == "models" else stream("ok"))
                try:
                    for chunk in act(req):
                        if isinstance(chunk, float):
                            time.sleep(chunk)
                            continue
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        fake.sent[case] = fake.sent.get(case, 0) + len(chunk)
                except OSError:  # the client hung up: what it was for
                    pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.daemon_threads = True
        self.server.allow_reuse_address = True
        self.server.server_bind()
        self.server.server_activate()
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, case: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{case + '/' if case else ''}v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile():
    h = Hostile()
    yield h
    h.close()


def client(h: Hostile, case: str = "", **kw) -> RemoteBackend:
    return RemoteBackend(RemoteConfig(url=h.url(case), **kw))


def params(timeout_s: float = 3.0, **kw) -> GenParams:
    return GenParams(deadline=time.monotonic() + timeout_s, **kw)


# ------------------------------------------------------------------------------------------ the key


LEAKS = {  # what a server may send back with the key in it
    "429 body": reply(429, json.dumps({"error": {"message": f"Rate limit reached for {KEY} on requests"}}),
                      "Too Many Requests"),
    "401 body": reply(401, json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}."}}),
                      "Unauthorized"),
    "500 page repeating our headers": reply(500, "<html><body><h1>Internal error</h1><pre>Host: x\nAuthorization:"
                                                 " {AUTH}\nUser-Agent: flint</pre></body></html>", ctype="text/html"),
    "reason phrase": reply(403, "{}", reason=f"Forbidden for {KEY}"),
    "SSE error event": stream("a", tail=b'data: {"error": {"message": "quota gone for ' + KEY.encode() + b'"}}\n\n'),
    "malformed SSE line": stream("a", tail=b"data: {" + KEY.encode() + b"\n\n"),
    "key where an excerpt ends": stream("a", tail=b"data: {" + b"y" * 70 + KEY.encode() + b"\n\n"),
}


@pytest.mark.parametrize("case", list(LEAKS))
@pytest.mark.parametrize("source", ["settings", "env"])
def test_the_key_never_leaves_in_an_error_whatever_the_server_sends(hostile, case, source, monkeypatch, caplog):
    hostile.routes[("", "completions")] = LEAKS[case]
    if source == "env":
        monkeypatch.setenv("FLINT_REMOTE_API_KEY", KEY)
    be = client(hostile, model="m", api_key=KEY if source == "settings" else "")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(RemoteError) as e:
        be.complete("p", "", params())
    assert hostile.auth[-1] == f"Bearer {KEY}"  # the key was in play
    message = str(e.value)
    assert len(message) > 10 and KEY not in message and KEY[:8] not in message and KEY[-8:] not in message
    assert KEY not in caplog.text and KEY[:8] not in caplog.text
    assert KEY not in be.backoff.last_error and not be.ready()


def test_the_key_echoed_in_completion_text_is_replaced_even_split_across_events(hostile):
    cut = len(KEY) // 2
    hostile.routes[("", "completions")] = stream("token = '", KEY[:cut], KEY[cut:], "'")
    shown: list[str] = []
    be = client(hostile, model="m", api_key=KEY)
    comps, _ = be.complete("p", "", params(max_lines=1), on_token=lambda i, t: shown.append(t))
    assert comps[0].text == "token = '***'"
    assert shown and all(KEY[:cut] not in t for t in shown)  # its start was held back, never streamed
    assert all(b.startswith(a) for a, b in zip(shown, shown[1:], strict=False))  # the stream only grew


def test_a_model_name_that_is_the_key_is_redacted(hostile):
    hostile.routes[("", "models")] = models(KEY)
    be = client(hostile, api_key=KEY)
    assert be.probe(timeout_s=2.0)
    assert KEY not in be.model_id and "***" in be.model_id


def test_key_shapes_are_redacted_even_unregistered():
    text = ("Incorrect API key provided: sk-proj-abcdEFGH1234ijkl. rate limit reached for key gsk_ab12cd34ef56gh78 "
            "Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.sig hf_abcdefghijklmnop1234")
    out = secrets.redact(text)
    for s in ("sk-proj-abcdEFGH1234ijkl", "gsk_ab12cd34ef56gh78", "eyJhbGciOi", "hf_abcdefghijklmnop1234"):
        assert s not in out, out
    ordinary = "key provided: something_else; token_ids=[1, 2]; api_key = os.environ['X']"
    assert secrets.scrub(ordinary) == ordinary  # code keeps its shapes: only known values leave it


# ------------------------------------------------------------------------------------ bounded answers


@pytest.mark.parametrize("case,behaviour,why", [
    ("small events ignoring max_tokens", endless(event("x")), "more text than max_tokens"),
    ("one line never ending", endless(b"x", newline=False), "a line passed"),
    ("empty events forever", endless(event("")), "the answer passed"),
    ("comments forever", endless(b": keep-alive\n"), "the answer passed"),
])
def test_an_endless_answer_is_cut_at_a_cap_and_the_connection_closed(hostile, case, behaviour, why):
    hostile.routes[("", "completions")] = behaviour
    be = client(hostile, model="m")
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=why):
        be.complete("p", "", params(10.0, max_tokens=64))
    assert time.monotonic() - t0 < 8.0  # a cap, not the deadline, ended it
    time.sleep(0.2)
    # the server could not write on: what it sent is the cap plus what the sockets' buffers held
    assert hostile.sent[""] < MAX_STREAM_BYTES + 8 * 2**20, hostile.sent[""]
    assert be.http._conn is None and not be.ready()


# ------------------------------------------------------------------------------------------- time


def test_a_dripping_completion_ends_at_its_overall_deadline(hostile):
    hostile.routes[("", "completions")] = drip(stream("hello", " world"), every_s=0.2)
    be = client(hostile, model="m")
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="deadline|in time"):
        be.complete("p", "", params(1.0))
    assert time.monotonic() - t0 < 2.0


def test_a_dripping_model_list_ends_the_check_and_the_request_at_their_deadlines(hostile):
    hostile.routes[("", "models")] = drip(models(), every_s=0.2)
    be = client(hostile)
    t0 = time.monotonic()
    assert be.probe(timeout_s=0.6) is False
    assert time.monotonic() - t0 < 1.5  # the check's overall deadline, not a per-read timeout
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="GET /models"):
        be.complete("p", "", params(0.8))
    assert time.monotonic() - t0 < 1.8


def test_close_from_another_thread_ends_a_blocked_check_at_once(hostile):
    hostile.routes[("", "models")] = drip(models(), every_s=1.0)
    be = client(hostile)
    done: list[float] = []
    t = threading.Thread(target=lambda: (be.probe(timeout_s=30), done.append(time.monotonic())))
    t.start()
    assert wait_for(lambda: ("", "models") in hostile.seen)  # the check is blocked on the drip
    t0 = time.monotonic()
    be.shut()  # a settings change replaced this client
    t.join(5)
    assert done and done[0] - t0 < 0.5
    with pytest.raises(RemoteError, match="closed"):
        be.complete("p", "", params())


def test_jobs_queued_behind_a_failure_fail_at_once_and_a_recovered_server_answers_after_the_pause(hostile):
    hostile.routes[("", "completions")] = drip(stream("x"), every_s=0.5)
    clock = Clock()  # the backoff's time: moved by hand
    be = RemoteBackend(RemoteConfig(url=hostile.url(), model="m"), clock=clock)
    with pytest.raises(RemoteError):
        be.complete("p", "", params(0.5))
    asked = len(hostile.seen)
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="backing off"):
        be.complete("p", "", params(5.0))
    assert time.monotonic() - t0 < 0.1 and len(hostile.seen) == asked  # no request: the pause is on
    hostile.routes[("", "completions")] = stream("back")
    pause = be.backoff.retry_at - clock()
    assert pause == be.backoff.base_s  # the first failure's pause
    clock.advance(0.9 * pause)
    assert not be.ready()  # not before it ends
    with pytest.raises(RemoteError, match="backing off"):
        be.complete("p", "", params(5.0))
    assert len(hostile.seen) == asked
    clock.advance(0.1 * pause)
    assert be.ready()  # the pause is over
    comps, _ = be.complete("p", "", params())
    assert comps[0].text == "back" and be.backoff.failures == 0
