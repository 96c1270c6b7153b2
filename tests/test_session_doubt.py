"""The doubt gate a document gets when the user sets none: its language's own (items.doubt_for), through a
session on the fake engine."""

from __future__ import annotations

import pytest

from lsp_server.documents import Change
from lsp_server.items import DOUBT, DOUBT_BY_LANGUAGE
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text

GO_GATE = DOUBT_BY_LANGUAGE["go"].gate


async def _ask(start_session, language: str, settings: Settings | None = None, lead: float = GO_GATE / 2):
    """A mid-line automatic request whose suggestion's first token the model gave ``lead``."""
    eng = FakeEngine(text("eturn a + b"), doubts=((0, lead),))
    s = start_session(eng, settings)
    uri = f"file:///doubt.{language}"
    s.did_open(uri, "func add(a, b int) int {\n    \n}\n", 1, language)
    s.did_edit(uri, 2, [Change("r", (1, 4, 1, 4))])
    res = await s.suggest(uri, 1, 5, invoked=False)
    return [it.text for it in res.items]


def test_go_has_its_own_gate_and_the_others_none():
    assert GO_GATE > DOUBT.gate == 0.0


@pytest.mark.parametrize("language,shown", [("go", False), ("python", True), ("rust", True)])
async def test_a_doubted_first_token_shows_nothing_where_the_language_gates_it(start_session, language, shown):
    items = await _ask(start_session, language)
    assert bool(items) == shown, items
    if shown:
        assert items[0].startswith("eturn")  # (Rust post-processing may end it sooner in this Go text)


async def test_a_sure_first_token_is_shown_in_go(start_session):
    assert (await _ask(start_session, "go", lead=min(1.0, GO_GATE + 0.05)))[0].endswith("eturn a + b")


async def test_the_users_gate_applies_in_every_language(start_session):
    # off: Go shows it (the learned gate, on in Go by default, is another setting: tests/test_gate_session.py)
    assert await _ask(start_session, "go", Settings(confidence_gate=0.0, learned_gate=False))
    assert not await _ask(start_session, "python", Settings(confidence_gate=GO_GATE))  # on: Python hides it
