"""The learned gate in the session (no LSP, no model: a scripted engine): automatic answers pass it, explicit
requests never do, the learnedGate setting switches it off, and what the user does next reaches the gate
(learnedGateAdapts: the user's part of it)."""

from __future__ import annotations

import time

from engine.policy import gate
from lsp_server.documents import Change
from lsp_server.gate_user import UserGate
from lsp_server.gatekeeper import GateKeeper
from lsp_server.items import gate_on
from lsp_server.settings import Settings
from tests.fakes import FakeEngine, text

NAMES = ("lead_logp",)


def strict(tmp_path, bias: float) -> GateKeeper:
    """A gate that shows a suggestion when ``bias`` > 0 (a model that reads nothing)."""
    m = gate.GateModel(NAMES, (0.0,), (1.0,), {"all": gate.Head((0.0,), bias), "head": gate.Head((0.0,), -9.0)},
                       0.5, {})
    return GateKeeper(m, UserGate(tmp_path / "gate_user.json"))


async def test_a_gate_that_says_none_hides_automatic_suggestions_only(start_session, tmp_path):
    s = start_session(FakeEngine(text(" 42")), Settings(learned_gate=True))
    s.gate = strict(tmp_path, -5.0)
    s.documents.open("file:///a.py", "answer =\n", 1)
    assert (await s.suggest("file:///a.py", 0, 8, invoked=False)).items == []
    assert [it.text for it in (await s.suggest("file:///a.py", 0, 8, invoked=True)).items] == [" 42"]


async def test_the_setting_switches_the_gate_off(start_session, tmp_path):
    s = start_session(FakeEngine(text(" 42")), Settings(learned_gate=False))
    s.gate = strict(tmp_path, -5.0)
    s.documents.open("file:///a.py", "answer =\n", 1)
    assert [it.text for it in (await s.suggest("file:///a.py", 0, 8, invoked=False)).items] == [" 42"]


async def test_unset_the_gate_is_the_languages_own_on_in_go_javascript_and_python_only(start_session, tmp_path):
    for language, setting, gated in (("javascript", None, True), ("python", None, True), ("go", None, True),
                                     ("typescript", None, False), ("javascript", False, False),
                                     ("python", False, False), ("go", False, False), ("rust", True, True)):
        s = start_session(FakeEngine(text(" 42")), Settings(learned_gate=setting))
        s.gate = strict(tmp_path, -5.0)
        s.documents.open("file:///a.txt", "answer =\n", 1, language)
        got = [it.text for it in (await s.suggest("file:///a.txt", 0, 8, invoked=False)).items]
        assert got == ([] if gated else [" 42"]), (language, setting)


def test_gate_on_is_the_users_value_where_set_else_the_languages():
    assert gate_on(None, "JavaScript") and gate_on(None, "python") and gate_on(None, "go")
    assert not gate_on(None, "typescript") and not gate_on(None, "rust") and not gate_on(None, None)
    assert not gate_on(False, "go") and gate_on(True, "rust")


async def test_typing_over_a_shown_ghost_is_an_outcome_for_the_user(start_session, tmp_path):
    s = start_session(FakeEngine(text(" 42")), Settings(learned_gate=True))
    s.gate = strict(tmp_path, 5.0)
    uri = "file:///a.py"
    s.documents.open(uri, "answer =\n", 1)
    assert [it.text for it in (await s.suggest(uri, 0, 8, invoked=False)).items] == [" 42"]
    s.documents.change(uri, 2, [Change("7", (0, 8, 0, 8))], s.encoding)
    s.did_change(uri, cursor=len("answer =7"))
    assert s.gate.user.outcomes("code") == "o"
    assert s.gate.rhythm(uri, time.monotonic()).since is not None


async def test_learned_gate_adapts_off_ignores_and_keeps_no_user_outcomes(start_session, tmp_path):
    uri = "file:///a.py"
    for adapts, shown in ((True, []), (False, [" 42"])):
        s = start_session(FakeEngine(text(" 42")), Settings(learned_gate=True, learned_gate_adapts=adapts))
        s.gate = strict(tmp_path / str(adapts), 0.3)  # shown by the model alone (p 0.57 against 0.5)
        for _ in range(100):
            s.gate.user.record("code", "over")  # a user who typed over every ghost: the bias at its lowest
        s.documents.open(uri, "answer =\n", 1)
        assert [it.text for it in (await s.suggest(uri, 0, 8, invoked=False)).items] == shown
    s.documents.change(uri, 2, [Change("7", (0, 8, 0, 8))], s.encoding)
    s.did_change(uri, cursor=len("answer =7"))
    assert s.gate.user.outcomes("code") == "o" * 100  # the shown ghost typed over: not kept
    assert list(s.gate._history[uri]) == ["over"]  # the document's history still moves


async def test_the_gate_never_hides_at_a_fresh_lines_indentation(start_session, tmp_path):
    uri = "file:///a.py"
    for doc, col, shown in (("def f():\n    \n", 4, [" 42"]), ("def f():\n    x =\n", 7, [])):
        s = start_session(FakeEngine(text(" 42")), Settings(learned_gate=True))
        s.gate = strict(tmp_path / str(col), -5.0)
        s.documents.open(uri, doc, 1)
        assert [it.text for it in (await s.suggest(uri, 1, col, invoked=False)).items] == shown
