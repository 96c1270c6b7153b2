"""A plan of next edits kept across the edits that apply it (issue 50).

A computation (a rename's references, a literal's repeats, a signature change's call sites) yields every
next edit of one text at once. The user then applies them one by one, through the client (Tab) or by
hand. Computing again after each of them would ask jedi again (0.5-0.8 s in a 1,000-line module) and
would have to trace the rename back through the edit history, which forgets (16 edits a document): so the
plan is kept, and each later text is matched against it. ``remaining`` says whether a text is the plan's
text with some of its edits applied and nothing else changed, and which edits are left, in that text.
Pure functions: no jedi, no editor types.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.edits.common import NextEdit

MAX_FILL = 400  # what the user writes at a jump target (an argument) is at most this long


def _same(a: str, a_pos: int, b: str, b_pos: int, n: int) -> bool:
    """``a[a_pos:a_pos + n] == b[b_pos:b_pos + n]`` (both in range)."""
    return a_pos + n <= len(a) and b_pos + n <= len(b) and b.startswith(a[a_pos:a_pos + n], b_pos)


def remaining(then: str, edits: Sequence[NextEdit], now: str) -> list[NextEdit] | None:
    """``unapplied``'s edits alone."""
    left = unapplied(then, edits, now)
    return None if left is None else [e for _, e in left]


def unapplied(then: str, edits: Sequence[NextEdit], now: str) -> list[tuple[int, NextEdit]] | None:
    """The edits of ``then`` not applied in ``now``, moved to their places in ``now``, when ``now`` is
    ``then`` with some of ``edits`` applied (any number, in any order) and nothing else changed; None
    otherwise (the user changed something else: the plan no longer describes the text). A jump target
    (an empty edit) is done once something is written at it (on its line, at most ``MAX_FILL``
    characters). The edits must not overlap. Ambiguous texts (an applied and an unapplied reading both
    fit) are None too. Each comes with its index in ``edits`` (what a later answer, e.g. a jump target's
    argument, is filed under)."""
    order = sorted(range(len(edits)), key=lambda i: edits[i].range_start)
    es = [edits[i] for i in order]
    deltas = {len(e.new_text) - len(e.old_text) for e in es}
    # the usual plan (one rename, one repeat): a length check first, as this runs on every keystroke
    if len(deltas) == 1 and not any(e.jump for e in es):
        (d,) = deltas
        diff = len(now) - len(then)
        if (d == 0 and diff != 0) or (d != 0 and (diff % d or not 0 <= diff // d <= len(es))):
            return None
    out: list[tuple[int, NextEdit]] = []
    p_then = p_now = 0
    for i, e in enumerate(es):
        if e.range_start < p_then:
            return None  # overlapping edits: no plan
        gap = e.range_start - p_then
        if not _same(then, p_then, now, p_now, gap):
            return None
        p_now += gap
        # the fixed text up to the next edit decides between "applied" and "not yet"
        nxt = es[i + 1].range_start if i + 1 < len(es) else len(then)
        tail = nxt - e.range_end
        if e.jump:  # filled when something was written there: the fixed text after it comes later
            if _same(then, e.range_end, now, p_now, tail):
                out.append((order[i], e.at(p_now)))
            elif tail >= 2:
                seg = then[e.range_end:nxt]
                found = now.find(seg, p_now + 1, p_now + MAX_FILL + tail)
                if found < 0 or "\n" in now[p_now:found]:
                    return None
                p_now = found
            else:
                return None
            p_then = e.range_end
            continue
        fits = [applied for applied, piece in ((False, e.old_text), (True, e.new_text))
                if now.startswith(piece, p_now) and _same(then, e.range_end, now, p_now + len(piece), tail)]
        if len(fits) != 1:
            return None
        if fits[0]:
            p_now += len(e.new_text)
        else:
            out.append((order[i], e.at(p_now)))
            p_now += len(e.old_text)
        p_then = e.range_end
    if not _same(then, p_then, now, p_now, len(then) - p_then) or p_now + len(then) - p_then != len(now):
        return None
    return out
