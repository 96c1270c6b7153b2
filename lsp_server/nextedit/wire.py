"""flint/nextEdit's answer as JSON (docs/protocol.md): the edits, the jump targets (with the model's
argument when there is one), the other documents' edits and jump targets (open, or files on disk)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.edits.common import NextEdit
from lsp_server.convert import line_starts, offset_to_position
from lsp_server.documents import Document

if TYPE_CHECKING:
    from lsp_server.nextedit.records import Found


def to_json(found: Found, position_at: Callable[[int], tuple[int, int]],
            document: Callable[[str], Document | None] = lambda uri: None, encoding: str = "utf-16") -> dict[str, Any]:
    """The ``flint/nextEdit`` result (docs/protocol.md); ``position_at``: offset -> (line, character) in
    the client's encoding, in the text the edits belong to; ``document``: another open document by URI
    (the ``elsewhere`` edits' positions, in ``encoding``)."""
    def edit_json(e: NextEdit, at: Callable[[int], tuple[int, int]]) -> dict[str, Any]:
        (sl, sc), (el, ec) = at(e.range_start), at(e.range_end)
        return {"range": {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}},
                "newText": e.new_text, "oldText": e.old_text, "source": e.source, "confidence": e.confidence}

    def jump_json(e: NextEdit) -> dict[str, Any]:
        line, ch = position_at(e.range_start)
        at = {"line": line, "character": ch}
        out: dict[str, Any] = {"range": {"start": at, "end": at}, "source": e.source, "note": e.note}
        if e.fill is not None and e.fill.insert:  # the model's argument, above the floor: a client may show it
            out |= {"newText": e.fill.insert, "confidence": round(e.fill.confidence or 0.0, 3)}
        return out

    out: dict[str, Any] = {"version": found.version,
                           "edits": [edit_json(e, position_at) for e in found.edits if not e.jump]}
    jumps = [jump_json(e) for e in found.edits if e.jump]
    if jumps:  # a field of its own: a client that knows nothing of jump targets never applies an empty edit
        out["jumps"] = jumps
    if found.ready_ms is not None:
        out["readyMs"] = found.ready_ms
    if found.stale:
        out["stale"] = True
    if found.pending:  # the other documents' parts still coming: asking again gets them
        out["pending"] = True
    elif found.complete_ms is not None:
        out["completeMs"] = found.complete_ms
    elsewhere = []
    texts: dict[str, Callable[[int], tuple[int, int]]] = {}  # (a file's line starts found once per answer)
    for x in found.elsewhere:
        if x.text is not None:  # a file on disk that is not open: positions in its text, no version
            at: Callable[[int], tuple[int, int]] = texts.get(x.uri) or texts.setdefault(
                x.uri, _text_positions(x.text, encoding))
        else:
            doc = document(x.uri)
            if doc is None or doc.version != x.version:
                continue
            at = _positions(doc, encoding)
        if x.edit.jump:  # where a call needs an argument: the client opens it and asks there
            (line, ch) = at(x.edit.range_start)
            pos = {"line": line, "character": ch}
            elsewhere.append({"uri": x.uri, "version": x.version, "range": {"start": pos, "end": pos},
                              "source": x.edit.source, "note": x.edit.note})
        else:
            elsewhere.append({"uri": x.uri, "version": x.version, **edit_json(x.edit, at)})
    if elsewhere:
        out["elsewhere"] = elsewhere
    return out


def _positions(doc: Document, encoding: str) -> Callable[[int], tuple[int, int]]:
    return lambda off: doc.position_at(off, encoding)


def _text_positions(text: str, encoding: str) -> Callable[[int], tuple[int, int]]:
    starts = line_starts(text)
    return lambda off: offset_to_position(text, off, encoding, starts=starts)
