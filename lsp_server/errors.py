"""``RequestError``: a request the server refuses, with its JSON-RPC / LSP error code. The session raises it
and the protocol layer answers with it; both import it from here (neither imports the other for it)."""

from __future__ import annotations


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
