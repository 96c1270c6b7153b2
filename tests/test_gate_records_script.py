"""scripts/gate_records.py: which runs of the learned gate's records are still missing, and the replay command each
runs (no replay here: a run is minutes of the model; the records themselves are tested in test_gate_records.py)."""

from __future__ import annotations

import json

import pytest

from tests.scripts import load_script

gr = load_script("gate_records")


def test_the_plan_skips_what_landed_and_keeps_the_order(tmp_path):
    (tmp_path / gr.records_name("train", "go", "think", 0)).write_text("{}\n")
    (tmp_path / ".records-train-rust-think-s0.jsonl.partial").write_text("{}\n")  # a run cut short: not done
    todo = gr.plan(tmp_path, ["train", "tuning"], ["go", "rust"], ["think"], [0, 1])
    assert todo == [("train", "go", "think", 1), ("train", "rust", "think", 0), ("train", "rust", "think", 1),
                    ("tuning", "go", "think", 0), ("tuning", "go", "think", 1), ("tuning", "rust", "think", 0),
                    ("tuning", "rust", "think", 1)]


@pytest.mark.parametrize("split", ["validation", "test", "both"])
def test_held_out_code_never_trains_the_gate(tmp_path, split):
    with pytest.raises(SystemExit, match=split):
        gr.plan(tmp_path, ["train", split], ["python"], ["think"], [0])


def test_each_run_is_one_server_with_the_gate_off_writing_its_records(tmp_path):
    cmd = gr.command("train", "rust", "steady", 2, tmp_path / "tree", tmp_path / "r.jsonl", tmp_path / "w")
    opt = dict(zip(cmd, cmd[1:], strict=False))
    assert opt["--split"] == "train" and opt["--language"] == "rust" and opt["--typists"] == "steady"
    assert opt["--seed"] == "2" and opt["--rounds"] == "1" and opt["--records"] == str(tmp_path / "r.jsonl")
    assert cmd.count("--server") == 1 and opt["--server"] == f"main={tmp_path / 'tree'}"
    name, _, options = opt["--options"].partition("=")
    assert name == "main" and json.loads(options) == {"learnedGate": False}


def test_a_dry_run_lists_the_missing_runs_and_runs_nothing(tmp_path, capsys):
    (tmp_path / gr.records_name("train", "python", "think", 0)).write_text("{}\n")
    assert gr.main(["--out", str(tmp_path), "--languages", "python,go", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == ["missing: records-train-go-think-s0.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records-train-python-think-s0.jsonl"]
