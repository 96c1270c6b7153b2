"""scripts/bench_next_edit.py's ground truth: same-scope occurrences from ast, token-level changes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_next_edit as bench  # noqa: E402

SRC = '''def outer(value, n):
    total = value

    def inner(value):
        return value + total

    def reads():
        return value

    squares = [value for value in range(n)]
    return inner(total) + reads() + len(squares)


class C:
    def __init__(self, size):
        self.size = size

    def grow(self):
        self.size += outer(1, 2)
'''


def _targets():
    return {(t.kind, t.scope, t.name): t for t in bench.rename_targets("p", "m.py", SRC)}


def test_syntactic_truth_respects_scopes():
    ts = _targets()
    value = ts[("param", "outer", "value")]
    # outer's parameter, `total = value`, reads()'s use; not inner's own parameter, not the comprehension's
    assert {SRC.count("\n", 0, o) + 1 for o in value.truth} == {1, 2, 8}
    total = ts[("local", "outer", "total")]
    assert {SRC.count("\n", 0, o) + 1 for o in total.truth} == {2, 5, 11}
    fn = ts[("function", "<module>", "outer")]
    assert len(fn.truth) == 2 and SRC[fn.definition:fn.definition + 5] == "outer"
    attr = ts[("attribute", "C", "size")]
    assert len(attr.truth) == 2 and all(SRC[o:o + 4] == "size" for o in attr.truth)
    for t in ts.values():
        assert SRC[t.site:t.site + len(t.name)] == t.name


def test_token_changes_and_trim():
    a = "x = foo(a, b)\n"
    b = "x = bar(a, b, c)\n"
    ch = bench.token_changes(a, b)
    assert [(a[s:e], n) for s, e, n in ch] == [("foo", "bar"), ("", ", c")]
    assert bench._trimmed(3, "foo", "fob") == (5, 6, "b")


def test_percentiles():
    xs = [float(i) for i in range(1, 101)]
    s = bench.lat_summary(xs)
    # benchstats' ordinary median and linear percentiles (issue 47; the nearest rank gave 50.0 and 95.0)
    assert s["p50_ms"] == 50.5 == s["median_ms"]
    assert s["p95_ms"] == round(1 + 0.95 * 99, 1)
