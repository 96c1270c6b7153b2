"""Pick Variant's alternatives (issue 34): what counts as a different suggestion, the picker's note, items
deduplicated by substance, and the planner asking the local model for branches."""

from __future__ import annotations

from engine.text import rank
from engine.types import Completion
from lsp_server import items as picks
from lsp_server.completion.policy import knobs, planner
from lsp_server.items import build_items
from lsp_server.settings import Settings


def test_whitespace_comments_and_one_more_trailing_line_are_the_same_suggestion():
    a = "result = []\n    for x in xs:\n        result.append(x)"
    assert rank.same_substance(a, "result  =  []\n\n    for x in xs:\n        result.append(x)  ")
    assert rank.same_substance(a, "# collect\n    " + a)
    assert rank.same_substance(a, a + "\n    return result")  # one line further: the same choice
    assert not rank.same_substance(a, a + "\n    result.sort()\n    return result")  # two more lines
    assert not rank.same_substance(a, "return list(xs)")
    assert not rank.same_substance("return a + b", "return a - b")


def test_distinct_keeps_the_first_of_each_kind():
    texts = ["return a + b", "return a + b\n", "return sum((a, b))", "return  sum((a, b))", "return b + a"]
    assert rank.distinct(texts) == [0, 2, 4]
    assert rank.distinct([]) == []
    assert rank.distinct(["# compute it", "return a + b", "  "]) == [1]  # no code: no alternative
    assert rank.distinct(["# compute it", "# or this"]) == [0]  # neither has code: one suggestion


def test_the_note_says_whether_alternatives_are_coming_or_the_model_agrees():
    assert picks.note(1, 3, complete=False) == picks.PENDING
    assert picks.note(1, 3, complete=True) == picks.AGREE
    assert picks.note(2, 3, complete=True) == picks.AGREE
    assert picks.note(3, 3, complete=True) == "" == picks.note(3, 3, complete=False)
    assert picks.note(0, 3, complete=True) == ""  # nothing at all: the picker says so itself


def _items(texts: list[str], prefix: str, suffix: str = "\n"):
    text = prefix + suffix
    line, col = prefix.count("\n"), len(prefix) - (prefix.rfind("\n") + 1)
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    comps = [Completion(t, [1, 2], "eos", variant=i) for i, t in enumerate(texts)]
    return build_items(comps, "multi", prefix, suffix, text=text, offset=len(prefix), cursor=(line, col),
                       eol="\n", starts=starts, encoding="utf-16", max_lines=8, backend="local")


def test_items_the_same_in_substance_are_one_item():
    prefix = "def area(w, h):\n    "
    items = _items(["return w * h", "return  w * h", "# area\n    return w * h", "return h * w"], prefix)
    assert [it.text for it in items] == ["return w * h", "return h * w"]
    assert [it.index for it in items] == [0, 1]


def test_explicit_requests_on_the_local_model_ask_for_branches_remote_ones_sample():
    s = Settings(max_variants=3)
    local = planner.state_at(s, "file:///a.py", 1, 20, "def f(x):\n    ", "\n", invoked=True, remote_ready=False)
    assert local.params.n == 3 and local.params.variant_temperature == knobs.BRANCHES == 0.0
    auto = planner.state_at(s, "file:///a.py", 1, 20, "def f(x):\n    ", "\n", invoked=False, remote_ready=False)
    assert auto.params.n == 1 and auto.params.variant_temperature > 0  # one greedy row: untouched
    remote = Settings(max_variants=3, routing="remote", remote_url="http://127.0.0.1:9/v1")
    r = planner.state_at(remote, "file:///a.py", 1, 20, "def f(x):\n    ", "\n", invoked=True, remote_ready=True)
    assert r.route == "remote" and r.params.variant_temperature > 0  # a server samples: greedy ones agree
