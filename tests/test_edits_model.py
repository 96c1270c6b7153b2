"""engine/edits/model.py on the real model: the next-edit call runs and yields a well-formed edit or none."""

from __future__ import annotations

import ast

import pytest

from engine.edits.history import EditHistory
from engine.edits.model import model_next_edit

pytestmark = pytest.mark.model

SRC = '''def scale(points, factor):
    out = []
    for x, y in points:
        out.append((x * factor, y * factor))
    return out
'''


def test_model_next_edit_is_well_formed_or_none(engine):
    h = EditHistory()
    h.open("d", SRC)
    at = SRC.index("x * factor")
    h.change("d", at, at + 1, "(x + 1)", now=0.0)
    text = h.text("d") or ""
    fim = engine.fim
    edit, answer = model_next_edit(engine, text, h.edits("d"), path="scale.py")
    assert engine.fim is fim  # the FIM layout is back for completions
    assert isinstance(answer, str)
    if edit is not None:
        assert edit.source == "model" and text[edit.range_start:edit.range_end] == edit.old_text
        ast.parse(edit.apply(text))
