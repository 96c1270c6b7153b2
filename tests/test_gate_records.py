"""The learned gate's data and training, without a model: the replay's records (scripts/replay_records.py) and
the trainer (scripts/train_gate.py) on records made up here."""

from __future__ import annotations

import json
import random

import pytest

from engine.policy import gate
from tests.scripts import load_script

records = load_script("replay_records")
typist = load_script("replay_typist")
trainer = load_script("train_gate")


def key(kind: str, ghost: str | None, *, in_ghost=False, right=None, gid=None, match=None, saved=0):
    k = typist.Key("pkg:mod:f", kind, "x", 0.0, in_ghost=in_ghost, saved=saved)
    k.ghost, k.ghost_right, k.ghost_id, k.ghost_match = ghost, right, gid, match
    return k


def test_each_keystroke_gets_its_ghosts_fate_features_and_labels():
    run = typist.Run("cur/steady", "cur", "steady", split="tuning",
                     keys=[key("tab", "foo(a)", right=True, gid="1", match=6, saved=5),
                           key("char", "bar(b, c)", in_ghost=True, right=False, gid="2", match=5),
                           key("char", "zap", right=False, gid="3", match=0),
                           key("char", None)])
    server = {"1": {"id": "1", "text": "foo(a)", "head": 0, "features": {"lead_logp": 0.0}, "decision": "all"},
              "2": {"id": "2", "text": "bar(b, c)", "head": 5, "features": {"lead_logp": -1.0}, "decision": "all"}}
    out = records.keystroke_records(run, server)
    assert [r["fate"] for r in out] == ["taken", "through", "over", None]
    assert out[0]["right_all"] is True and out[0]["right_head"] is False and out[0]["saved"] == 5
    assert out[1]["right_all"] is False and out[1]["right_head"] is True  # "bar(b" is what follows
    assert out[1]["features"] == {"lead_logp": -1.0} and out[1]["same_text"] is True
    assert "features" not in out[2] and "features" not in out[3]  # the server's record unknown / no ghost
    assert all(r["split"] == "tuning" for r in out)


def test_server_records_are_read_by_id_and_a_cut_line_is_skipped(tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text('{"id": "a", "head": 1}\n{"id": "b", "he')
    assert set(records.read_server_records(path)) == {"a"}
    assert records.read_server_records(tmp_path / "none.jsonl") == {}
    assert records.common_prefix("foo(bar)", "foo(baz)") == 6


def made_up(n_functions: int = 40, seed: int = 0) -> list[dict]:
    """Keystrokes whose ghost is right when the model was sure of its first token (plus noise)."""
    rng = random.Random(seed)
    out = []
    for f in range(n_functions):
        for _ in range(30):
            sure = rng.random() < 0.5
            right = rng.random() < (0.85 if sure else 0.15)
            lead = rng.uniform(-0.05, 0) if sure else rng.uniform(-2.5, -0.5)
            out.append({"split": "tuning", "segment": f"pkg:mod:f{f}", "typist": "steady", "same_text": True,
                        "features": {"lead_logp": lead, "noise": rng.random(), "in_comment": 0.0},
                        "right_all": right, "right_head": False, "head": 0,
                        "saved": 6 if right and rng.random() < 0.5 else 0,
                        "fate": "taken" if right else "over", "cost_ms": 0.3})
    return out


def test_training_cuts_wrong_ghosts_on_held_out_functions_and_the_model_loads(tmp_path):
    model, summary = trainer.train(made_up(), share=0.3, max_saved_loss=0.2, l2=1.0)
    held = summary["held_out"]
    assert held["after"]["wrong_keys"] < 0.6 * held["before"]["wrong_keys"]
    assert held["after"]["saved_chars"] >= 0.7 * held["before"]["saved_chars"]
    train_fns = {r["segment"] for r in made_up() if not trainer.held_out(r["segment"], 0.3)}
    assert summary["train"]["functions"] == len(train_fns) < summary["functions"]
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(model))
    m = gate.load(path)
    assert m is not None and m.threshold == summary["threshold"]
    sure, unsure = m.logits({"lead_logp": 0.0}), m.logits({"lead_logp": -2.0})
    assert sure["all"] > unsure["all"]


def test_the_trainer_refuses_records_of_another_split(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({**made_up(1)[0], "split": "validation"}) + "\n")
    with pytest.raises(SystemExit, match="tuning only"):
        trainer.load_records([path])
