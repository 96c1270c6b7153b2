"""scripts/bench_next_edit_signatures.py's scoring: where an offer lies (a call that changed, one that did
not, a call the truth cannot judge, the edited def's own body, elsewhere) and the call-site precision that
counts the def's own body apart."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_next_edit_signatures as bench  # noqa: E402

EDITED = ("def scale(points, factor):\n"
          "    return [p * factor for p in points]\n"
          "\n"
          "\n"
          "def use(xs):\n"
          "    a = scale(xs, factor=2)\n"
          "    b = scale(xs, factor=3)\n"
          "    return a, b\n")


def case() -> bench.Case:
    c = bench.Case("p 1->2", "tuning", "m.py", "scale", "renamed", EDITED.replace("factor", "k"), EDITED)
    tree = ast.parse(EDITED)
    (olds,) = bench.calls_of(tree, EDITED, "scale").values()
    spans = [(bench._offset(EDITED, o.lineno, o.col_offset), bench._offset(EDITED, o.end_lineno, o.end_col_offset))
             for o in olds]
    c.calls = spans
    c.truth = [bench.Truth(*spans[0], True, "scale(xs, k=2)")]  # the second call: no truth (left out)
    fn = bench.functions(tree)["scale"]
    c.body = (bench._offset(EDITED, fn.lineno, fn.col_offset), bench._offset(EDITED, fn.end_lineno, fn.end_col_offset))
    return c


def where(c: bench.Case, off: int) -> str:
    i = next((i for i, t in enumerate(c.truth) if t.start <= off <= t.end), None)
    return bench._where(c, off, i)


def test_offers_are_placed_by_call_truth_and_body():
    c = case()
    assert where(c, EDITED.index("factor=2")) == "changed"
    assert where(c, EDITED.index("factor=3")) == "call without truth"
    assert where(c, EDITED.index("* factor")) == "its own body"  # the renamed parameter's use
    assert where(c, EDITED.index("return a, b")) == "elsewhere"
    c.truth[0].changed = False
    assert where(c, EDITED.index("factor=2")) == "unchanged"


def test_call_site_precision_leaves_the_defs_own_body_out():
    rows = [{"offered": 4, "offered_right": 1, "found": 1, "truth_changed": 1, "first_answer_ms": 1.0, "steps": [],
             "offers_at": {"changed": 1, "unchanged": 0, "call without truth": 0, "elsewhere": 1, "its own body": 2}}]
    m = bench.summary(rows)
    assert m["call_site_precision"] == 0.5 and m["location_precision"] == 0.25
