"""Item building: post-processed, deduplicated, and ordered by what each variant is worth to insert."""

from engine.types import Completion
from lsp_server.items import build_items


def _items(texts: list[str], prefix: str, suffix: str = "\n"):
    text = prefix + suffix
    offset = len(prefix)
    line = prefix.count("\n")
    col = len(prefix) - (prefix.rfind("\n") + 1)
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    comps = [Completion(t, [1, 2], "eos", variant=i) for i, t in enumerate(texts)]
    return build_items(comps, "multi", prefix, suffix, text=text, offset=offset, cursor=(line, col), eol="\n",
                       starts=starts, encoding="utf-16", max_lines=8, backend="local")


def test_code_comes_before_a_comment_or_a_placeholder_the_model_ranked_higher():
    prefix = "def area(w, h):\n    "
    items = _items(["# Your code here\n    pass", "# compute the area", "return w * h"], prefix)
    assert items[0].text == "return w * h"
    assert [it.index for it in items] == list(range(len(items)))


def test_model_order_is_kept_among_code_variants():
    prefix = "def area(w, h):\n    "
    items = _items(["return w * h", "return h * w"], prefix)
    assert [it.text for it in items] == ["return w * h", "return h * w"]
