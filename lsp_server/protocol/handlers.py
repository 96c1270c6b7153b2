"""The pygls 2.x language server: thin, typed handlers over ``Session`` (docs/protocol.md).

Protocol adjustments (position encoding, document sync, bad messages, lifecycle, redaction) live in
``FlintProtocol`` (lsp_server/protocol/jsonrpc.py); the server holds what they act on (``exit_code``,
``lost_sync``, ``client_log``).

TCP (``FlintServer.start_tcp``): one client per server. A second connection while the first is open is
told so (window/showMessage) and closed; it never sees the first client's answers nor ends its session.
The server ends when its client's connection does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from typing import Any

from cattrs import transform_error
from lsprotocol import types
from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

from engine import __version__
from lsp_server import convert
from lsp_server.documents import Change, DocumentError, edit_end
from lsp_server.logs import ClientLogHandler
from lsp_server.protocol.jsonrpc import FlintProtocol, FlintRequestError
from lsp_server.session import RequestError, Session, Suggestions
from lsp_server.settings import Settings, parse_settings

log = logging.getLogger("flint.server")

ACCEPT_COMMAND = "flint.accept"
VARIANTS = "flint/variants"
DID_SHOW = "flint/didShow"
DID_ACCEPT = "flint/didAccept"
DID_MOVE_CURSOR = "flint/didMoveCursor"
DID_PARTIALLY_ACCEPT = "flint/didPartiallyAccept"
STATUS = "flint/status"
REFRESH = "flint/refresh"
STATS_FLUSH_S = 30.0


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
        self.desynced: dict[str, str] = {}  # uri -> why Flint's copy of it can no longer be trusted
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
        """A race's remote answer replaced the local one: a client may ask again to show it."""
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
        log.warning("protocol error (%s): %s", getattr(source, "__name__", source), error)
        if isinstance(error, json.JSONDecodeError):  # the JSON-RPC answer to a body that is not JSON
            if isinstance(self.protocol, FlintProtocol):
                self.protocol.send_null_id_error(types.ErrorCodes.ParseError, f"parse error: {error}")

    def lost_sync(self, uri: str, why: str) -> None:
        """An edit of ``uri`` could not be applied, so Flint's copy differs from the editor's: forget it
        and refuse completions there (clearly) until the editor opens it again."""
        first = uri not in self.desynced
        self.desynced[uri] = why
        self.session.did_close(uri)
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
    from engine.config import EngineConfig
    from engine.engine import Engine

    return Engine.load(settings.model, threads=settings.threads, warm=True,
                       config=EngineConfig(context_tokens=settings.context_budget))


def _error(e: RequestError) -> FlintRequestError:
    return FlintRequestError(message=e.message, code=e.code)


def _plain(obj: Any) -> Any:
    """pygls hands custom-method params over as namedtuples: back to plain JSON values."""
    if hasattr(obj, "_asdict"):
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def _invalid(message: str) -> FlintRequestError:
    return FlintRequestError(message=message, code=types.ErrorCodes.InvalidParams)


def _position_params(ls: FlintServer, params: Any) -> types.TextDocumentPositionParams:
    try:
        return ls.protocol._converter.structure(_plain(params), types.TextDocumentPositionParams)
    except Exception as e:
        try:
            detail = "; ".join(transform_error(e))
        except Exception:
            detail = str(e)
        raise _invalid(f"expected {{textDocument: {{uri}}, position: {{line, character}}}}: {detail}") from None


def _id_index(params: Any) -> tuple[str, int, dict[str, Any]]:
    p = _plain(params)
    if not isinstance(p, dict) or not isinstance(p.get("id"), str):
        raise ValueError(f"expected {{id: string, index: int}}, got {p!r}")
    index = p.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool):
        raise ValueError(f"index must be an integer, got {index!r}")
    return p["id"], index, p


def _range(it) -> types.Range:
    return types.Range(types.Position(*it.start), types.Position(*it.end))


def create_server(settings: Settings | None = None, load=None) -> FlintServer:
    server = FlintServer(settings, load)
    session = server.session

    @server.feature(types.INITIALIZE)
    def initialize(ls: FlintServer, params: types.InitializeParams) -> None:
        session.attach_loop(asyncio.get_running_loop())
        if params.trace is not None:
            ls.protocol.trace = params.trace
        if ls.client_log is not None:  # from now on log lines go to the client, with their levels
            ls.client_log.attach(ls, asyncio.get_running_loop())
            ls.client_log.refresh_level()
        session.encoding = convert.encoding_name(ls.workspace.position_encoding)
        new, warnings = parse_settings(params.initialization_options, session.settings)
        ls.pending_warnings.extend(warnings)
        session.apply_settings(new)
        folders = [f.uri for f in params.workspace_folders or []]
        if not folders and params.root_uri:
            folders = [params.root_uri]
        session.set_workspace_folders(folders)
        info = params.client_info
        log.info("client %s %s, position encoding %s, settings %s", info.name if info else "?",
                 info.version if info else "", session.encoding, new)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: FlintServer, params: types.InitializedParams) -> None:
        ls.initialized = True
        ls._send_status(session.status)
        for w in ls.pending_warnings:
            ls.warn(w)
        ls.pending_warnings.clear()
        ls.spawn(_report_loading(ls))
        ls.spawn(_flush_stats_forever(ls))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: FlintServer, params: None) -> None:
        ls.begin_shutdown()  # answered at once; the engine stops on its own time

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: FlintServer, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if raw is None or raw == {} or (isinstance(raw, dict) and raw.get("flint") is None and "flint" in raw):
            # pull model: ask for the `flint` section when the client supports it
            ws = ls.client_capabilities.workspace
            if ws is None or not ws.configuration:
                return
            try:
                got = await ls.workspace_configuration_async(types.ConfigurationParams(
                    items=[types.ConfigurationItem(section="flint")]))
            except Exception as e:
                log.warning("workspace/configuration failed: %s", e)
                return
            raw = got[0] if got else None
        new, warnings = parse_settings(raw, session.settings)
        for w in warnings:
            ls.warn(w)
        if session.apply_settings(new):
            ls.spawn(_report_loading(ls))
        log.info("settings now %s", new)

    # ---- documents ------------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FlintServer, params: types.DidOpenTextDocumentParams) -> None:
        d = params.text_document
        ls.desynced.pop(d.uri, None)
        session.documents.open(d.uri, d.text, d.version, d.language_id)
        session.did_change(d.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FlintServer, params: types.DidChangeTextDocumentParams) -> None:
        changes = []
        for c in params.content_changes:
            if isinstance(c, types.TextDocumentContentChangePartial):
                r = c.range
                changes.append(Change(c.text, (r.start.line, r.start.character, r.end.line, r.end.character)))
            else:
                changes.append(Change(c.text))
        uri = params.text_document.uri
        if uri in ls.desynced:
            return  # its text is unknown until it is opened again
        if session.documents.revision(uri) is None:  # never opened (a client bug): nothing to diverge from
            log.warning("didChange for %s which is not open: ignored", uri)
            return
        whole = len(changes) == 1 and changes[0].range is None
        before = session.documents.get(uri).text if whole else None
        try:
            doc = session.documents.change(uri, params.text_document.version, changes, session.encoding)
        except DocumentError as e:
            ls.lost_sync(uri, f"an edit could not be applied: {e}")
            return
        cursor = None
        if len(changes) == 1 and changes[0].range is not None:
            # one edit (typing, a paste, a deletion): the cursor ends up right after the new text; the text
            # before the range's start did not move, so its position still holds in the new text
            sl, sc = changes[0].range[:2]
            cursor = doc.offset_at(sl, sc, session.encoding, clamp_line=True) + len(changes[0].text)
        elif before is not None:
            # the whole text again (a client that syncs whole texts): the cursor is after the span that
            # differs; an unchanged text leaves it where it was (the work for that spot goes on)
            cursor = edit_end(before, doc.text)
            if cursor is None:
                cursor = session.cursor_offset(uri)
        session.did_change(uri, cursor)

    @server.feature(DID_MOVE_CURSOR)
    def did_move_cursor(ls: FlintServer, params: Any) -> None:
        try:
            pos = _position_params(ls, params)
            version = (_plain(params).get("textDocument") or {}).get("version")
            if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
                raise _invalid(f"textDocument.version must be an integer, got {version!r}")
            uri = pos.text_document.uri
            if uri in ls.desynced:
                return
            session.did_move_cursor(uri, pos.position.line, pos.position.character, version)
        except (FlintRequestError, RequestError) as e:  # a notification has no answer: the log says why
            log.warning("%s ignored: %s", DID_MOVE_CURSOR, e.message)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FlintServer, params: types.DidCloseTextDocumentParams) -> None:
        if ls.desynced.pop(params.text_document.uri, None) is not None:
            return  # forgotten already
        session.did_close(params.text_document.uri)

    # ---- completion -----------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: FlintServer, params: types.InlineCompletionParams
                                ) -> types.InlineCompletionList:
        invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        res = await _suggest(params.text_document.uri, params.position, invoked=invoked)
        return types.InlineCompletionList(items=[
            types.InlineCompletionItem(
                insert_text=it.text, range=_range(it),
                command=types.Command(title="Flint: accepted", command=ACCEPT_COMMAND,
                                      arguments=[{"id": res.id, "index": it.index, "source": it.source,
                                                  "backend": it.backend}]))
            for it in res.items])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions())
    async def completion(ls: FlintServer, params: types.CompletionParams) -> types.CompletionList:
        caps = ls.client_capabilities.text_document
        if caps is not None and caps.inline_completion is not None:
            # the client shows inline suggestions: do not duplicate them (nor delay its normal list)
            return types.CompletionList(is_incomplete=False, items=[])
        invoked = params.context is not None and \
            params.context.trigger_kind == types.CompletionTriggerKind.Invoked
        res = await _suggest(params.text_document.uri, params.position, invoked=invoked, n=1)
        items = []
        for it in res.items[:1]:
            first = next((ln.strip() for ln in it.text.splitlines() if ln.strip()), it.text.strip())
            items.append(types.CompletionItem(
                label=f"⚡ Flint: {first[:60]}",
                insert_text_format=types.InsertTextFormat.PlainText,
                text_edit=types.TextEdit(range=_range(it), new_text=it.text),
                detail=f"Flint ({it.total_ms:.0f} ms, {it.source}"
                       f"{', ' + it.backend if it.backend != 'local' else ''})",
                documentation=it.text,  # a plain string: plain text for every client
                sort_text="0", filter_text="",
                command=types.Command(title="Flint: accepted", command=ACCEPT_COMMAND,
                                      arguments=[{"id": res.id, "index": it.index}])))
        # incomplete: ask again as the user types (the suggestion depends on every character)
        return types.CompletionList(is_incomplete=True, items=items)

    @server.feature(VARIANTS)
    async def variants(ls: FlintServer, params: Any) -> dict[str, Any]:
        p = _position_params(ls, params)
        res = await _suggest(p.text_document.uri, p.position, invoked=True, variants=True)
        return {"id": res.id, "version": res.version, "items": [
            {"index": it.index, "insertText": it.text,
             "range": {"start": {"line": it.start[0], "character": it.start[1]},
                       "end": {"line": it.end[0], "character": it.end[1]}},
             "ttftMs": it.ttft_ms, "totalMs": it.total_ms, "source": it.source, "tokens": it.tokens,
             "backend": it.backend}
            for it in res.items]}

    async def _suggest(uri: str, pos: types.Position, *, invoked: bool, n: int | None = None,
                       variants: bool = False) -> Suggestions:
        if uri in server.desynced:
            raise FlintRequestError(code=types.LSPErrorCodes.RequestFailed,
                                    message=f"Flint lost track of this document's text ({server.desynced[uri]}): "
                                            "close and reopen it")
        try:
            return await session.suggest(uri, pos.line, pos.character, invoked=invoked, n=n, variants=variants)
        except RequestError as e:
            raise _error(e) from None

    # ---- telemetry (local) ----------------------------------------------------------------------
    @server.feature(DID_SHOW)
    def did_show(ls: FlintServer, params: Any) -> None:
        _note(DID_SHOW, params, lambda sid, i, p: session.did_show(sid, i))

    @server.feature(DID_ACCEPT)
    def did_accept(ls: FlintServer, params: Any) -> None:
        _note(DID_ACCEPT, params, lambda sid, i, p: session.did_accept(sid, i))

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept(ls: FlintServer, params: Any) -> None:
        def apply(sid: str, i: int, p: dict[str, Any]) -> bool:
            n = p.get("acceptedLength")
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ValueError(f"acceptedLength must be a non-negative integer, got {n!r}")
            return session.did_partially_accept(sid, i, n)
        _note(DID_PARTIALLY_ACCEPT, params, apply)

    @server.command(ACCEPT_COMMAND)
    def accept(ls: FlintServer, *args: Any) -> None:
        if not args:
            raise _invalid(f"{ACCEPT_COMMAND} expects one argument {{id, index}}")
        try:
            sid, index, _ = _id_index(args[0])
        except ValueError as e:
            raise _invalid(f"{ACCEPT_COMMAND}: {e}") from None
        session.did_accept(sid, index)

    def _note(method: str, params: Any, apply) -> None:
        try:
            sid, index, p = _id_index(params)
            if not apply(sid, index, p):
                log.info("%s for unknown or old completion %s", method, sid)
        except ValueError as e:
            log.warning("%s ignored: %s", method, e)

    return server


async def _report_loading(ls: FlintServer) -> None:
    """$/progress while the model loads and warms up (the client must support work done progress)."""
    session = ls.session
    window = ls.client_capabilities.window
    if window is None or not window.work_done_progress:
        return
    token = f"flint-load-{uuid.uuid4().hex[:8]}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception as e:
        log.info("client refused a progress token: %s", e)
        return
    ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(
        title="Flint", message=f"loading {session.settings.model}", cancellable=False))
    if session.status["state"] == "loading":
        await session.ready.wait()
    st = session.status
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(
        message=f"{st['model']} ready" if st["state"] != "error" else f"failed: {st['message']}"))


async def _flush_stats_forever(ls: FlintServer) -> None:
    while True:
        await asyncio.sleep(STATS_FLUSH_S)
        ls.session.maybe_flush_stats(STATS_FLUSH_S)
