"""The plan's parts as a computation finds them, and what a request sees of the other documents' (pure
functions on records.py's types; service.py owns the plan and calls these on the event loop).

A computation hands its parts over one document at a time (engine/edits/exact.py ``Emit``): the renamed
document's first, then each other document's as jedi is done with it. Each becomes a ``Part`` of the plan
when the text it was found in is still the one the user has (``part_of``), so the first offer is ready long
before the last file is searched, and a request answers from whatever the plan holds then (``pending``
while more may come).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from engine.edits.common import NextEdit
from engine.edits.fill import header
from engine.edits.signature import Change
from engine.edits.workspace import OpenDoc
from lsp_server.nextedit.records import Elsewhere, Job, Part, Plan, Signature


def part_of(job: Job, doc: OpenDoc | None, edits: list[NextEdit], revision_of: Callable[[str], int | None],
            open_paths: set[str]) -> tuple[str, Part] | None:
    """The plan's part for ``edits`` found by ``job`` in ``doc`` (None: the job's own document), by URI: an
    open document's when it is still at the revision the job read; a file on disk's when it is not open
    (opened since, its text may differ). None when neither holds, or there are no edits."""
    if not edits:
        return None
    if doc is None:
        return job.uri, Part(job.revision, job.version, job.text, edits)
    if doc.key in job.others:
        rev, version, text = job.others[doc.key]
        return (doc.key, Part(rev, version, text, edits)) if revision_of(doc.key) == rev else None
    if os.path.abspath(doc.path) in open_paths:
        return None
    return doc.key, Part(-1, -1, doc.text, edits, path=doc.path)


def elsewhere(plan: Plan | None, uri: str, revision_of: Callable[[str], int | None]) -> list[Elsewhere]:
    """The plan's edits outside ``uri`` still valid (each part at its document's current revision): the
    renamed document's own remaining ones first, then the other documents' parts by URI."""
    if plan is None:
        return []
    out = []
    for other in [plan.origin] + sorted(u for u in plan.parts if u != plan.origin):
        part = plan.parts.get(other)
        if other == uri or part is None:
            continue
        edits = sorted(part.edits, key=lambda e: e.range_start)
        if part.on_disk:
            if revision_of(other) is None:  # still not open: the file's text counts
                out += [Elsewhere(other, None, e, part.text) for e in edits]
        elif revision_of(other) == part.revision:
            out += [Elsewhere(other, part.version, e) for e in edits]
    return out


def signature_of(text: str, change: Change | None) -> Signature | None:
    """The edited def's signature, for the prompts of the arguments at its call sites."""
    if change is None:
        return None
    line_start = text.rfind("\n", 0, change.name_at) + 1
    sig = change.signature or header(text, change.name_at)
    return Signature(sig, line_start) if sig else None
