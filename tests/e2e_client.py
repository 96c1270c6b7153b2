"""The end-to-end tests' client side (tests/test_server_e2e*.py): the server command, client capabilities,
the status watch, and the requests they send."""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import uuid
from concurrent.futures import Future
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCRequestMessage
from pytest_lsp import LanguageClient

from tests.fakes import until

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "lsp_server", "--threads", "2", *(["-v"] if os.environ.get("FLINT_E2E_VERBOSE") else [])]
# a fresh disk cache per run: answers from an earlier run's cache would not be the "model" these tests check
CACHE_DIR = tempfile.mkdtemp(prefix="flint-e2e-cache-")
atexit.register(shutil.rmtree, CACHE_DIR, True)  # this run's own directory
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_CACHE_DIR": CACHE_DIR}

CONTENT_MODIFIED = -32801
SERVER_CANCELLED = -32802
REQUEST_CANCELLED = -32800
INVALID_PARAMS = -32602
REQUEST_FAILED = -32803
METHOD_NOT_FOUND = -32601


def capabilities(*, inline: bool, encodings: list[str] | None) -> types.ClientCapabilities:
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=encodings),
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(),
            completion=types.CompletionClientCapabilities(
                completion_item=types.ClientCompletionItemOptions(snippet_support=False)),
            inline_completion=types.InlineCompletionClientCapabilities() if inline else None,
        ),
        workspace=types.WorkspaceClientCapabilities(configuration=True, execute_command=
                                                    types.ExecuteCommandClientCapabilities()),
        window=types.WindowClientCapabilities(work_done_progress=True, show_message=
                                              types.ShowMessageRequestClientCapabilities()),
    )


def watch_status(client: LanguageClient) -> list[dict]:
    statuses: list[dict] = []

    @client.feature("flint/status")
    def on_status(params):
        statuses.append({k: getattr(params, k) for k in params._fields})

    return statuses



# ---------------------------------------------------------------------------------------------- helpers

_docs = 0


def open_doc(client: LanguageClient, text: str, language: str = "python", ext: str = "py") -> str:
    global _docs
    _docs += 1
    uri = f"file:///e2e/doc{_docs}.{ext}"
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    return uri


def change(client: LanguageClient, uri: str, version: int, text: str,
           rng: tuple[int, int, int, int] | None = None) -> None:
    if rng is None:
        ch = types.TextDocumentContentChangeWholeDocument(text=text)
    else:
        ch = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(rng[0], rng[1]), types.Position(rng[2], rng[3])), text=text)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version), [ch]))


def inline_params(uri: str, line: int, character: int, invoked: bool = False) -> types.InlineCompletionParams:
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=kind),
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character))


def send_inline(client: LanguageClient, params: types.InlineCompletionParams) -> asyncio.Future:
    """Send now (the *_async client methods only send once awaited) and return the awaitable answer."""
    return asyncio.wrap_future(client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params))


async def inline(client, uri, line, character, invoked=False) -> list[types.InlineCompletionItem]:
    res = await send_inline(client, inline_params(uri, line, character, invoked))
    assert res is not None
    return list(res.items if isinstance(res, types.InlineCompletionList) else res)


def end_of(text: str) -> tuple[int, int]:
    """UTF-16 position of the end of ``text`` (LF only)."""
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2


def raw_request(client: LanguageClient, method: str, params, msg_id: str | None = None) -> asyncio.Future:
    """Send a request exactly as given (malformed params included) and await its response."""
    msg_id = msg_id or str(uuid.uuid4())
    fut: Future = Future()
    client.protocol._request_futures[msg_id] = fut
    client.protocol._send_data(JsonRPCRequestMessage(id=msg_id, method=method, params=params, jsonrpc="2.0"))
    return asyncio.wrap_future(fut)


async def error_code(awaitable) -> int:
    with pytest.raises(JsonRpcException) as ei:
        await awaitable
    return ei.value.code


async def wait_ready(client: LanguageClient, timeout: float = 180) -> None:
    await until(lambda: any(s["state"] == "ready" for s in client.statuses), timeout)
    assert any(s["state"] == "ready" for s in client.statuses), client.statuses


def generations(client: LanguageClient, since: int = 0) -> int:
    """The model generations started after the first ``since`` flint/status (each starts with a "busy")."""
    return sum(s["state"] == "busy" for s in client.statuses[since:])


def busy(client: LanguageClient, since: int = 0) -> bool:
    """Whether a generation started after the first ``since`` flint/status."""
    return generations(client, since) > 0


async def wait_idle(client: LanguageClient, timeout: float = 60) -> None:
    """Until the engine thread's own last word (flint/status) is "ready": nothing running or queued."""
    def idle() -> bool:
        said = [s["message"] for s in client.statuses if s["message"] in ("generating", "ready")]
        return bool(said) and said[-1] == "ready"

    await until(idle, timeout)


def meaningful(text: str) -> bool:
    return bool(text.strip())


async def raw_variants(client, uri, line, character):
    return await client.protocol.send_request_async("flint/variants", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
