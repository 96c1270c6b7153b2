"""The learned gate's data and training, without a model: the replay's records (scripts/replay_records.py) and
the trainer (scripts/train_gate.py) on records made up here."""

from __future__ import annotations

import json
import random

import numpy as np
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
    assert typist.common_prefix("foo(bar)", "foo(baz)") == 6


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


def test_the_gates_cost_is_read_from_the_server_records_with_ordinary_percentiles():
    report = load_script("replay_report")
    recs = [{"id": str(i), "cost_ms": float(i), "cpu_ms": i / 2} for i in range(1, 101)] + [{"id": "x"}]
    cost = records.gate_cost(recs)
    assert cost["answers"] == 100  # a record without the timings (an older server) is not counted
    assert cost["cost_ms"] == {"p50": 50.5, "p95": 95.05, "p99": 99.01}
    assert cost["cpu_ms"]["p50"] == 25.25
    assert records.gate_cost([]) == {"answers": 0, "cost_ms": {"p50": None, "p95": None, "p99": None},
                                     "cpu_ms": {"p50": None, "p95": None, "p99": None}}
    lines = report.gate_cost_lines({"main": cost})
    assert "| main | 100 | 25.25 ms / 47.52 ms / 49.51 ms | 50.50 ms / 95.05 ms / 99.01 ms |" in lines
    assert report.gate_cost_lines(None) == []


def test_training_cuts_wrong_ghosts_out_of_fold_and_the_model_loads(tmp_path):
    model, summary = trainer.train(made_up(), folds=4, max_saved_loss=0.2, l2=1.0)
    oof = summary["out_of_fold"]
    assert oof["after"]["wrong_keys"] < 0.6 * oof["before"]["wrong_keys"]
    assert oof["after"]["saved_chars"] >= 0.8 * oof["before"]["saved_chars"]
    assert summary["functions"] == len({r["segment"] for r in made_up()})
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(model))
    m = gate.load(path)
    assert m is not None and m.threshold == summary["threshold"]
    sure, unsure = m.logits({"lead_logp": 0.0}), m.logits({"lead_logp": -2.0})
    assert sure["all"] > unsure["all"]


def test_out_of_fold_scores_never_come_from_a_model_that_saw_the_function():
    # a function whose every keystroke is right, in a set where the feature otherwise means wrong: a model that
    # saw it would score it higher than the models that did not
    recs = made_up()
    odd = [dict(r, segment="odd:f", right_all=True, fate="taken", features={**r["features"], "noise": 5.0})
           for r in recs[:40]]
    names = sorted({n for r in recs + odd for n in r["features"]})
    pa, _ = trainer.out_of_fold(recs + odd, names, 4, 1.0, "right")
    fitted = trainer.fit(recs + odd, names, 1.0, "right")
    seen, _ = trainer.probs(fitted, odd, names)
    assert float(pa[-40:].mean()) < float(seen.mean())
    assert {trainer.fold_of(r["segment"], 4) for r in odd} == {trainer.fold_of("odd:f", 4)}


def test_the_taken_label_learns_what_the_typist_took():
    recs = made_up()
    names = sorted({n for r in recs for n in r["features"]})
    taken = trainer.fit(recs, names, 1.0, "taken")
    y = [trainer.LABELS["taken"](r) for r in recs]
    assert y == [r["fate"] == "taken" for r in recs] and any(y) and not all(y)
    pa, _ = trainer.probs(taken, recs, names)
    assert pa[[i for i, t in enumerate(y) if t]].mean() > pa[[i for i, t in enumerate(y) if not t]].mean()


@pytest.mark.parametrize("held_out", ["validation", "test"])
def test_the_trainer_refuses_records_of_a_held_out_split(tmp_path, held_out):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({**made_up(1)[0], "split": held_out}) + "\n")
    with pytest.raises(SystemExit, match="tuning and train only"):
        trainer.load_records([path])


def test_the_trainer_learns_from_the_train_split_beside_tuning(tmp_path):
    path = tmp_path / "r.jsonl"
    rows = made_up(4)
    path.write_text("".join(json.dumps({**r, "split": "train" if i % 2 else "tuning"}) + "\n"
                            for i, r in enumerate(rows)))
    got = trainer.load_records([path])
    assert {r["split"] for r in got} == {"tuning", "train"} and len(got) == len(rows)


def test_a_held_out_functions_key_is_the_one_the_replay_takes(tmp_path):
    import replay_corpus

    spec = replay_corpus.Spec("cachetools", "5.5.0", "cachetools/__init__.py", "MRUCache.__getitem__", "tuning")
    src = tmp_path / "m.py"
    src.write_text("class MRUCache:\n    def __getitem__(self, key):\n        return key\n")
    seg = replay_corpus.function_segment(src, spec.qualname, f"{spec.package}=={spec.version}/{spec.module}")
    assert trainer.only_key(seg.name) == spec.key
    assert replay_corpus.pick([spec], "tuning", only=(trainer.only_key(seg.name),)) == [spec]


def test_each_languages_figures_are_its_own_records():
    recs = made_up(20)
    for i, r in enumerate(recs):
        r["features"] = {**r["features"], "lang_js": float(i % 2), "lang_python": float(1 - i % 2)}
    assert trainer.language_of(recs[1]) == "js" and trainer.language_of(made_up(1)[0]) == "other"
    _, summary = trainer.train(recs, folds=4, max_saved_loss=0.2, l2=1.0)
    by = summary["by_language"]
    assert set(by) == {"js", "python"} and by["js"]["records"] + by["python"]["records"] == len(recs)
    assert sum(b["after"]["wrong_keys"] for b in by.values()) == summary["out_of_fold"]["after"]["wrong_keys"]


def test_the_users_prior_is_the_share_the_server_counts_as_right():
    # the per-user adjustment counts a ghost right when it was taken or its next character typed (gate_user.RIGHT):
    # its prior is that share among the ghosts the gate shows, so a user like the benchmark's typist moves nothing
    from lsp_server.gate_user import CODES, RIGHT

    recs = made_up()
    for i, r in enumerate(recs):
        r["fate"] = "through" if not r["right_all"] and i % 2 else r["fate"]  # a wrong ghost whose next char was typed
    _, summary = trainer.train(recs, folds=4, max_saved_loss=0.2, l2=1.0)
    after = summary["out_of_fold"]["after"]
    assert {c for f, c in CODES.items() if f in ("taken", "through")} == set(RIGHT)
    assert summary["user_prior"] == after["kept_share"] > after["right_share"]


def typed(fates: list[tuple[str | None, int]], gap: float = 0.1) -> list[dict]:
    """One function's keystrokes in the order typed: (fate, characters saved) each, ``gap`` s apart."""
    return [{"split": "tuning", "server": "s", "typist": "steady", "round": 0, "seed": 0, "segment": "pkg:mod:f",
             "kind": "char", "at": i, "gap_s": gap, "fate": fate, "saved": saved, "right_all": fate != "over",
             "right_head": False, "head": 0, "same_text": True, "features": {"lead_logp": 0.0} if fate else None}
            for i, (fate, saved) in enumerate(fates)]


def test_a_chain_runs_from_a_suggestions_first_keystroke_to_the_take_and_a_gap_or_a_miss_ends_it():
    rows = typed([("through", 0), ("through", 0), ("taken", 5), ("over", 0), ("through", 0), (None, 0),
                  ("through", 0), ("taken", 3)])
    trainer.link_chains(rows)
    chains = [r.get("chain") for r in rows]
    assert chains[0] == chains[1] == chains[2] and len({chains[2], chains[3], chains[4], chains[6]}) == 4
    assert chains[5] is None and chains[6] == chains[7]
    assert [r.get("chain_saved") for r in rows] == [5, 5, 5, 0, 0, None, 3, 3]
    assert [r["t"] for r in rows[:3]] == pytest.approx([0.0, 0.1, 0.2]) and rows[0]["key_s"] == pytest.approx(0.1)
    assert trainer.LABELS["chain"](dict(rows[0], right_all=False)) and not trainer.LABELS["chain"](rows[3])


def test_hiding_a_ghost_of_a_taken_chain_delays_the_take_by_the_reaction_time():
    # the take at 0.2 s saved 5 characters; its chain was on screen from the first keystroke
    rows = typed([("through", 0), ("through", 0), ("taken", 5)])
    trainer.link_chains(rows)
    shown = np.array([1.0, 1.0, 1.0])

    def saved(p: np.ndarray, reaction: float = 0.3) -> tuple[int, int]:
        o = trainer.outcome(rows, p, np.zeros(3), 0.5, reaction)
        return o["saved_chars"], o["saved_upper"]

    assert saved(shown) == (5, 5)
    # the middle ghost hidden: shown again 0.1 s before the take, so the typist reads it 2 keystrokes later
    assert saved(np.array([1.0, 0.0, 1.0])) == (3, 5)
    assert saved(np.array([1.0, 0.0, 1.0]), reaction=0.05) == (5, 5)  # read in time
    assert saved(np.array([1.0, 1.0, 0.0])) == (0, 0)  # the taken ghost itself hidden


def test_a_model_file_is_judged_on_records_it_never_saw():
    recs = made_up(60)
    for i, r in enumerate(recs):
        r["features"] = {**r["features"], "lang_go": float(i % 2), "lang_rust": float(1 - i % 2)}
    model, _ = trainer.train(recs[:600], folds=4, max_saved_loss=0.2, l2=1.0)
    unseen = [dict(r, features={**r["features"], "new_feature": 1.0}) for r in recs[600:]]
    got = trainer.evaluate(json.loads(json.dumps(model)), unseen)  # as read back from its file
    assert got["threshold"] == model["threshold"] and got["records"] == len(unseen)
    assert got["after"]["wrong_keys"] < got["before"]["wrong_keys"]
    assert got["before"]["ghost_keys"] == len(unseen) >= got["after"]["ghost_keys"]
    assert sum(b["after"]["wrong_keys"] for b in got["by_language"].values()) == got["after"]["wrong_keys"]
    assert got["features_the_model_lacks"] == ["new_feature"]


def interaction(n_functions: int = 40, seed: int = 1) -> list[dict]:
    """Keystrokes whose ghost is right when the model was sure of it outside a comment or unsure inside one:
    no weight on either feature alone tells them apart."""
    rng = random.Random(seed)
    out = []
    for f in range(n_functions):
        for _ in range(30):
            sure, comment = rng.random() < 0.5, rng.random() < 0.5
            right = rng.random() < (0.9 if sure != comment else 0.1)
            out.append({"split": "train", "segment": f"pkg:mod:g{f}", "typist": "think", "same_text": True,
                        "features": {"lead_logp": rng.uniform(-0.05, 0) if sure else rng.uniform(-2.5, -0.5),
                                     "in_comment": float(comment), "noise": rng.random()},
                        "right_all": right, "right_head": False, "head": 0, "saved": 5 if right else 0,
                        "fate": "taken" if right else "over", "cost_ms": 0.3})
    return out


def test_trees_learn_what_a_regression_cannot_and_the_server_reads_them_as_the_trainer_does():
    recs = interaction()
    trees = {"rounds": 40, "depth": 2, "lr": 0.2}
    _, linear = trainer.train(recs, folds=4, max_saved_loss=0.15, l2=1.0, head=False)
    model, boosted = trainer.train(recs, folds=4, max_saved_loss=0.15, l2=1.0, head=False, trees=trees)
    assert boosted["out_of_fold"]["after"]["wrong_keys"] < 0.5 * linear["out_of_fold"]["after"]["wrong_keys"]
    assert boosted["trees"] == trees and len(model["heads"]["all"]["trees"]) == 40
    served = gate.GateModel.from_json(json.loads(json.dumps(model)))
    names = model["features"]
    m = trainer.fit(recs, names, 1.0, "right", False, 0.0, trees)
    expected, _ = trainer.probs(m, recs[:50], names)
    got = [gate.sigmoid(served.logits(r["features"])["all"]) for r in recs[:50]]
    assert got == pytest.approx(expected.tolist(), abs=1e-4)  # the file's rounding, nothing more


def test_the_estimate_keeps_the_servers_rule_and_a_bound_on_the_pauses_hidden():
    recs = made_up()
    for i, r in enumerate(recs):
        # every third a pause; a doubtful pause at a line's indentation is never hidden (gate.decide)
        r["gap_s"] = 1.0 if i % 3 == 0 else 0.12
        r["features"] = {**r["features"], "mid_line": float(i % 6 != 0)}
    o = trainer.outcome(recs, np.zeros(len(recs)), np.zeros(len(recs)), 0.5)
    assert o["ghost_keys"] == len(recs[::6]) and o["pause_keys"] == len(recs[::3])
    assert o["pauses_hidden"] == len(recs[::3]) - len(recs[::6])
    _, free = trainer.train(recs, folds=4, max_saved_loss=0.2, l2=1.0)
    _, bound = trainer.train(recs, folds=4, max_saved_loss=0.2, l2=1.0, max_pause_loss=0.02)
    after = bound["out_of_fold"]["after"]
    assert after["pauses_hidden"] <= 0.02 * after["pause_keys"]
    assert free["out_of_fold"]["after"]["pauses_hidden"] > after["pauses_hidden"]
    assert after["wrong_keys"] >= free["out_of_fold"]["after"]["wrong_keys"]


def test_a_pause_weight_teaches_the_gate_to_show_where_the_typist_pauses():
    recs = made_up()
    rng = random.Random(2)
    for r in recs:
        pause = rng.random() < 0.3
        r["gap_s"] = 1.0 if pause else 0.12
        # what was just typed says a pause may come (after an operator, as the think typist pauses)
        r["features"] = {**r["features"], "prev_op": float(pause)}
    _, plain = trainer.train(recs, folds=4, max_saved_loss=0.2, l2=1.0)
    _, weighted = trainer.train(recs, folds=4, max_saved_loss=0.2, l2=1.0, pause_weight=4.0)
    assert weighted["pause_weight"] == 4.0
    assert weighted["out_of_fold"]["after"]["pauses_hidden"] < plain["out_of_fold"]["after"]["pauses_hidden"]
    names = sorted(recs[0]["features"])
    doubtful_pause = [{"features": {"lead_logp": -2.0, "noise": 0.5, "in_comment": 0.0, "prev_op": 1.0}}]
    p_plain, _ = trainer.probs(trainer.fit(recs, names, 1.0, "right"), doubtful_pause, names)
    p_weighted, _ = trainer.probs(trainer.fit(recs, names, 1.0, "right", pause_weight=4.0), doubtful_pause, names)
    assert float(p_weighted[0]) > float(p_plain[0]) + 0.1
