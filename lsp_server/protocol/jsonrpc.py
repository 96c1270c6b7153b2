"""``FlintProtocol``: pygls' LanguageServerProtocol with Flint's adjustments (docs/reliability.md says
what each promises):

- position encoding: UTF-8 whenever the client offers it (pygls takes the client's first choice);
- document sync: Flint keeps its own incremental store (lsp_server/documents.py), so pygls' workspace
  copy is not maintained (it would double the work of every keystroke);
- bad messages: pygls drops a request whose params do not deserialize, or that is not JSON-RPC 2.0
  (no ``"jsonrpc": "2.0"``, a method that is not a string), which leaves the client waiting forever;
  Flint answers InvalidParams / InvalidRequest. A notification that does not deserialize costs one log
  line (not a traceback); a lost edit marks its document out of sync (``FlintServer.lost_sync``).
  Flint's own request errors (stale, cancelled) are logged as one line instead of a traceback;
- lifecycle: a request after ``shutdown`` is answered InvalidRequest; ``exit`` ends the process with
  0 after ``shutdown`` and 1 without (``FlintServer.exit_code``); nothing is sent after ``exit``;
- secrets: every showMessage / logMessage and every error answer goes out redacted (lsp_server/logs.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol, runtime_checkable

import attrs
from cattrs import transform_error
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCRequestMessage, LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCNotification

from lsp_server import convert
from lsp_server.errors import RequestError
from lsp_server.logs import ClientLogHandler, redact

# the server's logger: these lines are the server's (clients and tests look for "flint.server")
log = logging.getLogger("flint.server")


@runtime_checkable
class Host(Protocol):
    """What the protocol uses of its server (``FlintServer``), checked by shape: server.py imports this
    module, so naming the class here would be a circular import."""

    exit_code: int
    client_log: ClientLogHandler | None

    def lost_sync(self, uri: str, why: str) -> None: ...


_ROUTINE_ERRORS = (RequestError.CONTENT_MODIFIED, RequestError.SERVER_CANCELLED, RequestError.REQUEST_CANCELLED)


class FlintRequestError(JsonRpcException):
    """An expected error answer (stale, superseded, bad position): one log line, no traceback."""


@attrs.define
class _Malformed:
    """A request that could not be read: answered with ``code`` (InvalidParams, InvalidRequest)."""

    id: Any
    method: str
    error: str
    code: int = types.ErrorCodes.InvalidParams
    jsonrpc: str = "2.0"


@attrs.define
class _BadNotification:
    """A notification whose params could not be read: one log line (and, for an edit, a lost document)."""

    method: str
    error: str
    params: Any = None
    jsonrpc: str = "2.0"


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, str | int) and not isinstance(msg_id, bool)


def _detail(exc: Exception) -> str:
    try:
        return "; ".join(transform_error(exc))
    except Exception:
        return str(exc)


class FlintProtocol(LanguageServerProtocol):
    _exited = False  # exit came: the transport is closing

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        offered = params.capabilities.general.position_encodings if params.capabilities.general else None
        chosen = convert.choose_encoding(offered)
        if params.capabilities.general is None:
            params.capabilities.general = types.GeneralClientCapabilities()
        # pygls picks the client's first supported encoding; narrowing the offer makes it pick ours
        params.capabilities.general.position_encodings = [chosen] if offered else None
        result = yield from super().lsp_initialize(params)
        if offered is not None:
            params.capabilities.general.position_encodings = offered
        return result

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args):
        # from here the transport closes; a status or log line another thread queued on the loop meanwhile
        # would hit the closed stream (pygls logs a traceback for it): it is dropped instead
        self._exited = True
        server = self._server
        if isinstance(server, Host):
            server.exit_code = 0 if self._shutdown else 1  # the spec: 1 when exit comes without shutdown
            if server.client_log is not None:
                server.client_log.detach()
        if isinstance(self.writer, asyncio.StreamWriter):
            # TCP: pygls would sys.exit() inside the connection callback (an asyncio traceback); close
            # the connection and the listener instead, and let `flint serve` return normally
            self.writer.close()
            listener = self._server._server
            if listener is not None:
                listener.close()
            return
        yield from super().lsp_exit(*args)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        if (h := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield h, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (h := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield h, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        if (h := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield h, (params,), None

    @lsp_method(types.SET_TRACE)
    def lsp_set_trace(self, params: types.SetTraceParams):
        yield from super().lsp_set_trace(params)
        server = self._server
        if isinstance(server, Host) and server.client_log is not None:
            server.client_log.refresh_level()

    def structure_message(self, data: dict[str, Any]):
        # json.loads calls this for every object, innermost first; only a message has "jsonrpc"
        if not isinstance(data, dict) or "jsonrpc" not in data or "method" not in data:
            return super().structure_message(data)
        method = data["method"]
        version = data["jsonrpc"]
        if "id" in data:
            if version != "2.0" or not isinstance(method, str) or not _valid_id(data["id"]):
                what = (f'"jsonrpc" must be "2.0", got {version!r}' if version != "2.0" else
                        "method must be a string" if not isinstance(method, str) else
                        "id must be a string or an integer")
                return _Malformed(data["id"] if _valid_id(data["id"]) else None, repr(method), what,
                                  types.ErrorCodes.InvalidRequest)
            request_type = self.get_message_type(method) or JsonRPCRequestMessage
            try:
                return self._converter.structure(data, request_type)
            except Exception as exc:
                return _Malformed(data["id"], method, _detail(exc))
        if version != "2.0" or not isinstance(method, str):
            return _BadNotification(repr(method), "method must be a string" if version == "2.0" else
                                    f'"jsonrpc" must be "2.0", got {version!r}')
        try:  # pygls would log two tracebacks for a notification that does not deserialize
            return self._converter.structure(data, self.get_message_type(method) or JsonRPCNotification)
        except Exception as exc:
            return _BadNotification(method, _detail(exc), data.get("params"))

    def handle_message(self, message):
        if isinstance(message, _Malformed):
            log.warning("request %s %s is malformed: %s", message.id, message.method, message.error)
            kind = "invalid params for" if message.code == types.ErrorCodes.InvalidParams else "invalid request"
            if message.id is None:
                self.send_null_id_error(message.code, f"{kind} {message.method}: {message.error}")
            else:
                self._send_response(message.id, error=types.ResponseError(
                    code=message.code, message=f"{kind} {message.method}: {message.error}"))
            return
        if isinstance(message, _BadNotification):
            log.warning("notification %s ignored: %s", message.method, message.error[:500])
            if message.method == types.TEXT_DOCUMENT_DID_CHANGE and isinstance(self._server, Host):
                uri = _uri_of(message.params)
                if uri is not None:
                    self._server.lost_sync(uri, f"an edit could not be read ({message.error[:200]})")
            return
        fields = _fields(message)
        if not attrs.has(type(message)) or "jsonrpc" not in fields:  # not a JSON-RPC 2.0 message at all
            self._invalid(message, 'not a JSON-RPC 2.0 message (it needs "jsonrpc": "2.0")')
            return
        if fields["jsonrpc"] != "2.0":
            self._invalid(message, f'"jsonrpc" must be "2.0", got {fields["jsonrpc"]!r}')
            return
        method = fields.get("method")
        if self._shutdown and method is not None and method != types.EXIT and "id" in fields:
            log.info("request %s %s after shutdown: refused", message.id, method)
            self._send_response(message.id, error=types.ResponseError(
                code=types.ErrorCodes.InvalidRequest,
                message=f"{method}: the server is shutting down (shutdown was requested); only exit is accepted"))
            return
        return super().handle_message(message)

    def _invalid(self, message: Any, why: str) -> None:
        """A message that is not JSON-RPC 2.0: a request (it has an id and a method) gets InvalidRequest."""
        fields = _fields(message)
        msg_id, method = fields.get("id"), fields.get("method")
        log.warning("message %s ignored: %s", f"{method!r} (id {msg_id!r})" if method is not None else
                    type(message).__name__, why)
        if method is not None and msg_id is not None:
            self._send_response(msg_id if _valid_id(msg_id) else None, error=types.ResponseError(
                code=types.ErrorCodes.InvalidRequest, message=f"invalid request: {why}"))
        elif not isinstance(message, dict):  # a batch or a bare value: nothing to tie an answer to
            self.send_null_id_error(types.ErrorCodes.InvalidRequest, f"invalid request: {why}")

    def _send_data(self, data):
        if self._exited:
            log.debug("after exit, not sent: %s", type(data).__name__)
            return
        return super()._send_data(data)

    def send_null_id_error(self, code: int, message: str) -> None:
        """The JSON-RPC answer to a message whose id cannot be known: ``"id": null`` (which pygls omits)."""
        self._send_data({"jsonrpc": "2.0", "id": None, "error": {"code": int(code), "message": redact(message)}})

    def notify(self, method: str, params: Any | None = None):
        if isinstance(params, types.ShowMessageParams | types.LogMessageParams) and isinstance(params.message, str):
            params.message = redact(params.message)
        return super().notify(method, params)

    def _send_response(self, msg_id, result=None, error=None):
        if error is not None and isinstance(error.message, str):
            error.message = redact(error.message)
        return super()._send_response(msg_id, result, error)

    def _send_handler_result(self, future, *, msg_id):
        if not future.cancelled() and isinstance(future.exception(), FlintRequestError):
            self._request_futures.pop(msg_id, None)
            exc = future.exception()
            # stale / superseded / cancelled answers are routine while typing; bad input deserves a warning
            level = logging.DEBUG if exc.code in _ROUTINE_ERRORS else logging.WARNING
            log.log(level, "request %s answered with error %d: %s", msg_id, exc.code, exc.message)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        return super()._send_handler_result(future, msg_id=msg_id)


def _fields(message: Any) -> dict[str, Any]:
    """A message's fields, whatever pygls made of it: an attrs message, a plain dict, a bare JSON value."""
    if attrs.has(type(message)):
        return attrs.asdict(message, recurse=False)
    return message if isinstance(message, dict) else {}


def _uri_of(params: Any) -> str | None:
    doc = params.get("textDocument") if isinstance(params, dict) else None
    uri = doc.get("uri") if isinstance(doc, dict) else None
    return uri if isinstance(uri, str) else None
