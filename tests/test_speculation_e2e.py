"""End to end on the real model: answers without a model call (memory, type-through, the look-ahead line,
the disk cache across a restart), through the real `flint serve` driven by pytest-lsp.

"No model call" is read from the server itself: it reports ``busy`` on flint/status whenever the engine
starts a generation, and the source of every answer (``model`` | ``memory`` | ``disk`` |
``type-through``) in flint/status and in flint/variants items.

Two servers share one cache directory: ``client`` fills it; ``second`` starts while ``client`` is still
running (two editors on one machine) and answers the same position from disk.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.e2e_client import capabilities, change, end_of, inline_params, send_inline, wait_ready

pytestmark = [pytest.mark.model, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

CACHE_DIR = tempfile.mkdtemp(prefix="flint-e2e-cache-")
atexit.register(shutil.rmtree, CACHE_DIR, True)  # this run's own directory
SERVER = [sys.executable, "-m", "lsp_server", "--threads", "2", *(["-v"] if os.environ.get("FLINT_E2E_VERBOSE") else [])]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_CACHE_DIR": CACHE_DIR}
INIT = {"maxVariants": 1, "maxLines": 4}

CODE = "def add(a, b):\n    "
REST = "\n\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module", autouse=True)
def _cleanup_cache():
    yield
    shutil.rmtree(CACHE_DIR, ignore_errors=True)


def _watch(client: LanguageClient) -> None:
    client.statuses = []

    @client.feature("flint/status")
    def on_status(params):
        client.statuses.append({k: getattr(params, k) for k in params._fields})


async def _init(client: LanguageClient, name: str) -> None:
    _watch(client)
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(inline=True, encodings=None),
        client_info=types.ClientInfo(name=name, version="1"), initialization_options=INIT))
    await wait_ready(client, 240)


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def client(lsp_client: LanguageClient):
    await _init(lsp_client, "e2e-speculation")
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def second(lsp_client: LanguageClient):
    await _init(lsp_client, "e2e-speculation-second")
    yield
    await lsp_client.shutdown_session()


_n = 0


def open_doc(client: LanguageClient, text: str, name: str | None = None) -> str:
    global _n
    _n += 1
    uri = f"file:///e2e-spec/{name or f'doc{_n}'}.py"
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    return uri


async def ask(client: LanguageClient, uri: str, line: int, col: int) -> tuple[list, dict, bool, float]:
    """One automatic inline request: (items, the status that reported its answer, whether the engine
    started a generation meanwhile, seconds)."""
    n = len(client.statuses)
    t0 = time.monotonic()
    res = await send_inline(client, inline_params(uri, line, col))
    dt = time.monotonic() - t0
    items = list(res.items) if res is not None else []
    new = client.statuses[n:]
    answered = [s for s in new if s["message"].split(" ")[0] in ("model", "memory", "disk", "type-through")]
    busy = any(s["message"] == "generating" for s in new)  # the engine started a generation
    return items, (answered[-1] if answered else {}), busy, dt


async def idle(client: LanguageClient, quiet_s: float = 1.5, timeout: float = 120) -> None:
    """Wait until the engine has been quiet (no busy status) for ``quiet_s``: futures are done."""
    deadline = time.monotonic() + timeout
    last = len(client.statuses)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if len(client.statuses) != last:
            last = len(client.statuses)
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            engine = [st["message"] for st in client.statuses if st["message"] in ("generating", "ready")]
            if engine and engine[-1] == "ready":  # the engine thread's own last word: nothing running
                return
    raise AssertionError(f"engine still busy after {timeout}s: {[s['message'] for s in client.statuses[-12:]]}")


# ---------------------------------------------------------------------------------------------------------


async def test_a_second_identical_request_is_answered_with_no_model_call(client: LanguageClient):
    uri = open_doc(client, CODE + REST)
    line, col = end_of(CODE)
    items, status, _, _ = await ask(client, uri, line, col)
    assert items and items[0].insert_text.strip(), "the model suggests a function body"
    assert status["source"] == "model"
    await idle(client)  # the generation (and the futures after it) finished
    items, _, _, _ = await ask(client, uri, line, col)  # the whole suggestion, if the first was partial
    items2, status2, busy, dt = await ask(client, uri, line, col)
    assert [i.insert_text for i in items2] == [i.insert_text for i in items]
    assert status2["source"] == "memory" and not busy, (status2, busy, dt)
    # flint/variants reports the source on each item
    res = await client.protocol.send_request_async("flint/variants", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": col}})
    assert res.items and res.items[0].source == "memory" and res.items[0].insertText == items[0].insert_text


async def test_typing_through_a_suggestion_answers_without_a_model_call(client: LanguageClient):
    uri = open_doc(client, CODE + REST)
    line, col = end_of(CODE)
    items, _, _, _ = await ask(client, uri, line, col)
    assert items
    shown = items[0].insert_text
    typed = shown[: min(4, len(shown) - 1)]
    assert typed and shown.startswith(typed)
    version = 1
    for ch in typed:
        version += 1
        change(client, uri, version, ch, (line, col, line, col))
        col += 1
        got, status, busy, dt = await ask(client, uri, line, col)
        assert got, f"no suggestion after typing {ch!r}"
        rest = got[0].insert_text
        assert shown.startswith(shown[: col - end_of(CODE)[1]] + rest.split("\n")[0]), (shown, rest)
        assert status["source"] == "type-through" and not busy, (status, busy, dt)


async def test_reopening_a_file_answers_from_memory(client: LanguageClient):
    text = "import math\n\n\ndef circle_area(r):\n    "
    uri = open_doc(client, text + "\n", name="reopened")
    line, col = end_of(text)
    items, _, _, _ = await ask(client, uri, line, col)
    assert items
    await idle(client)
    items, _, _, _ = await ask(client, uri, line, col)  # as shown once the generation finished
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    uri = open_doc(client, text + "\n", name="reopened")
    items2, status, busy, _ = await ask(client, uri, line, col)
    assert [i.insert_text for i in items2] == [i.insert_text for i in items]
    assert status["source"] in ("memory", "disk") and not busy


async def test_accepting_a_suggestion_needs_no_model_call(client: LanguageClient):
    """Tab: the end of the accepted line is typed through from the same generation. Then Enter: no future was
    pre-generated after an automatic answer (planner.follow_ups), so the new line is the generation's
    look-ahead line or a model call of its own, for the new line."""
    text = "def area(width, height):\n    result = "
    uri = open_doc(client, text + "\n    return result\n")
    line, col = end_of(text)
    items, _, _, _ = await ask(client, uri, line, col)
    assert items and "\n" not in items[0].insert_text  # one line: text follows on the next lines
    await idle(client)  # the user reads the suggestion
    accepted = items[0].insert_text
    change(client, uri, 2, accepted, (line, col, line, col))  # Tab
    col += len(accepted)
    got, status, busy, _ = await ask(client, uri, line, col)
    assert not busy, status  # nothing to generate for the end of the accepted line
    change(client, uri, 3, "\n    ", (line, col, line, col))  # Enter (the editor indents)
    got, status, busy, dt = await ask(client, uri, line + 1, 4)
    if got:  # the model may have nothing to add before `return result`
        assert status["source"] in ("memory", "type-through", "model"), status
        assert got[0].insert_text.strip() and not got[0].insert_text.startswith(accepted), got[0].insert_text


async def test_the_same_position_after_a_restart_comes_from_disk(client: LanguageClient, second: LanguageClient):
    """``client`` fills the cache; ``second`` (started beside it, two editors on one machine) answers the same
    position from disk with no model call, and types through that entry with none either."""
    text = "class Point:\n    def __init__(self, x, y):\n        "
    uri = open_doc(client, text + "\n", name="shared")
    line, col = end_of(text)
    items, status, _, _ = await ask(client, uri, line, col)
    assert items and status["source"] == "model"
    await idle(client)
    items, status, _, _ = await ask(client, uri, line, col)  # the finished suggestion (the first may be partial)
    assert status["source"] == "memory"
    expected = [i.insert_text for i in items]

    uri = open_doc(second, text + "\n", name="shared")
    items, status, busy, dt = await ask(second, uri, line, col)
    assert [i.insert_text for i in items] == expected
    assert status["source"] == "disk" and not busy, (status, busy, dt)
    change(second, uri, 2, expected[0][0], (line, col, line, col))
    items, status, busy, _ = await ask(second, uri, line, col + 1)
    if len(expected[0]) > 1:
        assert items and status["source"] == "type-through" and "disk" in status["message"] and not busy
