"""lsp_server/stats.py: the counters, the work accounting and the merge into the machine's stats file."""

from __future__ import annotations

from lsp_server import stats
from lsp_server.stats import Shown, Stats, work_name


def test_work_names_by_tier():
    assert work_name("local", "now") == "now"
    assert work_name("local", "") == "other"
    assert work_name("remote", "future") == "remote-future"


def test_worked_accumulates_per_kind_and_merges_into_the_file(tmp_path):
    path = tmp_path / "stats.json"
    s = Stats(path)
    s.worked("local", "future", 12.4, 20.6)
    s.worked("local", "future", 10.0, 9.0)
    s.worked("remote", "now", 300.0, 1.0)
    s.flush()
    s.worked("local", "future", 1.0, 1.0)
    s.flush()  # a second flush adds its deltas to the file's totals
    t = stats.load(path)["totals"]
    assert (t["work.future.jobs"], t["work.future.wall_ms"], t["work.future.cpu_ms"]) == (3, 23, 31)
    assert (t["work.remote-now.jobs"], t["work.remote-now.wall_ms"]) == (1, 300)


def test_accepts_are_credited_to_the_work_that_made_the_suggestion(tmp_path):
    s = Stats(tmp_path / "stats.json")
    shown = Shown(s)
    shown.remember("a", "file:///x.py", ["return x", "pass"], work="future")
    shown.remember("b", "file:///x.py", ["y"])  # not the engine's (a disk answer): no kind
    assert shown.did_accept("a", 0, "utf-16")
    assert shown.did_partially_accept("a", 3)
    assert shown.did_accept("b", 0, "utf-16")
    assert s.counts["work.future.accepted"] == 1
    assert s.counts["work.future.accepted_units"] == len("return x") + 3
    assert s.counts["accepted"] == 2 and s.counts["accepted_units"] == len("return x") + 3 + 1
    assert not any(k.startswith("work.other") for k in s.counts)
