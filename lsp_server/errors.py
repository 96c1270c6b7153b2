"""``RequestError``: a request the server refuses, with its JSON-RPC / LSP error code. The session raises it
and the protocol layer answers with it; both import it from here (neither imports the other for it).
``request_error`` says which one a request hears for what ended its work (completion/jobs.py)."""

from __future__ import annotations

from lsp_server.completion.jobs import Cancelled, EngineUnavailable, Stale, Superseded


class RequestError(Exception):
    """A request the server refuses; ``code`` is the JSON-RPC / LSP error code."""

    INVALID_PARAMS = -32602
    REQUEST_FAILED = -32803
    SERVER_CANCELLED = -32802
    CONTENT_MODIFIED = -32801
    REQUEST_CANCELLED = -32800

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def request_error(e: BaseException) -> tuple[RequestError, str]:
    """The error a request's client hears for what ended its work, and the stats counter it counts in."""
    if isinstance(e, RequestError):
        return e, "errors"
    if isinstance(e, Stale):
        return RequestError(RequestError.CONTENT_MODIFIED, str(e)), "stale"
    if isinstance(e, Superseded):
        return RequestError(RequestError.SERVER_CANCELLED, str(e)), "cancelled"
    if isinstance(e, Cancelled):
        return RequestError(RequestError.REQUEST_CANCELLED, str(e)), "cancelled"
    if isinstance(e, EngineUnavailable):
        return RequestError(RequestError.REQUEST_FAILED, f"Flint model unavailable: {e}"), "errors"
    return RequestError(RequestError.REQUEST_FAILED, f"completion failed: {type(e).__name__}: {e}"), "errors"
