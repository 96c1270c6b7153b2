"""``FlintServer``: pygls' LanguageServer with what Flint's protocol adjustments act on (``exit_code``,
``lost_sync``, ``client_log``; lsp_server/protocol/jsonrpc.py), the two notifications the session sends
(flint/status, flint/refresh), shutdown off the event loop, and one-client TCP.

TCP (``FlintServer.start_tcp``): one client per server. A second connection while the first is open is
told so (window/showMessage) and closed; it never sees the first client's answers nor ends its session.
The server ends when its client's connection does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

from lsprotocol import types
from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

from engine import __version__
from lsp_server.logs import ClientLogHandler
from lsp_server.protocol.jsonrpc import FlintProtocol
from lsp_server.session import Session
from lsp_server.settings import Settings

log = logging.getLogger("flint.server")

STATUS = "flint/status"
REFRESH = "flint/refresh"


class FlintServer(LanguageServer):
    def __init__(self, settings: Settings | None = None, load=None) -> None:
        super().__init__("flint", __version__, protocol_cls=FlintProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.session = Session(load or load_engine, settings, on_status=self._send_status,
                               on_refresh=self._send_refresh)
        self.initialized = False
        self.pending_warnings: list[str] = []
        self._tasks: set[asyncio.Task] = set()
        self._shown_error: str | None = None
        self.client_log: ClientLogHandler | None = None  # set by `flint serve`: log lines to the client
        self.exit_code = 1  # until an exit after shutdown says 0 (a lost connection is not a clean exit)
        self._stopping: threading.Thread | None = None
        self._connected = False  # TCP: the one client is connected

    def _send_status(self, status: dict[str, Any]) -> None:
        if not self.initialized:
            return
        self.protocol.notify(STATUS, status)
        if status["state"] == "error" and status["message"] != self._shown_error:
            # the status bar may not exist (not every client knows flint/status): say it once, plainly
            self._shown_error = status["message"]
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Error, message=f"Flint: {status['message']}"))

    def _send_refresh(self, uri: str, version: int) -> None:
        """flint/refresh: the store now holds what the answer on screen lacked; the client may ask again."""
        if self.initialized:
            self.protocol.notify(REFRESH, {"textDocument": {"uri": uri, "version": version}})

    def warn(self, message: str) -> None:
        log.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    def spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def report_server_error(self, error: Exception, source) -> None:
        # malformed notifications and the like: the server stays up; say so in the log, not in a popup
        log.warning("protocol error (%s): %s", source.__name__ if isinstance(source, type) else source, error)
        if isinstance(error, json.JSONDecodeError):  # the JSON-RPC answer to a body that is not JSON
            if isinstance(self.protocol, FlintProtocol):
                self.protocol.send_null_id_error(types.ErrorCodes.ParseError, f"parse error: {error}")

    def lost_sync(self, uri: str, why: str) -> None:
        """An edit of ``uri`` could not be applied, so Flint's copy differs from the editor's: forget it
        and refuse completions there (clearly) until the editor opens it again."""
        first = self.session.lose(uri, why)
        log.warning("lost sync with %s: %s; completions there are off until it is reopened", uri, why)
        if first and self.initialized:
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=f"Flint: lost track of {uri.rsplit('/', 1)[-1]} ({why}); close and reopen it to get "
                        "suggestions there again"))

    def begin_shutdown(self) -> threading.Thread:
        """Stop the session on a helper thread (once): the engine may be inside a prompt chunk it cannot
        leave, and neither the shutdown answer nor the event loop may wait for it."""
        if self._stopping is None:
            def stop() -> None:
                try:
                    self.session.stats.flush()  # first: joining the engine thread may outlast the process
                except Exception:
                    pass
                self.session.shutdown()

            self._stopping = threading.Thread(target=stop, name="flint-shutdown", daemon=True)
            self._stopping.start()
        return self._stopping

    def shutdown(self) -> None:
        """pygls' end of the transport, without waiting for its thread pool (the stdin reader thread may sit
        in a read that never returns)."""
        if self._stop_event is not None:
            self._stop_event.set()
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=False, cancel_futures=True)
        if self._server is not None:
            self._server.close()

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one client over TCP (see the module docstring); returns when its connection ends."""
        self._stop_event = threading.Event()

        async def serve() -> None:
            done = asyncio.get_running_loop().create_future()

            async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                peer = writer.get_extra_info("peername")
                if self._connected:
                    log.warning("refused a second connection from %s: this server serves one client", peer)
                    body = json.dumps({"jsonrpc": "2.0", "method": types.WINDOW_SHOW_MESSAGE, "params": {
                        "type": int(types.MessageType.Error),
                        "message": "Flint: this server already serves another client (one client per server): "
                                   "start another `flint serve` for this one"}}).encode()
                    try:
                        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                        await writer.drain()
                    finally:
                        writer.close()
                    return
                self._connected = True
                log.info("client connected from %s", peer)
                self.protocol.set_writer(writer)  # type: ignore[arg-type]
                try:
                    await run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol,  # type: ignore[arg-type]
                                    logger=log, error_handler=self.report_server_error)
                finally:
                    log.info("client connection from %s closed", peer)
                    if not done.done():
                        done.set_result(None)

            listener = await asyncio.start_server(connected, host, port)
            self._server = listener
            log.info("listening on %s", ", ".join(str(sock.getsockname()) for sock in listener.sockets))
            try:
                await done
            finally:
                listener.close()

        try:
            asyncio.run(serve())
        except (KeyboardInterrupt, SystemExit):
            pass


def load_engine(settings: Settings):
    """Load and pre-warm the model (runs on the engine thread)."""
    from engine.engine import Engine, EngineConfig

    return Engine.load(settings.model, threads=settings.threads, warm=True,
                       config=EngineConfig(context_tokens=settings.context_budget))
