"""The remote client's HTTP connection (engine/remote/client.py sends through it): one ``http.client``
connection kept alive across requests (HTTP/1.1), a fresh one when the server closed the idle one; TLS
through ``ssl.create_default_context()`` (certificates and host names verified, always). The API key is sent
as a bearer token and appears in no log line, error message or ``repr``."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time

from engine.remote.wire import ERROR_BODY_CHARS, Endpoint, RemoteError


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
            try:
                conn.close()
            except Exception:
                pass

    def shutdown(self) -> None:
        """Shut the socket down under a reader blocked on it (a cancel or a deadline: the watchdog)."""
        conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

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

    def send(self, method: str, path: str, body: bytes | None, stream: bool, deadline: float | None,
              watched: bool = True) -> http.client.HTTPResponse:
        """Send a request on the kept-alive connection (a fresh one if the server closed it meanwhile).
        ``watched``: a watchdog enforces the deadline while the answer is read (else a socket timeout)."""
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                if conn.sock is None:
                    conn.connect()
                timeout = self.connect_timeout_s
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
                    conn.sock.settimeout(max(30.0, self.connect_timeout_s))
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
                raise RemoteError(f"cannot reach {self.endpoint.label}: {describe(e)}") from None
        raise AssertionError("unreachable")

    def check_status(self, resp: http.client.HTTPResponse) -> None:
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


def describe(e: BaseException) -> str:
    """An OSError or HTTP failure in a few words, for a message."""
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    msg = str(e)
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
