"""The replay benchmark's pure helpers (no model, no server): regions, timing, pause and CPU accounting."""

from __future__ import annotations

import importlib.util
import math
import random
import statistics
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "bench_replay.py"
_spec = importlib.util.spec_from_file_location("bench_replay", _PATH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_replay"] = bench  # dataclasses look their module up by name
_spec.loader.exec_module(bench)

SOURCE = '''import x


def documented(a, b):
    """Add.

    Two lines of docstring.
    """
    c = a + b
    return c


def plain(n):
    if n:
        return 1
    return 0
'''


def test_body_region_starts_after_the_docstring_and_ends_before_the_last_line_break():
    start, end = bench.body_region(SOURCE, "documented")
    assert SOURCE[start:end] == "    c = a + b\n    return c"
    assert SOURCE[end] == "\n"


def test_body_region_without_docstring_and_unknown_function():
    start, end = bench.body_region(SOURCE, "plain")
    assert SOURCE[start:end] == "    if n:\n        return 1\n    return 0"
    with pytest.raises(ValueError, match="missing"):
        bench.body_region(SOURCE, "missing")


@pytest.mark.parametrize("func, typed, after", [
    # the first line's indentation is in the document already (the editor's auto-indent), as every later one's
    ("documented", "c = a + b", "\n    return c"),
    # cut after `if n:`, the line below the typed text would be the deeper `return 1`: the region goes on
    ("plain", "if n:\n        return 1", "\n    return 0"),
])
def test_function_segment_cuts_at_whole_lines_of_the_bodys_level_and_keeps_the_document(tmp_path, func, typed,
                                                                                        after):
    f = tmp_path / "m.py"
    f.write_text(SOURCE)
    seg = bench.function_segment(f, func, "m.py", max_chars=5)
    assert seg.typed == typed and seg.before.endswith("\n    ")
    assert seg.before + seg.typed + seg.after == SOURCE
    assert seg.after.startswith(after)
    assert seg.file_lines == SOURCE.count("\n") + 1


def test_proc_cpu_seconds_counts_fields_after_a_command_name_with_spaces():
    # pid (comm) state ppid ... utime (14) stime (15): comm may hold spaces and parentheses
    stat = "4242 (python (x) y) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 3 0 100 0 0"
    assert bench.proc_cpu_seconds(stat, 100) == pytest.approx(4.0)


def test_typist_timing_depends_only_on_the_editor_state():
    t = bench.TYPISTS["think"]
    a = t.interval(bench.state_rng(0, 1, 17), "x")
    b = t.interval(bench.state_rng(0, 1, 17), "x")
    assert a == b
    assert a != t.interval(bench.state_rng(0, 1, 18), "x")
    # Enter always pauses for this typist; a steady typist never pauses
    assert t.interval(random.Random(3), "\n    ") >= t.enter_pause_s
    steady = bench.TYPISTS["steady"]
    assert all(steady.interval(random.Random(i), " ") <= steady.key_s * (1 + steady.jitter) for i in range(200))


def _key(gap, outcome="suggestion", latency=10.0, finished=False):
    return bench.Key("s", "char", "x", 0.0, latency_ms=latency if outcome == "suggestion" else None,
                     outcome=outcome, gap_s=gap, finished=finished)


def test_pause_shown_counts_long_gaps_and_the_last_keystroke():
    keys = [_key(0.1), _key(0.6, latency=40), _key(0.9, latency=400), _key(0.7, "empty"), _key(None, latency=20)]
    assert bench.pause_shown(keys) == (4, 2)


def test_the_keystroke_that_types_a_region_to_its_end_is_no_pause():
    # the user typed the region to its end: what follows is in the file, an empty answer is right
    keys = [_key(0.6, latency=40), _key(None, "empty", finished=True)]
    assert bench.pause_shown(keys) == (1, 1)
    assert bench.pause_shown(keys, finished=True) == (2, 1)


def test_idle_settle_finds_when_the_server_stays_idle():
    assert bench.idle_settle_s([1.0, 0.9, 0.01, 0.0], step_s=0.5) == 1.0
    assert bench.idle_settle_s([0.0, 0.5, 0.0, 0.0], step_s=0.5) == 1.0
    assert bench.idle_settle_s([0.0, 0.0], step_s=0.5) == 0.0
    assert bench.idle_settle_s([0.0, 0.8], step_s=0.5) is None


def test_auto_indent_counts_the_indentation_after_each_line_break_only():
    assert bench.auto_indent("x = 1") == 0
    assert bench.auto_indent("    x = 1") == 0  # the first line's indentation is typed where the cursor is
    assert bench.auto_indent("a + b\n    return total\n\n\tpass") == 4 + 0 + 1


def _reference():
    sys.path.insert(0, str(_PATH.parent))  # replay_reference imports bench_replay by name (registered above)
    try:
        import replay_reference
    finally:
        sys.path.remove(str(_PATH.parent))
    return replay_reference


def test_reference_typist_takes_right_ghosts_types_through_and_asks_again_when_contradicted():
    ref = _reference()
    typed = "x = f(a)\n    return x"
    asked: list[int] = []
    ghosts = {0: "x = g", 5: "(a)", 8: "", 13: "return x"}

    def complete(n: int) -> str:
        asked.append(n)
        return ghosts.get(n, "")

    r = ref.simulate(typed, complete)
    # "x = g" is typed through to "x = " and contradicted at "f"; "(a)" is taken (2 saved); at the line end
    # the model has nothing, Enter writes the indentation, then "return x" is taken (7 saved)
    assert asked == [0, 5, 8, 13]
    assert (r.tabs, r.chars_saved, r.keys_saved, r.calls) == (2, 2 + 7, 2 + 7, 4)
    assert (r.target_chars, r.target_keys) == (len(typed), len(typed) - 4)


def test_reference_window_starts_at_a_line_start_and_stays_put():
    ref = _reference()
    before = "aaaa\nbbbb\ncccc\n"
    assert ref.window_start(before, 100) == 0
    assert ref.window_start(before, 8) == before.index("cccc")  # 8 back lands inside "bbbb": on to the next line


def test_reference_typist_waits_its_reaction_time_before_tab_typing_through_meanwhile():
    ref = _reference()
    typed = "x = f(a)"
    r = ref.simulate(typed, lambda n: typed[n:] if n == 0 else "", interval=lambda n, text: 0.125, reaction_s=0.3)
    # shown with the first keystroke's state; "x", " ", "=" are typed in 0.375 s, then Tab takes " f(a)"
    assert (r.tabs, r.chars_saved, r.calls) == (1, len(" f(a)") - 1, 1)
    patient = ref.simulate(typed, lambda n: typed[n:])
    assert (patient.tabs, patient.chars_saved) == (1, len(typed) - 1)


# ---------------------------------------------------------------------------------------------- the corpus

def _corpus():
    sys.path.insert(0, str(_PATH.parent))
    try:
        import replay_corpus
    finally:
        sys.path.remove(str(_PATH.parent))
    return replay_corpus


CLASSY = '''class Box:
    def put(self, x):
        """Docstring."""
        self.items.append(x)
        self.count += 1
        return self

    @property
    def size(self):
        return len(self.items)

    @size.setter
    def size(self, n):
        self.items = self.items[:n]
        self.count = n
        return None


def outer(a):
    def inner(b):
        return b
    x = inner(a)
    return x


def flat(a, b):
    total = a + b
    total *= 2
    return total
'''


def test_body_region_finds_a_method_by_its_qualified_name():
    corpus = _corpus()
    start, end = corpus.body_region(CLASSY, "Box.put")
    assert CLASSY[start:end] == "        self.items.append(x)\n        self.count += 1\n        return self"
    with pytest.raises(ValueError, match="no top-level class"):
        corpus.body_region(CLASSY, "Crate.put")


def test_candidates_skip_nested_defs_setters_and_bodies_outside_the_bounds():
    corpus = _corpus()
    got = dict(corpus.candidates(CLASSY, lines=(3, 12), chars=(20, 400)))
    # outer defines a function; size is defined twice (getter and setter); one-line bodies are too short
    assert set(got) == {"Box.put", "flat"}
    assert got["flat"] == len("    total = a + b\n    total *= 2\n    return total")
    assert corpus.candidates(CLASSY, lines=(3, 12), chars=(20, 40)) == []


def test_split_alternates_within_each_package_so_both_halves_span_every_package():
    corpus = _corpus()
    specs = [corpus.Spec(p, "1", f"{p}/m.py", f"f{i}", chars=10) for p in ("a", "b", "c") for i in range(4)]
    out = corpus.split_of(list(reversed(specs)))
    for half in ("tuning", "validation"):
        got = [s for s in out if s.split == half]
        assert sorted({s.package for s in got}) == ["a", "b", "c"]
        assert len(got) == 6
    # the order within a package decides, not the order given
    assert [s.split for s in out if s.package == "a"] == ["tuning", "validation", "tuning", "validation"]
    assert [s.qualname for s in out if s.package == "a"] == ["f0", "f1", "f2", "f3"]


def test_pick_is_round_robin_over_packages_and_only_selects_by_name():
    corpus = _corpus()
    specs = corpus.split_of([corpus.Spec(p, "1", f"{p}/m.py", f"C.f{i}", chars=10)
                             for p in ("a", "b") for i in range(4)])
    assert [s.package for s in corpus.pick(specs, "validation", 3)] == ["a", "b", "a"]
    assert [s.qualname for s in corpus.pick(specs, "tuning", only=("f2",))] == ["C.f2", "C.f2"]
    assert corpus.pick(specs, "validation", only=("f2",)) == []


def test_the_chosen_corpus_is_pinned_and_large_enough():
    corpus = _corpus()
    assert len(corpus.PACKAGES) >= 8
    assert all("==" not in p and v for p, v in corpus.PACKAGES)
    assert len(corpus.PACKAGES) * corpus.PER_PACKAGE >= 60 and corpus.PER_PACKAGE % 2 == 0
    banned = {"more-itertools", "toolz", "boltons", "pygls", "lsprotocol", "click", "marshmallow", "tomlkit",
              "httpx", "humanize"}
    assert not banned & {p for p, _ in corpus.PACKAGES}


# ------------------------------------------------------------------------------------- reading a ghost in time

def test_readable_prefix_counts_each_part_of_a_ghost_from_when_it_appeared():
    history = [(0.0, "ab"), (0.2, "abcd")]
    assert bench.readable_prefix(history, 0.1, 0.3) == ""
    assert bench.readable_prefix(history, 0.35, 0.3) == "ab"  # the grown part has been there 0.15 s
    assert bench.readable_prefix(history, 0.5, 0.3) == "abcd"


def test_readable_prefix_restarts_the_clock_of_a_part_that_went_away_and_came_back():
    history = [(0.0, "abcdef"), (0.1, "abc"), (0.2, "abcdxy")]
    assert bench.readable_prefix(history, 0.45, 0.3) == "abc"  # "d" was gone between 0.1 and 0.2
    assert bench.readable_prefix(history, 0.5, 0.3) == "abcdxy"
    assert bench.readable_prefix([], 9.0, 0.3) == ""


def test_a_grown_ghost_is_taken_only_once_its_new_part_is_readable():
    ghost, new = bench.shown(None, "x = f(", 0.0, 3)
    assert new
    ghost, new = bench.shown(ghost, "x = f(a)", 0.25, 3)  # a later answer extends it
    assert not new and ghost.since == 0.0
    rest = "x = f(a)\n"
    assert bench.take(ghost, 0.4, 0.3, rest) is None  # old clock would allow it; "a)" is 0.15 s old
    assert bench.take(ghost, 0.55, 0.3, rest) == ("tab", "x = f(a)")
    # another suggestion for the same version replaces it, on a clock of its own
    other, new = bench.shown(ghost, "y = 2", 0.6, 3)
    assert new and other.history == [(0.6, "y = 2")]


def test_typing_through_a_ghost_keeps_when_its_rest_appeared():
    ghost, _ = bench.shown(None, "ab", 0.0, 1)
    ghost, _ = bench.shown(ghost, "abcd", 0.2, 1)
    left = bench.typed_through(ghost, "a", 2)
    assert left.version == 2 and left.history == [(0.0, "b"), (0.2, "bcd")]
    assert bench.readable_prefix(left.history, 0.35, 0.3) == "b"
    assert bench.typed_through(bench.shown(None, "a", 0.0, 1)[0], "a", 2) is None


def test_an_empty_answer_takes_the_typed_through_ghost_away_as_the_editors_do():
    ghost = bench.typed_through(bench.shown(None, "abc", 0.0, 1)[0], "a", 2)
    assert ghost is not None and ghost.text == "bc"
    assert bench.answered_empty(ghost, 2) is None  # the answer for the text the ghost stands on held nothing
    assert bench.answered_empty(ghost, 1) is ghost  # an older version's answer leaves the newer ghost
    assert bench.answered_empty(None, 2) is None


# ------------------------------------------------------------------------------------------------ statistics

def test_pct_50_is_the_ordinary_median():
    assert bench.pct([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert bench.pct([3.0, 1.0, 2.0], 50) == 2.0
    rng = random.Random(5)
    for n in range(1, 30):
        vals = [rng.uniform(0, 100) for _ in range(n)]
        assert bench.pct(vals, 50) == pytest.approx(statistics.median(vals))
    assert bench.pct([], 50) is None


def test_pct_interpolates_between_ranks_and_keeps_infinity():
    assert bench.pct([0.0, 10.0], 95) == pytest.approx(9.5)
    assert bench.pct(list(range(101)), 99) == pytest.approx(99.0)
    assert bench.pct([1.0, math.inf, math.inf], 50) == math.inf
    assert bench.pct([1.0, math.inf], 50) == math.inf


def _stats():
    sys.path.insert(0, str(_PATH.parent))
    try:
        import replay_stats
    finally:
        sys.path.remove(str(_PATH.parent))
    return replay_stats


def test_spread_short_ghosts_and_wrong_ghost_keys():
    st = _stats()
    assert st.spread([0.3, None, 0.1, 0.2]) == {"min": 0.1, "max": 0.3}
    assert st.spread([0.3]) is None
    assert st.short_ghosts([1, 3, 4, 12]) == (4, 2)
    keys = [bench.Key("s", "char", "x", 0.0, ghost="y", ghost_right=False),
            bench.Key("s", "char", "x", 0.0, ghost="x", ghost_right=True),
            bench.Key("s", "char", "x", 0.0)]
    assert st.wrong_ghost_keys(keys) == 1


def _run(split, saved, rnd=0, cpu=3.0):
    seg = "pkg==1/pkg/m.py:f"
    keys = [bench.Key(seg, "char", "a", 0.0, latency_ms=10.0, outcome="suggestion", at=1),
            bench.Key(seg, "tab", "bcdefgh"[:saved + 1], 0.0, latency_ms=30.0, outcome="suggestion",
                      saved=saved, at=2 + saved)]
    stats = bench.SegmentStats(seg, 2500, typed_chars=20, typing_s=30.0, typing_cpu_s=cpu,
                               idle_cores=[0.5, 0.5, 0.0, 0.0])
    return bench.Run("cur/steady", "cur", "steady", "on", rnd, keys=keys, segments=[stats], target_chars=20,
                     target_keys=20, split=split, ghost_chars=[2, 8])


def test_summarize_reports_rounds_costs_and_the_median_plainly():
    st = _stats()
    s = st.summarize([_run("validation", 4), _run("validation", 2, rnd=1, cpu=5.0)])
    assert s["split"] == "validation"
    assert s["latency_ms"]["p50"] == 20.0  # 10, 10, 30, 30: the mean of the two middle values
    # saved / (saved + typed): each round typed one character and accepted 4, then 2
    assert s["chars_saved_share_per_round"] == [0.8, 0.667]
    assert s["chars_saved_per_round"] == [4, 2] and s["wrong_ghost_keys_per_round"] == [0, 0]
    assert s["chars_saved_share"] == round(6 / 8, 3)
    assert s["over_seeds"]["chars_saved_share"]["n"] == 2
    assert s["over_seeds"]["chars_saved_share"]["mean"] == pytest.approx((0.8 + 0.667) / 2)
    # the one keystroke in each round with a ghost is not under a wrong one (no ghost_right False)
    assert s["over_seeds"]["wrong_ghost_share"]["mean"] == 0.0
    row = st.seed_row(s)
    assert row["characters saved"] == f"{100 * (0.8 + 0.667) / 2:.1f}% ± {100 * 0.0937 :.1f}"
    assert row["cpu per minute"] == "8.0 ± 2.8" and row["pauses"] == "100.0% ± 0.0"
    assert s["short_ghosts"] == {"shown": 4, "at_most_chars": 3, "count": 2, "share": 0.5}
    # 3 + 5 s while typing, and 0.5 cores for two 0.25 s steps after each round, over 5 + 3 accepted characters
    assert s["cpu_ms_per_accepted_char"] == pytest.approx(1000 * 8.5 / 8, abs=0.1)
    assert s["cpu_s_per_typing_min_per_round"] == [6.0, 10.0]
    assert s["packages"]["pkg"]["target_chars"] == 40


def test_report_puts_the_validation_half_first_and_beside_tuning():
    st = _stats()
    groups = st.group([_run("tuning", 2), _run("validation", 4)])
    summaries = [st.summarize(rs) for rs in groups.values()]
    meta = {"command": "x", "date": "d", "cpu": "c", "machine": "m", "load_average": "0", "model": "q",
            "threads": 2, "rounds": 1, "order": [], "servers": {"cur": {"tree": "/t", "commit": "abc"}},
            "typists": {"steady": "8 characters/s"}, "segments": {"validation": ["a"], "tuning": ["b"]},
            "corpus": {}, "packages": ["pkg==1"], "corpus_note": "n"}
    md = bench.report(summaries, meta, [])
    assert md.index("## Headline: validation beside tuning") < md.index("## Validation half") < md.index("## Tuning")
    head = md[md.index("## Headline"):md.index("## Validation half")]
    assert "`cur/steady` **validation** | `cur/steady` tuning" in head
    assert "| characters saved | 80% | 67% |" in head  # 4 of 4 + 1, 2 of 2 + 1
    assert "not held out" in head and "no tuning decision has looked at" not in md
    assert "## Glossary" in md and "saved ÷ (saved + typed)" in md
    assert "keystrokes under a wrong ghost" in md and "suggestions of ≤ 3 characters" in md


PY_SOURCE = '''class Box:
    def grow(self, n):
        if n <= 0:
            raise ValueError(f"cannot grow by {n}")
        self.size += n
        self.history.append(("grow", n, self.size))
        return self.size


def tiny():
    return 1
'''


GO_SOURCE = '''package p

func Sum(xs []int) int {
	total := 0
	for _, x := range xs {
		if x < 0 {
			continue
		}
		total += x
	}
	return total
}
'''


def test_source_types_a_directorys_functions_of_the_splits_size_and_refuses_an_empty_one(tmp_path):
    (tmp_path / "a.py").write_text(PY_SOURCE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "sum.go").write_text(GO_SOURCE)
    (tmp_path / "a_test.py").write_text(SOURCE)  # a test module is not typed, as in the splits
    specs, packages, _ = bench.source_corpus("python", tmp_path)
    assert [(s.module, s.qualname, s.split) for s in specs] == [("a.py", "Box.grow", "source")]
    seg, = bench.source_segments("python", specs, tmp_path)
    assert seg.typed.startswith("if n <= 0:") and seg.before.endswith("\n        ")  # (auto-indent)
    assert "self.size += n" in seg.typed and seg.split == "source"
    assert packages == [f"dir:{tmp_path}"]
    go, = bench.source_segments("go", bench.source_corpus("go", tmp_path)[0], tmp_path)
    assert "total += x" in go.typed and go.before.endswith("{\n\t")
    with pytest.raises(SystemExit, match="no rust function"):
        bench.source_corpus("rust", tmp_path)


def test_pause_misses_say_what_each_missed_pause_got_and_after_which_key():
    def key(kind, text, gap, outcome="suggestion", latency=10.0, source="model"):
        return bench.Key("s", kind, text, 0.0, latency_ms=latency if outcome == "suggestion" else None,
                         source=source if outcome == "suggestion" else None, outcome=outcome, gap_s=gap)

    keys = [key("enter", "\n    ", 1.0, "empty"), key("enter", "\n", 1.0, "empty"),
            key("enter", "\n    ", 1.0, latency=220.0),
            key("char", " ", 0.8, latency=170.0, source="type-through"),
            key("char", "x", 0.8, "superseded"), key("tab", "abc", 0.9, "empty"),
            key("char", "y", 0.8, latency=40.0),  # shown in time: no miss
            key("char", "z", 0.1, "empty")]  # no pause
    assert bench.pause_misses(keys) == {"empty after Enter": 2, "empty after a taken suggestion": 1,
                                        "late model after Enter": 1, "late type-through after a space": 1,
                                        "superseded after a character": 1}
    n, shown = bench.pause_shown(keys)
    assert n - shown == sum(bench.pause_misses(keys).values())
