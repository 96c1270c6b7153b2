"""scripts/replay_work.py: the replay's work accounting read from a server's stats file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from replay_work import pooled, read_totals, work_between, work_lines  # noqa: E402


def test_the_growth_per_kind_between_two_readings(tmp_path):
    assert read_totals(tmp_path) == {}  # no server wrote yet
    (tmp_path / "stats.json").write_text(json.dumps({"totals": {
        "work.now.jobs": 5, "work.now.cpu_ms": 900, "work.future.jobs": 2, "accepted": 3, "work.x": 1}}))
    before = {"work.now.jobs": 1, "work.now.cpu_ms": 100}
    w = work_between(before, read_totals(tmp_path))
    assert set(w) == {"now", "future"}
    assert (w["now"]["jobs"], w["now"]["cpu_ms"], w["future"]["jobs"], w["future"]["served"]) == (4, 800, 2, 0)


def test_pooled_runs_and_the_report_table():
    a = {"now": {"jobs": 2, "cpu_ms": 3000, "served": 1, "accepted_units": 30}}
    b = {"now": {"jobs": 2, "cpu_ms": 1000, "served": 1, "accepted_units": 10},
         "future": {"jobs": 4, "cpu_ms": 4000, "served": 0, "accepted_units": 0}}
    p = pooled([a, b])
    assert p["now"]["jobs"] == 4 and p["now"]["cpu_ms"] == 4000 and p["future"]["served"] == 0
    text = "\n".join(work_lines([{"config": "main/think", "split": "validation", "work": p}]))
    assert "| now | 4 | 4.0 | 50% | 2 (50%) | 40 | 100 |" in text
    assert "| future | 4 | 4.0 | 50% | 0 (0%) | 0 | – |" in text
    assert work_lines([{"config": "x", "work": {}}]) == []
    assert "| work | ended |" not in text  # servers before the ending was counted: no such table


def test_how_jobs_ended_read_pooled_and_reported(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps({"totals": {
        "work.now.jobs": 3, "work.now.cpu_ms": 4000, "work.now.prefilled": 250, "work.now.generated": 30,
        "work.now.ended.complete.jobs": 2, "work.now.ended.complete.cpu_ms": 3000,
        "work.now.ended.stale.jobs": 1, "work.now.ended.stale.cpu_ms": 1000, "work.now.ended.x": 5}}))
    w = work_between({"work.now.ended.stale.jobs": 1, "work.now.ended.stale.cpu_ms": 1000}, read_totals(tmp_path))
    assert w["now"]["ended"] == {"complete": {"jobs": 2, "cpu_ms": 3000}}  # stale did not grow
    p = pooled([w, {"now": {"jobs": 1, "cpu_ms": 1000, "ended": {"stale": {"jobs": 1, "cpu_ms": 1000}}}}])
    assert p["now"]["ended"] == {"complete": {"jobs": 2, "cpu_ms": 3000}, "stale": {"jobs": 1, "cpu_ms": 1000}}
    assert p["now"]["prefilled"] == 250 and p["now"]["cpu_ms"] == 5000
    text = "\n".join(work_lines([{"config": "main/think", "split": "tuning", "work": p}]))
    assert "| now | complete | 2 | 3.0 | 60% |" in text and "| now | stale | 1 | 1.0 | 20% |" in text
    assert "now: 250 prompt tokens run, 30 generated" in text
