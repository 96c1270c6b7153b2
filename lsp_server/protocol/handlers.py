"""The pygls 2.x handlers: thin and typed, they only adapt the protocol to ``Session`` (docs/protocol.md):
parse params, call the session, shape replies. One table (``create_server``) registers them.

Protocol adjustments (position encoding, document sync, bad messages, lifecycle, redaction) live in
``FlintProtocol`` (jsonrpc.py); the server object, its notifications and TCP in server.py.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from cattrs import transform_error
from lsprotocol import types

from lsp_server import convert
from lsp_server import items as picks
from lsp_server.documents import Change, DocumentError
from lsp_server.errors import RequestError
from lsp_server.items import Item, Suggestions
from lsp_server.protocol.jsonrpc import FlintRequestError
from lsp_server.protocol.server import FlintServer, load_engine
from lsp_server.settings import Settings, parse_settings

log = logging.getLogger("flint.server")

ACCEPT_COMMAND = "flint.accept"
VARIANTS = "flint/variants"
DID_SHOW = "flint/didShow"
DID_ACCEPT = "flint/didAccept"
DID_MOVE_CURSOR = "flint/didMoveCursor"
DID_PARTIALLY_ACCEPT = "flint/didPartiallyAccept"
NEXT_EDIT = "flint/nextEdit"
STATS_FLUSH_S = 30.0


def _error(e: RequestError) -> FlintRequestError:
    return FlintRequestError(message=e.message, code=e.code)


def _invalid(message: str) -> FlintRequestError:
    return FlintRequestError(message=message, code=types.ErrorCodes.InvalidParams)


def _plain(obj: Any) -> Any:
    """pygls hands custom-method params over as namedtuples: back to plain JSON values."""
    if isinstance(obj, tuple) and type(obj) is not tuple:  # a namedtuple
        return {k: _plain(v) for k, v in obj._asdict().items()}  # type: ignore[attr-defined]
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


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


def _range(it: Item) -> types.Range:
    return types.Range(types.Position(*it.start), types.Position(*it.end))


# ---- lifecycle ----------------------------------------------------------------------------------------

def initialize(ls: FlintServer, params: types.InitializeParams) -> None:
    session = ls.session
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


async def initialized(ls: FlintServer, params: types.InitializedParams) -> None:
    ls.initialized = True
    ls._send_status(ls.session.status)
    for w in ls.pending_warnings:
        ls.warn(w)
    ls.pending_warnings.clear()
    ls.spawn(_report_loading(ls))
    ls.spawn(_flush_stats_forever(ls))


def shutdown(ls: FlintServer, params: None) -> None:
    ls.begin_shutdown()  # answered at once; the engine stops on its own time


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
    new, warnings = parse_settings(raw, ls.session.settings)
    for w in warnings:
        ls.warn(w)
    if ls.session.apply_settings(new):
        ls.spawn(_report_loading(ls))
    log.info("settings now %s", new)


# ---- documents ----------------------------------------------------------------------------------------

def did_open(ls: FlintServer, params: types.DidOpenTextDocumentParams) -> None:
    d = params.text_document
    ls.session.did_open(d.uri, d.text, d.version, d.language_id)


def did_change(ls: FlintServer, params: types.DidChangeTextDocumentParams) -> None:
    changes = []
    for c in params.content_changes:
        if isinstance(c, types.TextDocumentContentChangePartial):
            r = c.range
            changes.append(Change(c.text, (r.start.line, r.start.character, r.end.line, r.end.character)))
        else:
            changes.append(Change(c.text))
    uri = params.text_document.uri
    try:
        ls.session.did_edit(uri, params.text_document.version, changes)
    except DocumentError as e:
        ls.lost_sync(uri, f"an edit could not be applied: {e}")


def did_move_cursor(ls: FlintServer, params: Any) -> None:
    try:
        pos = _position_params(ls, params)
        version = (_plain(params).get("textDocument") or {}).get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise _invalid(f"textDocument.version must be an integer, got {version!r}")
        ls.session.did_move_cursor(pos.text_document.uri, pos.position.line, pos.position.character, version)
    except (FlintRequestError, RequestError) as e:  # a notification has no answer: the log says why
        log.warning("%s ignored: %s", DID_MOVE_CURSOR, e.message)


def did_close(ls: FlintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.session.did_close(params.text_document.uri)


# ---- completion ---------------------------------------------------------------------------------------

async def _suggest(ls: FlintServer, uri: str, pos: types.Position, *, invoked: bool, n: int | None = None,
                   variants: bool = False) -> Suggestions:
    try:
        return await ls.session.suggest(uri, pos.line, pos.character, invoked=invoked, n=n, variants=variants)
    except RequestError as e:
        raise _error(e) from None


async def inline_completion(ls: FlintServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    res = await _suggest(ls, params.text_document.uri, params.position, invoked=invoked)
    return types.InlineCompletionList(items=[
        types.InlineCompletionItem(
            insert_text=it.text, range=_range(it),
            command=types.Command(title="Flint: accepted", command=ACCEPT_COMMAND,
                                  arguments=[{"id": res.id, "index": it.index, "source": it.source,
                                              "backend": it.backend}]))
        for it in res.items])


async def completion(ls: FlintServer, params: types.CompletionParams) -> types.CompletionList:
    caps = ls.client_capabilities.text_document
    if caps is not None and caps.inline_completion is not None:
        # the client shows inline suggestions: do not duplicate them (nor delay its normal list)
        return types.CompletionList(is_incomplete=False, items=[])
    invoked = params.context is not None and params.context.trigger_kind == types.CompletionTriggerKind.Invoked
    res = await _suggest(ls, params.text_document.uri, params.position, invoked=invoked, n=1)
    items = []
    for it in res.items[:1]:
        first = next((ln.strip() for ln in it.text.splitlines() if ln.strip()), it.text.strip())
        items.append(types.CompletionItem(
            label=f"⚡ Flint: {first[:60]}",
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=_range(it), new_text=it.text),
            detail=f"Flint ({it.total_ms:.0f} ms, {it.source}{', ' + it.backend if it.backend != 'local' else ''})",
            documentation=it.text,  # a plain string: plain text for every client
            sort_text="0", filter_text="",
            command=types.Command(title="Flint: accepted", command=ACCEPT_COMMAND,
                                  arguments=[{"id": res.id, "index": it.index}])))
    # incomplete: ask again as the user types (the suggestion depends on every character)
    return types.CompletionList(is_incomplete=True, items=items)


async def variants(ls: FlintServer, params: Any) -> dict[str, Any]:
    p = _position_params(ls, params)
    res = await _suggest(ls, p.text_document.uri, p.position, invoked=True, variants=True)
    return {"id": res.id, "version": res.version, "items": [
        {"index": it.index, "insertText": it.text,
         "range": {"start": {"line": it.start[0], "character": it.start[1]},
                   "end": {"line": it.end[0], "character": it.end[1]}},
         "ttftMs": it.ttft_ms, "totalMs": it.total_ms, "source": it.source, "tokens": it.tokens,
         "backend": it.backend}
        for it in res.items], "complete": res.complete, "note": picks.note(len(res.items), res.asked, res.complete)}


async def next_edit(ls: FlintServer, params: Any) -> dict[str, Any]:
    """flint/nextEdit: the edit that follows the user's last one, elsewhere (docs/protocol.md)."""
    p = _position_params(ls, params)
    version = (_plain(params).get("textDocument") or {}).get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise _invalid(f"textDocument.version must be an integer, got {version!r}")
    try:
        return await ls.session.next_edit(p.text_document.uri, version, p.position.line, p.position.character)
    except RequestError as e:
        raise _error(e) from None


# ---- telemetry (local) --------------------------------------------------------------------------------

def _note(method: str, params: Any, apply: Callable[[str, int, dict[str, Any]], bool]) -> None:
    try:
        sid, index, p = _id_index(params)
        if not apply(sid, index, p):
            log.info("%s for unknown or old completion %s", method, sid)
    except ValueError as e:
        log.warning("%s ignored: %s", method, e)


def did_show(ls: FlintServer, params: Any) -> None:
    _note(DID_SHOW, params, lambda sid, i, p: ls.session.did_show(sid, i))


def did_accept(ls: FlintServer, params: Any) -> None:
    _note(DID_ACCEPT, params, lambda sid, i, p: ls.session.did_accept(sid, i))


def did_partially_accept(ls: FlintServer, params: Any) -> None:
    def apply(sid: str, i: int, p: dict[str, Any]) -> bool:
        n = p.get("acceptedLength")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"acceptedLength must be a non-negative integer, got {n!r}")
        return ls.session.did_partially_accept(sid, i, n)
    _note(DID_PARTIALLY_ACCEPT, params, apply)


def accept(ls: FlintServer, *args: Any) -> None:
    if not args:
        raise _invalid(f"{ACCEPT_COMMAND} expects one argument {{id, index}}")
    try:
        sid, index, _ = _id_index(args[0])
    except ValueError as e:
        raise _invalid(f"{ACCEPT_COMMAND}: {e}") from None
    ls.session.did_accept(sid, index)


# ---- the dispatch table -------------------------------------------------------------------------------

FEATURES: list[tuple[str, Any, Callable[..., Any]]] = [
    (types.INITIALIZE, None, initialize),
    (types.INITIALIZED, None, initialized),
    (types.SHUTDOWN, None, shutdown),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, did_change_configuration),
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (DID_MOVE_CURSOR, None, did_move_cursor),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    # without the options object the capability is never advertised and VS Code never asks
    (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions(), inline_completion),
    (types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(), completion),
    (VARIANTS, None, variants),
    (NEXT_EDIT, None, next_edit),
    (DID_SHOW, None, did_show),
    (DID_ACCEPT, None, did_accept),
    (DID_PARTIALLY_ACCEPT, None, did_partially_accept),
]


def create_server(settings: Settings | None = None, load=None) -> FlintServer:
    server = FlintServer(settings, load or load_engine)
    for method, options, handler in FEATURES:
        server.feature(method, options)(handler)
    server.command(ACCEPT_COMMAND)(accept)
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
