"""Repository context end to end (issue 17): the real `flint serve` on the real default model, a workspace
folder with two modules; the sibling module is open in another tab. In idle time the server admits a context
block holding the definition the current file imports, and the next suggestion's prompt carries it:
flint/status names the chunk (its labels come from the prompt the engine ran, not from the settings)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.fakes import until

pytestmark = [pytest.mark.model, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SERVER = [sys.executable, "-m", "lsp_server", "--threads", "2", *(["-v"] if os.environ.get("FLINT_E2E_VERBOSE") else [])]
CACHE_DIR = tempfile.mkdtemp(prefix="flint-context-cache-")
atexit.register(shutil.rmtree, CACHE_DIR, True)  # this run's own directory
WS = Path(tempfile.mkdtemp(prefix="flint-context-ws-"))
atexit.register(shutil.rmtree, WS, True)  # this run's own directory
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_CACHE_DIR": CACHE_DIR}

GEOMETRY = '''"""Shapes."""


def scale_polygon(points, factor, origin=(0.0, 0.0)):
    """Scale every point of a polygon by factor around origin."""
    ox, oy = origin
    return [(ox + (x - ox) * factor, oy + (y - oy) * factor) for x, y in points]
'''
APP = "from .geometry import scale_polygon\n\n\ndef enlarge(shape):\n    return "


def _plain(obj):
    if hasattr(obj, "_asdict"):
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    (WS / "pkg").mkdir()
    (WS / "pkg" / "__init__.py").write_text("")
    (WS / "pkg" / "geometry.py").write_text(GEOMETRY)
    (WS / "pkg" / "app.py").write_text(APP)
    yield
    shutil.rmtree(CACHE_DIR, ignore_errors=True)
    shutil.rmtree(WS, ignore_errors=True)


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def client(lsp_client: LanguageClient):
    statuses: list[dict] = []

    @lsp_client.feature("flint/status")
    def on_status(params):
        statuses.append(_plain(params))

    lsp_client.statuses = statuses
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities())),
        workspace_folders=[types.WorkspaceFolder(uri=WS.as_uri(), name="ws")],
        initialization_options={"contextBudget": 256, "maxVariants": 1},
    ))
    yield
    await lsp_client.shutdown_session()


async def ask(client: LanguageClient, uri: str, line: int, character: int, invoked: bool = False) -> list:
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    res = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=kind),
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character)))
    return list(res.items if isinstance(res, types.InlineCompletionList) else res or [])


async def test_sibling_definition_reaches_the_prompt_and_the_status(client: LanguageClient):
    sibling = (WS / "pkg" / "geometry.py").as_uri()
    uri = (WS / "pkg" / "app.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=sibling, language_id="python", version=1, text=GEOMETRY)))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=APP)))
    line, col = APP.count("\n"), len(APP.split("\n")[-1])
    await ask(client, uri, line, col)  # the cursor rests here (an editor asks as it moves): the active spot

    def context_now() -> dict:
        shown = [s for s in client.statuses if s.get("context")]
        return shown[-1]["context"] if shown else {}

    # the user looks at the spot: idle time admits the block and prefills it with the window. Asking again
    # at the same spot is answered from memory (no work for the engine) and reports the chunks of the last
    # prompt whose KV is complete
    await until(lambda: context_now().get("chunks"), 120, every=2.0, poke=lambda: ask(client, uri, line, col))
    assert context_now().get("chunks"), [s.get("message") for s in client.statuses][-5:]
    # a keystroke the suggestion did not foresee: a new generation, its prompt behind the block (its KV warm)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, col), types.Position(line, col)), text="z")]))
    n = len(client.statuses)
    items = await ask(client, uri, line, col + 1, invoked=True)
    context = context_now()
    assert items and len(client.statuses) > n, [s.get("message") for s in client.statuses][-5:]
    assert "pkg/geometry.py" in context["files"], context
    assert any(c.startswith("pkg/geometry.py:") for c in context["chunks"]), context
    assert len(context["digest"]) == 16
