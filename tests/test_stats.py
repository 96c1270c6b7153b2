"""lsp_server/stats.py: the counters, the work accounting and the merge into the machine's stats file."""

from __future__ import annotations

from lsp_server import stats
from lsp_server.completion.events import Worked
from lsp_server.stats import Shown, Stats, work_name


def test_work_names_by_tier():
    assert work_name("local", "now") == "now"
    assert work_name("local", "") == "other"
    assert work_name("remote", "future") == "remote-future"


def test_worked_accumulates_per_kind_and_merges_into_the_file(tmp_path):
    path = tmp_path / "stats.json"
    s = Stats(path)
    s.worked(Worked("local", "future", 12.4, 20.6, "complete", 3, 10))
    s.worked(Worked("local", "future", 10.0, 9.0, "client cancelled", 40, 0))
    s.worked(Worked("remote", "now", 300.0, 1.0))
    s.flush()
    s.worked(Worked("local", "future", 1.0, 1.0, "stale", 1, 2))
    s.flush()  # a second flush adds its deltas to the file's totals
    t = stats.load(path)["totals"]
    assert (t["work.future.jobs"], t["work.future.wall_ms"], t["work.future.cpu_ms"]) == (3, 23, 31)
    assert (t["work.future.prefilled"], t["work.future.generated"]) == (44, 12)
    assert (t["work.remote-now.jobs"], t["work.remote-now.wall_ms"]) == (1, 300)
    # how they ended: CPU spent on work stopped unused, one name per way (no spaces: a dotted key)
    assert (t["work.future.ended.complete.jobs"], t["work.future.ended.complete.cpu_ms"]) == (1, 21)
    assert (t["work.future.ended.client-cancelled.jobs"], t["work.future.ended.client-cancelled.cpu_ms"]) == (1, 9)
    assert (t["work.future.ended.stale.jobs"], t["work.future.ended.stale.cpu_ms"]) == (1, 1)


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


def test_flint_stats_says_what_share_of_the_engine_s_cpu_went_to_work_stopped_before_its_end(tmp_path):
    s = Stats(tmp_path / "stats.json")
    s.worked(Worked("local", "now", 500.0, 900.0, "complete"))
    s.worked(Worked("local", "now", 200.0, 300.0, "stale"))
    s.worked(Worked("local", "warm", 300.0, 600.0, "idle"))
    s.worked(Worked("local", "now", 100.0, 200.0, "diverged"))
    s.flush()
    text = stats.format_summary(stats.summary(stats.load(tmp_path / "stats.json")), tmp_path / "stats.json")
    assert "engine work  4 jobs, 2.0 s CPU; stopped before their end: 55% (idle 30%, stale 15%, diverged 10%)" in text
    assert stats.work_summary({"requests": 3}) == []  # no engine work counted yet: no line


def test_a_flush_leaves_no_temporary_file_and_drops_those_of_writers_killed_mid_write(tmp_path):
    import os
    import subprocess
    import sys

    path = tmp_path / "stats.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f"stats.{dead}.tmp").write_text("")  # a server killed between opening and renaming it
    (tmp_path / "stats.notes.tmp").write_text("not a writer's")
    s = Stats(path)
    s.worked(Worked("local", "now", 5.0, 5.0, "complete", 1, 1))
    s.flush()
    assert stats.load(path)["totals"]["work.now.jobs"] == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == ["stats.notes.tmp"]
    assert not (tmp_path / f"stats.{os.getpid()}.tmp").exists()
