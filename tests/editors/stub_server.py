"""A protocol-only stand-in for `flint serve`, for checking the editor clients without a model.

It speaks the same surface as docs/protocol.md (textDocument/inlineCompletion with ranked variants and an
accept command, flint/variants, flint/status, flint/didShow|didAccept|didPartiallyAccept|didMoveCursor)
and answers deterministically: at the end of a line `def add(a, b):` + newline it offers three bodies,
elsewhere three fixed calls. Every notification it receives is appended as a JSON line to $FLINT_STUB_LOG,
so tests can check what the client reported. The real end-to-end tests use the real server.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import uuid

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

server = LanguageServer("flint-stub", "0.0.1")
LOG = os.environ.get("FLINT_STUB_LOG")

VARIANTS_BODY = ["return a + b", "return sum((a, b))", "raise NotImplementedError"]
VARIANTS_MUL = ["return a * b", "return math.prod((a, b))", "raise NotImplementedError"]
VARIANTS_ANY = ["flint_one()", "flint_two()", "flint_three()"]


def plain(obj: object) -> object:
    """JSON-able form of lsprotocol objects and pygls' namedtuples for custom methods."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    try:
        return server.converter.unstructure(obj)
    except Exception:
        return str(obj)


def record(kind: str, params: object) -> None:
    if not LOG:
        return
    data = plain(params)
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({"t": time.time(), "kind": kind, "params": data}) + "\n")


# what the real server says fed a suggestion (repository context chunks: path:line (source))
CONTEXT = {"files": ["pkg/util.py"], "chunks": ["pkg/util.py:3 (import)"], "digest": "0123456789abcdef"}


def status(state: str, latency: float | None = None, source: str | None = None) -> None:
    server.protocol.notify("flint/status", {"state": state, "model": "stub", "lastLatencyMs": latency,
                                            "source": source, "message": f"stub {state}",
                                            **({"context": CONTEXT} if source else {})})


def suggestions(uri: str, pos: t.Position) -> list[str]:
    doc = server.workspace.get_text_document(uri)
    lines = doc.lines
    line = lines[pos.line] if pos.line < len(lines) else ""
    before = line[: pos.character]
    prev = lines[pos.line - 1] if pos.line > 0 else ""
    if before.strip() == "" and prev.rstrip().endswith("def add(a, b):"):
        return VARIANTS_BODY
    if before.strip() == "" and prev.rstrip().endswith("def mul(a, b):"):
        return VARIANTS_MUL
    return VARIANTS_ANY


def typed_through(uri: str, pos: t.Position, variants: list[str]) -> list[tuple[int, str]]:
    """Variants still consistent with the word typed before the cursor, minus what is typed."""
    doc = server.workspace.get_text_document(uri)
    line = doc.lines[pos.line] if pos.line < len(doc.lines) else ""
    before = line[: pos.character]
    word = re.search(r"[\w.( +]*$", before.lstrip()).group(0).lstrip()  # the expression being typed
    out = []
    for i, v in enumerate(variants):
        if word and v.startswith(word):
            out.append((i, v[len(word):]))
        elif not word:
            out.append((i, v))
    return [(i, v) for i, v in out if v]


@server.feature(t.INITIALIZED)
def initialized(ls: LanguageServer, params: t.InitializedParams) -> None:
    # One line of each kind a client must show at its level: window/logMessage, and stderr in the
    # real server's logging format (lsp_server/cli.py).
    ls.window_log_message(t.LogMessageParams(type=t.MessageType.Info, message="stub logMessage info"))
    ls.window_log_message(t.LogMessageParams(type=t.MessageType.Warning, message="stub logMessage warning"))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + ",000"
    sys.stderr.write(f"{stamp} flint.stub INFO stub stderr info\n{stamp} flint.stub WARNING stub stderr warning\n")
    sys.stderr.flush()
    status("loading")

    def ready() -> None:
        time.sleep(0.3)
        status("ready")

    threading.Thread(target=ready, daemon=True).start()


@server.feature(t.TEXT_DOCUMENT_INLINE_COMPLETION)
def inline(ls: LanguageServer, params: t.InlineCompletionParams) -> t.InlineCompletionList:
    t0 = time.perf_counter()
    cid = uuid.uuid4().hex[:12]
    items = []
    for rank, (_i, text) in enumerate(typed_through(params.text_document.uri, params.position,
                                                   suggestions(params.text_document.uri, params.position))):
        items.append(t.InlineCompletionItem(
            insert_text=text,
            range=t.Range(params.position, params.position),
            command=t.Command(title="Flint: accepted", command="flint.accept",
                              arguments=[{"id": cid, "index": rank}]),
        ))
    ms = (time.perf_counter() - t0) * 1000 + 12.0
    status("ready", round(ms, 2), "model")
    return t.InlineCompletionList(items=items)


@server.feature(t.TEXT_DOCUMENT_COMPLETION)
def completion(ls: LanguageServer, params: t.CompletionParams) -> t.CompletionList:
    text = suggestions(params.text_document.uri, params.position)[0]
    return t.CompletionList(is_incomplete=True, items=[t.CompletionItem(
        label=f"⚡ Flint: {text.splitlines()[0]}", insert_text=text,
        insert_text_format=t.InsertTextFormat.PlainText, detail="Flint (12 ms, model)")])


@server.feature("flint/variants")
def variants(ls: LanguageServer, params) -> dict:
    uri = params.textDocument.uri
    pos = t.Position(params.position.line, params.position.character)
    cid = uuid.uuid4().hex[:12]
    doc = ls.workspace.get_text_document(uri)
    vs = typed_through(uri, pos, suggestions(uri, pos))
    return {"id": cid, "version": doc.version or 0, "items": [
        {"index": rank, "insertText": text,
         "range": {"start": {"line": pos.line, "character": pos.character},
                   "end": {"line": pos.line, "character": pos.character}},
         "ttftMs": 5.0 + rank, "totalMs": 20.0 + 10 * rank, "source": "model" if rank else "memory",
         "tokens": 6} for rank, (_, text) in enumerate(vs)]}


@server.feature(t.WORKSPACE_EXECUTE_COMMAND, t.ExecuteCommandOptions(commands=["flint.accept"]))
def execute(ls: LanguageServer, params: t.ExecuteCommandParams) -> None:
    record("executeCommand", params)


for _method in ("flint/didShow", "flint/didAccept", "flint/didPartiallyAccept", "flint/didMoveCursor"):
    def _make(method: str):
        @server.feature(method)
        def _handler(ls: LanguageServer, params) -> None:
            record(method, params)
        return _handler
    _make(_method)


@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: t.DidOpenTextDocumentParams) -> None:
    record("didOpen", {"uri": params.text_document.uri, "languageId": params.text_document.language_id})


@server.feature(t.INITIALIZE)
def initialize(ls: LanguageServer, params: t.InitializeParams) -> None:
    record("initialize", {"initializationOptions": params.initialization_options,
                          "trace": params.trace})


@server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_config(ls: LanguageServer, params: t.DidChangeConfigurationParams) -> None:
    record("didChangeConfiguration", {"settings": plain(params.settings)})


if __name__ == "__main__":
    server.start_io()
