"""Exact next edits: no model, right every time (issue 37).

**Rename.** The user's last (coalesced) edit changed one identifier occurrence, ``old`` -> ``new``, both
identifiers. jedi (``Script.get_references`` on the text *before* the rename, at the old name) gives the
other references in the document; each, mapped into the current text, is offered as ``old`` -> ``new``.
When the user has already renamed several occurrences by hand (a run of edits with the same ``old`` ->
``new``), jedi is asked on the text before the first of them, and the ones already done drop out. Only
references jedi finds are offered, and only when:

- the new name is not in the function that holds every reference (a local's, a parameter's), nor, for
  other names, anywhere in the file (else the edit may switch to another name rather than rename this
  one, and a rename into it could capture or shadow it);
- no reference is an import (changing ``os`` to ``sys`` at a use is not renaming the module);
- for a name of one function (a local, a parameter), the old name is left nowhere else in that function
  as a name jedi did not call a reference (jedi follows bindings: after a reassignment in a branch it may
  see two names, and renaming one of them can leave a name unbound on some path). jedi asked at a binding
  (a parameter) stops at a rebinding, asked at a later occurrence it finds them all: so it is asked again
  at such a leftover, and its answer joins when it names the renamed site (rename.py ``_completed``);
- every reference is still the old name in the current text, and applying them all leaves a file that
  ``ast.parse`` reads (Python).

**Literal repeat.** The last edit replaced a literal token sequence (names, numbers, strings with dots
between, e.g. ``"utf-8"`` -> ``ENCODING``, ``0.5`` -> ``0.25``, ``np.float`` -> ``numpy.double``) by another:
its other occurrences, on whole tokens, in the region being edited (the enclosing function in Python, else
40 lines either side) are offered, when the file with all of them applied parses (Python). Occurrences
inside comments and inside other strings are skipped. An edit inside a one-line string literal replaces
that whole literal (``"utf-8"`` -> ``"UTF-8"``: the other ``"utf-8"`` literals are offered); an edit inside
a comment or a triple-quoted string (prose, a docstring) offers nothing: on real version pairs, repeating
a changed word of prose was right once in 8 suggestions (docs/benchmarks/next_edit.md). A single name
changed into another is the rename's business, never a repeat (jedi knows which of its occurrences are the
same name).

Both are ordered nearest after the cursor first, then from the top down to the cursor.

**Call sites.** A parameter renamed, removed, or added without a default in a ``def``: each call of the
function (jedi's references here, ``goto`` in the other open documents) gets its ``old=`` keyword renamed,
the removed argument removed, or a jump target (an empty edit) where the new argument goes
(signature.py, callsites.py). A renamed parameter's calls only when jedi vouches for the rename itself;
its uses in its function (and a method's ``self.`` calls) are a first part from the syntax tree meanwhile.

**Elsewhere.** A rename of a name that is not one function's own (a function, a class, an attribute, a
module-level name) also offers its references in the other open documents (``workspace.py``: jedi on
their current, unsaved texts).

jedi runs through ``engine.guidance.jedi_analyser.JediAnalyser`` (its projects, environments, scripts and
worker thread), so a question waits at most until its deadline and never raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from engine.edits.callsites import (
    call_sites_elsewhere,
    call_sites_here,
    last_signature_change,
    self_calls_here,
)
from engine.edits.common import (  # noqa: F401  (re-exported: the package's one entry for callers)
    JEDI_BUDGET_S,
    MAX_SUGGESTIONS,
    NextEdit,
    Source,
    apply_all,
    by_cursor,
    is_python,
    parses,
)
from engine.edits.history import Edit
from engine.edits.moved import find_move, move_next_edits
from engine.edits.ondisk import DiskSearch
from engine.edits.rename import (  # noqa: F401
    Rename,
    Renamed,
    find_rename,
    identifier_change,
    jedi_references,
    rename_edits,
)
from engine.edits.repeat import repeat_edits
from engine.edits.signature import Change
from engine.edits.workspace import OpenDoc, references_elsewhere


def exact_next_edits(text: str, edits: Sequence[Edit], *, path: str | None = None, language: str | None = None,
                     analyser: Any = None, deadline: float | None = None, cursor: int | None = None) -> list[NextEdit]:
    """The exact next edits after the last of ``edits``: a rename's remaining references (Python), else a
    literal's other occurrences; [] when neither applies."""
    return workspace_next_edits(text, edits, path=path, language=language, analyser=analyser, deadline=deadline,
                                cursor=cursor)[0]


# found next edits handed over as they come: (None, this document's) first, then (another document, its)
Emit = Callable[[OpenDoc | None, list[NextEdit]], None]


def workspace_next_edits(text: str, edits: Sequence[Edit], *, path: str | None = None, language: str | None = None,
                         analyser: Any = None, deadline: float | None = None, cursor: int | None = None,
                         others: Sequence[OpenDoc] = (), disk: DiskSearch | None = None, emit: Emit | None = None,
                         change: Change | None | Literal["find"] = "find"
                         ) -> tuple[list[NextEdit], dict[str, list[NextEdit]]]:
    """``exact_next_edits`` here, and a rename's references, the call sites' edits or a moved name's imports
    (moved.py) in the ``others`` (the other open Python documents, workspace.py) and, with ``disk``, the
    workspace's files on disk (ondisk.py; their texts in ``disk.docs``), by key. ``emit``: each part as found
    (this document's first, empty when it has none; the others' one at a time), the same edits as returned.
    ``change``: the last edit's signature change (None: it made none), when the caller looked already."""
    python = is_python(path, language)
    if (move := find_move(path, text, edits, others) if python and path else None) is not None:
        return [], move_next_edits(move, others, disk=disk, deadline=time.monotonic() + JEDI_BUDGET_S, emit=emit)
    if not edits:
        return [], {}
    if python:
        change = None if analyser is None else (last_signature_change(text, edits) if change == "find"
                                                 else change)
        here: list[NextEdit] = []
        r = None
        at = edits[-1].new_end if cursor is None else cursor
        shown, mine = _first_part(text, edits, change, cursor, at, emit)
        if identifier_change(edits[-1].undo(text), edits[-1]) is not None:
            r = find_rename(text, edits, path=path, analyser=analyser, deadline=deadline, cursor=cursor)
            if r is not None:
                here = r.edits
            elif change is not None:
                change = None  # a parameter rename jedi does not vouch for in the body: nothing at the calls
        deadline = time.monotonic() + JEDI_BUDGET_S if deadline is None else deadline
        if change is not None:
            first = by_cursor(_joined(text, here, mine), at) if emit is not None else []
            if first and first != shown and emit is not None:
                emit(None, first)  # the rename jedi vouches for: the call sites wait for it
            calls_here = call_sites_here(text, change, path=path, analyser=analyser, deadline=deadline)
            if calls_here is None:
                change = None  # jedi does not know the function: nothing at the calls elsewhere either
            else:
                here = _joined(text, here, calls_here)
        here = by_cursor(here, at)
        away = r is not None and not r.local and (bool(others) or disk is not None) and path is not None \
            and analyser is not None
        if emit is not None and (here or away or change is not None or shown):
            # the user's own document first: its edits need no other file (none: said too, so a request
            # answers now, pending, instead of waiting for the other documents' first)
            emit(None, here)
        elsewhere: dict[str, list[NextEdit]] = {}
        if r is not None and (others or disk is not None) and path is not None and analyser is not None:
            elsewhere = references_elsewhere(r, path, others, analyser=analyser, deadline=deadline, disk=disk,
                                             each=emit)
        if change is not None:
            elsewhere |= call_sites_elsewhere(text, change, path=path, analyser=analyser, deadline=deadline,
                                              others=others, disk=disk, each=emit)
        if here or elsewhere:
            return here, elsewhere
        # a word inside a string or comment is no name jedi knows: its repeat (a name in code never is)
    found = repeat_edits(text, edits, language="python" if python else language, cursor=cursor)
    if found and emit is not None:
        emit(None, found)
    return found, {}


def _first_part(text: str, edits: Sequence[Edit], change: Change | None, cursor: int | None, at: int,
                emit: Emit | None) -> tuple[list[NextEdit], list[NextEdit]]:
    """From the syntax tree alone, a first part emitted while jedi looks (it can take half a second in a
    large module): a renamed parameter's uses in its function (its ``name=`` at calls aside), a method's
    ``self.`` / ``cls.`` calls in its own class. (The part, and those calls: the next part has them too.)"""
    if change is None or emit is None:
        return [], []
    uses = find_rename(text, edits, cursor=cursor, in_function=True) if change.kind == "renamed" else None
    mine = self_calls_here(text, change)
    out = by_cursor(_joined(text, uses.edits if uses is not None else [], mine), at)
    if out:
        emit(None, out)
    return out, mine


def _joined(text: str, a: list[NextEdit], b: list[NextEdit]) -> list[NextEdit]:
    """Both lists, without ``b``'s edits that overlap ``a``'s, when the text with them all parses; else ``a``."""
    spans = [(e.range_start, e.range_end) for e in a]
    extra = [e for e in b if not any(s <= e.range_start < t or e.range_start <= s < e.range_end for s, t in spans)]
    out = a + extra
    return out if not extra or parses(apply_all(text, out)) else a
