"""Pick Variant's alternatives: when two suggestions are the same in substance, and what the picker is
told about a list that holds fewer items than it asked for.

Two suggestions are the same in substance when they differ only in whitespace, in comment-only or blank
lines, or by one more line at the end (a variant that wrote the same code and then one line further is not
an alternative a user would choose between). The server keeps the first of each kind (items.build_items,
for explicit requests) and the benchmark (scripts/bench_picks.py) counts distinct items the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SPACE = re.compile(r"\s+")
_COMMENT = ("#", "//")

# what the picker hears (the flint/variants result's ``note``) about a list with fewer items than asked
AGREE = "the model's variants agree: no other suggestion here"
PENDING = "item 1 ready; alternatives on their way"


def substance(text: str) -> tuple[str, ...]:
    """A suggestion's code lines, whitespace collapsed, blank and comment-only lines left out."""
    lines = (_SPACE.sub(" ", ln).strip() for ln in text.split("\n"))
    return tuple(ln for ln in lines if ln and not ln.startswith(_COMMENT))


def same_substance(a: str, b: str) -> bool:
    sa, sb = substance(a), substance(b)
    if sa == sb:
        return True
    short, long_ = (sa, sb) if len(sa) <= len(sb) else (sb, sa)
    return bool(short) and len(long_) == len(short) + 1 and long_[: len(short)] == short


def distinct(texts: Sequence[str]) -> list[int]:
    """The indices of the texts that differ in substance from every earlier one kept (the first of each);
    one without code (a comment, blank lines) is no alternative to one with code."""
    coded = [bool(substance(t)) for t in texts]
    kept: list[int] = []
    for i, t in enumerate(texts):
        if any(coded) and not coded[i]:
            continue
        if not any(same_substance(t, texts[k]) for k in kept):
            kept.append(i)
    return kept


def note(items: int, asked: int, complete: bool) -> str:
    """What the picker shows about a list of ``items`` out of ``asked``: alternatives still coming, or the
    model agrees with itself (its variants were the same in substance); empty when the list is full."""
    if items == 0 or items >= asked:
        return ""
    return AGREE if complete else PENDING
