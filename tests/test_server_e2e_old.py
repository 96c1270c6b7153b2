"""End to end, an older client and a missing model: the real `flint serve` driven by pytest-lsp (see
tests/test_server_e2e.py). ``old_client`` has no inline completion and offers UTF-8 (after UTF-16): it gets
UTF-8 positions and the ``textDocument/completion`` fallback; ``broken_client`` starts with no model."""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.e2e_client import (
    ENV,
    REQUEST_FAILED,
    SERVER,
    capabilities,
    change,
    end_of,
    inline_params,
    meaningful,
    open_doc,
    raw_variants,
    send_inline,
    wait_ready,
    watch_status,
)
from tests.fakes import until

pytestmark = [pytest.mark.model, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def old_client(lsp_client: LanguageClient):
    lsp_client.statuses = watch_status(lsp_client)
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(inline=False, encodings=["utf-16", "utf-8"]),
        client_info=types.ClientInfo(name="e2e-old-client", version="1"),
        # one invalid value: the user is warned, the rest is used
        initialization_options={"flint": {"maxVariants": "lots", "maxLines": 4}},
    ))
    yield
    await lsp_client.shutdown_session()



async def test_old_client_gets_utf8_and_a_settings_warning(old_client: LanguageClient):
    assert old_client.init_result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
    await until(lambda: old_client.messages, 10)
    warnings = [m for m in old_client.messages if m.type == types.MessageType.Warning]
    assert any("maxVariants" in m.message for m in warnings), old_client.messages


async def test_completion_fallback(old_client: LanguageClient):
    await wait_ready(old_client)  # a request made while the model loads is answered at its deadline instead
    text = "def factorial(n):\n    if n <= 1:\n        return 1\n    return "
    uri = open_doc(old_client, text + "\n")
    line, col = end_of(text)
    res = await old_client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, col),
        context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked)))
    assert isinstance(res, types.CompletionList) and res.is_incomplete
    assert len(res.items) == 1
    item = res.items[0]
    assert item.label.startswith("⚡ Flint: ")
    assert item.insert_text_format == types.InsertTextFormat.PlainText
    assert item.detail.startswith("Flint (") and item.detail.endswith(" ms, model)")
    assert item.text_edit.range.start == types.Position(line, col)
    assert meaningful(item.text_edit.new_text) and "\n" not in item.text_edit.new_text


async def test_utf8_positions(old_client: LanguageClient):
    await wait_ready(old_client)
    # 😀 is four UTF-8 bytes: character 9 is just after it, 7 is inside it
    uri = open_doc(old_client, 'x = "😀\n')
    res = await raw_variants(old_client, uri, 0, 9)
    assert res.items
    assert all((v.range.start.line, v.range.start.character) == (0, 9) for v in res.items)
    res = await raw_variants(old_client, uri, 0, 7)
    assert all((v.range.start.line, v.range.start.character) == (0, 5) for v in res.items)
    # incremental edit in UTF-8 units: delete both emoji (8 bytes)
    uri = open_doc(old_client, 'x = "😀😀"; y = x + \n')
    change(old_client, uri, 2, "", (0, 5, 0, 13))
    res = await raw_variants(old_client, uri, 0, 16)
    assert res.items
    assert all((v.range.start.line, v.range.start.character) == (0, 16) for v in res.items)


async def test_configuration_change_applies_and_warns(old_client: LanguageClient):
    n = len(old_client.messages)
    old_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"flint": {"maxLines": 1, "multiline": "sideways"}}))
    text = "def area(w, h):\n    "
    uri = open_doc(old_client, text + "\n")
    line, col = end_of(text)
    res = await raw_variants(old_client, uri, line, col)
    for v in res.items:
        assert len([ln for ln in v.insertText.split("\n") if ln.strip()]) <= 1, v.insertText
    assert any("multiline" in m.message for m in old_client.messages[n:])
    # disabled: no suggestions, no model call
    old_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"flint": {"enable": False}}))
    res = await raw_variants(old_client, uri, line, col)
    assert res.items == []
    old_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"flint": {"enable": True}}))


# ------------------------------------------------------------------------------------ a model that is missing


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server", "--model", "no-such-model"], server_env=ENV))
async def broken_client(lsp_client: LanguageClient):
    lsp_client.statuses = watch_status(lsp_client)
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(inline=True, encodings=["utf-16"])))
    yield
    await lsp_client.shutdown_session()


async def test_missing_model_is_reported_and_requests_fail_clearly(broken_client: LanguageClient):
    def error_messages() -> list:
        return [m for m in broken_client.messages if m.type == types.MessageType.Error]

    # the status and the message are two notifications: wait for both, whichever lands last
    await until(lambda: any(s["state"] == "error" for s in broken_client.statuses) and error_messages(), 60)
    assert any(s["state"] == "error" for s in broken_client.statuses), broken_client.statuses
    errors = error_messages()
    assert errors and "flint model build" in errors[0].message
    uri = open_doc(broken_client, "x = \n")
    for _ in range(2):  # the server stays up and answers every time
        with pytest.raises(JsonRpcException) as ei:
            await send_inline(broken_client, inline_params(uri, 0, 4))
        assert ei.value.code == REQUEST_FAILED and "flint model build" in ei.value.message
