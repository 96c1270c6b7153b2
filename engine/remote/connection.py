"""The remote client's HTTP connection (engine/remote/client.py sends through it): one ``http.client``
connection kept alive across requests (HTTP/1.1), a fresh one when the server closed the idle one; TLS
through ``ssl.create_default_context()`` (certificates and host names verified, always). The API key is sent
as a bearer token and appears in no log line, error message or ``repr``.

Bounded in time and size, whatever the server does: ``Watchdog`` closes the connection the moment a request
is cancelled or its overall deadline passes (a server that drips a byte a second never trips a per-read
timeout); every read also has its own timeout (``READ_IDLE_S``); connecting waits at most the time left;
an error body is read up to ``MAX_ERROR_BODY_BYTES`` and a JSON answer up to its cap. ``close`` may be called
from any thread: it shuts the socket down first, so a reader blocked on it returns at once."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Protocol

from engine.remote.secrets import excerpt
from engine.remote.wire import ERROR_BODY_CHARS, MAX_ERROR_BODY_BYTES, READ_IDLE_S, Endpoint, RemoteError

WATCH_S = 0.01  # how often a watchdog looks at the cancel token and the deadline


class Connection:
    """Not thread-safe but for ``close`` and ``shutdown``, which may be called from any thread."""

    def __init__(self, endpoint: Endpoint, connect_timeout_s: float, api_key: str) -> None:
        self.endpoint = endpoint
        self.connect_timeout_s = connect_timeout_s
        self._api_key = api_key
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.requests = 0  # HTTP requests sent
        self.connections = 0  # connections opened

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            _shutdown(conn)  # (another thread may be blocked reading it: close alone would not wake it)
            try:
                conn.close()
            except Exception:
                pass

    def shutdown(self) -> None:
        """Shut the socket down under a reader blocked on it (a cancel or a deadline: the watchdog)."""
        conn = self._conn
        if conn is not None:
            _shutdown(conn)

    def _headers(self, stream: bool) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json",
             "Connection": "keep-alive", "User-Agent": "flint"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    def _connection(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._conn is None:
                ep = self.endpoint
                if ep.scheme == "https":
                    self._conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=self.connect_timeout_s,
                                                             context=ssl.create_default_context())
                else:
                    self._conn = http.client.HTTPConnection(ep.host, ep.port, timeout=self.connect_timeout_s)
                self.connections += 1
            return self._conn

    def send(self, method: str, path: str, body: bytes | None, stream: bool, deadline: float) -> http.client.HTTPResponse:
        """Send a request on the kept-alive connection (a fresh one if the server closed it meanwhile). The
        caller's ``Watchdog`` enforces ``deadline`` while the answer is read; each read waits at most
        ``READ_IDLE_S``."""
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                if conn.sock is None:
                    conn.timeout = max(0.05, min(self.connect_timeout_s, deadline - time.monotonic()))
                    conn.connect()
                conn.sock.settimeout(max(0.05, min(self.connect_timeout_s, deadline - time.monotonic())))
                conn.request(method, self.endpoint.path + path, body=body, headers=self._headers(stream))
                self.requests += 1
                # the first byte may take a whole prompt pass: the watchdog enforces the deadline
                conn.sock.settimeout(READ_IDLE_S)
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
            except (OSError, http.client.HTTPException, AttributeError) as e:  # (sock None: closed meanwhile)
                self.close()
                raise RemoteError(f"cannot reach {self.endpoint.label}: {describe(e)}") from None
        raise AssertionError("unreachable")

    def check_status(self, resp: http.client.HTTPResponse) -> None:
        if resp.status == 200:
            return
        try:
            body = resp.read(MAX_ERROR_BODY_BYTES).decode("utf-8", "replace")
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
        # the body, the reason phrase: the server's words (a key quoted back, a page repeating our headers)
        raise RemoteError(f"HTTP {resp.status} {excerpt(str(resp.reason), 80)}: {excerpt(detail, ERROR_BODY_CHARS)}")

    def read_json(self, resp: http.client.HTTPResponse, limit: int, what: str) -> object:
        """A JSON answer of at most ``limit`` bytes (more: RemoteError, the connection closed)."""
        try:
            data = resp.read(limit + 1)
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
            self.close()
            raise RemoteError(f"{what} from {self.endpoint.label} failed: {describe(e)}") from None
        if len(data) > limit:
            self.close()
            raise RemoteError(f"{what} from {self.endpoint.label}: the answer passed {limit // 1024} KiB: cut")
        try:
            return json.loads(data)
        except ValueError:
            self.close()
            raise RemoteError(f"malformed answer to {what}") from None


class Watchdog:
    """Closes ``conn`` (unblocking its reader) when ``cancel`` is cancelled or ``deadline`` passes; ``tripped``
    says which. A context manager: one thread per request, gone when the request is."""

    def __init__(self, conn: Connection, cancel: Cancellable | None, deadline: float) -> None:
        self.conn, self.cancel, self.deadline = conn, cancel, deadline
        self.tripped: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="flint-remote-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            if self.tripped is None:
                if self.cancel is not None and self.cancel.cancelled:
                    self.tripped = "cancelled"
                elif time.monotonic() >= self.deadline:
                    self.tripped = "deadline"
            if self.tripped is not None:  # (again while it lasts: a socket still connecting had none to shut)
                self.conn.shutdown()


class Cancellable(Protocol):
    """What a watchdog asks of a cancel token: CancelToken and Until both answer it."""

    @property
    def cancelled(self) -> bool: ...


class Until:
    """A cancel token (``cancelled``) that is set once ``stop()`` says so (checked by a watchdog)."""

    def __init__(self, stop: Callable[[], bool]) -> None:
        self._stop = stop

    @property
    def cancelled(self) -> bool:
        return self._stop()


def _shutdown(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def describe(e: BaseException) -> str:
    """An OSError or HTTP failure in a few words, for a message."""
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    msg = str(e)
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
