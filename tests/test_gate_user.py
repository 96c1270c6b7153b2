"""The learned gate's per-user adjustment (lsp_server/gate_user.py): pure functions and the file, no model.

The issue's targets for it, as deterministic replays of one user's outcomes: one who never takes a suggestion
in comments sees at least half fewer ghosts there after 100 such keystrokes; one who takes most sees no fewer.
"""

from __future__ import annotations

import json
import math

import pytest

from engine.policy.gate import SHOW_NONE, decide
from lsp_server import gate_user
from lsp_server.gate_user import MAX_DOWN, UserGate, adjustment

THRESHOLD = 0.5
# the comment ghosts a gate at THRESHOLD shows with no adjustment: model probabilities from 0.50 to 0.99
SHOWN = [0.5 + i / 100 for i in range(50)]


def logits(p: float) -> dict[str, float]:
    z = math.log(p / (1 - p))
    return {"all": z, "head": z - 1.0}


def ghosts_shown(user: UserGate, cls: str) -> int:
    return sum(decide(logits(p), THRESHOLD, has_head=True, bias=user.bias(cls)) != SHOW_NONE for p in SHOWN)


def replay(user: UserGate, cls: str, keystrokes: int, outcome_of) -> None:
    """``keystrokes`` keystrokes in ``cls``, each under the next of SHOWN when the gate shows it; ``outcome_of(i)``
    says what the user did with the i-th ghost shown."""
    n = 0
    for k in range(keystrokes):
        p = SHOWN[(k * 7) % len(SHOWN)]  # a fixed spread over the probabilities
        if decide(logits(p), THRESHOLD, has_head=True, bias=user.bias(cls)) != SHOW_NONE:
            user.record(cls, outcome_of(n))
            n += 1


@pytest.mark.parametrize("prior", [0.3, 0.5, 0.7])
def test_a_user_who_never_takes_suggestions_in_comments_sees_half_as_many_there_after_100_keystrokes(tmp_path, prior):
    user = UserGate(tmp_path / "gate_user.json", prior=prior)
    before = ghosts_shown(user, "comment")
    replay(user, "comment", 100, lambda i: "over")
    assert ghosts_shown(user, "comment") <= 0.5 * before
    assert ghosts_shown(user, "code") == before  # only the class the user declined


@pytest.mark.parametrize("prior", [0.3, 0.5, 0.7, 0.9])
def test_a_user_who_takes_most_suggestions_sees_no_fewer(tmp_path, prior):
    user = UserGate(tmp_path / "gate_user.json", prior=prior)
    before = ghosts_shown(user, "code")
    replay(user, "code", 100, lambda i: "over" if i % 5 == 4 else ("taken" if i % 2 else "through"))
    assert user.bias("code") >= 0
    assert ghosts_shown(user, "code") >= before


def test_a_short_streak_moves_the_bias_little_and_no_streak_switches_suggestions_off():
    assert adjustment("o" * 10, 0.5) > -1.0
    assert adjustment("o" * 200, 0.5) == pytest.approx(-MAX_DOWN)
    # at the lowest bias a ghost the model is sure of is still shown
    assert decide(logits(0.9), THRESHOLD, has_head=False, bias=adjustment("o" * 200, 0.5)) == "all"


def test_no_outcomes_no_adjustment_and_more_right_than_the_prior_raises_it():
    assert adjustment("", 0.4) == 0.0
    assert adjustment("t" * 30, 0.4) > 0
    assert adjustment("th" * 50, 0.4) <= gate_user.MAX_UP


def test_two_servers_add_their_outcomes_to_one_file_and_reset_forgets_them(tmp_path):
    path = tmp_path / "gate_user.json"
    a, b = UserGate(path), UserGate(path)
    a.record("comment", "over")
    b.record("comment", "taken")
    b.record("code", "dismissed")
    a.flush()
    b.flush()
    assert json.loads(path.read_text())["outcomes"] == {"comment": "ot", "code": "d"}
    assert b.outcomes("comment") == "ot" and b.new == {}
    s = gate_user.summary(path)
    assert s["comment"]["outcomes"] == 2 and s["comment"]["right_share"] == 0.5
    assert "comment 2 (50% right" in gate_user.format_summary(s)
    assert gate_user.reset(path) is True
    assert not path.exists() and gate_user.reset(path) is False
    assert UserGate(path).outcomes("comment") == ""


def test_an_unreadable_file_is_no_outcomes_and_the_window_keeps_the_newest(tmp_path):
    path = tmp_path / "gate_user.json"
    path.write_text("{not json")
    assert gate_user.read(path) == {}
    path.write_text(json.dumps({"outcomes": {"comment": "t" * 300 + "x" + "o", "elsewhere": "ttt"}}))
    got = gate_user.read(path)
    assert set(got) == {"comment"} and len(got["comment"]) == gate_user.WINDOW and got["comment"].endswith("to")
