"""Order a request's variants by what Tab on them is worth, not by model score alone. Pure, no model.

The model's best-scored variant is sometimes a comment where code was due (``# Increase depth ...``) or a
placeholder (``# Your code here`` + ``pass``, ``...``, ``raise NotImplementedError``) while another variant
implements the code. Inserting those saves the user nothing, so:

- ``kind(text)`` sorts a suggestion into ``code``, ``comment`` (only comments / docstrings) or
  ``placeholder`` (nothing but placeholder statements, possibly with comments).
- ``rank(texts)`` keeps the model's order within a kind and puts ``code`` first, then ``comment``, then
  ``placeholder``; a variant that ends mid-statement goes after the complete ones of its kind.

A comment stays first when no code variant exists (the user may be writing one), and nothing is dropped:
variants are only reordered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Literal

Kind = Literal["code", "comment", "placeholder"]

_COMMENT_LINE = re.compile(r"^\s*(?:#|//|/\*|\*|<!--|--(?!-)|;;)")
# statements that stand in for code the user still has to write
_PLACEHOLDER_LINE = re.compile(
    r"^\s*(?:pass|\.\.\.|raise\s+NotImplementedError(?:\(.*\))?|todo!\(.*\)|unimplemented!\(.*\)"
    r"|throw\s+new\s+(?:Error|UnsupportedOperationException|NotImplementedException)\(\s*(?:\"[^\"]*\"|'[^']*')?\s*\);?"
    r")\s*(?:#.*|//.*)?$")
_DOCSTRING_LINE = re.compile(r"^\s*(?:[rRuUbBfF]{0,2})(?:\"\"\"|''')")
_ORDER: dict[Kind, int] = {"code": 0, "comment": 1, "placeholder": 2}
_PYTHON_IDS = frozenset({"python", "py", "python3"})


def _lines(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if ln.strip()]


def _strip_docstrings(lines: list[str]) -> list[str]:
    """Lines outside triple-quoted strings that start a line (docstrings are prose, not code)."""
    out: list[str] = []
    quote: str | None = None
    for ln in lines:
        s = ln.strip()
        if quote is not None:
            if quote in s:
                quote = None
            continue
        if _DOCSTRING_LINE.match(ln):
            q = '"""' if '"""' in s else "'''"
            body = s[s.index(q) + 3:]
            if q not in body:
                quote = q
            continue
        out.append(ln)
    return out


def kind(text: str, language: str | None = None) -> Kind:
    """``code`` unless every non-blank line is a comment/docstring (``comment``) or a placeholder
    statement or comment with at least one placeholder statement (``placeholder``). Docstrings count as
    prose in Python only (``language`` a Python id, or None: unknown); elsewhere a triple quote is code."""
    lines = _lines(text)
    if not language or language.lower() in _PYTHON_IDS:
        lines = _strip_docstrings(lines)
    if not lines:
        return "comment" if text.strip() else "placeholder"
    code = [ln for ln in lines if not _COMMENT_LINE.match(ln)]
    if not code:
        return "comment"
    if all(_PLACEHOLDER_LINE.match(ln) for ln in code):
        return "placeholder"
    return "code"


def rank(texts: Sequence[str], *, incomplete: Callable[[str], bool] | None = None,
         language: str | None = None) -> list[int]:
    """Indices of ``texts`` (in model order) in the order to offer them. ``incomplete(text)``, when given,
    says a text ends mid-statement; such a text follows the complete ones of its kind."""
    def key(i: int) -> tuple[int, int, int]:
        t = texts[i]
        return (_ORDER[kind(t, language)], 1 if incomplete is not None and incomplete(t) else 0, i)

    return sorted(range(len(texts)), key=key)


def order_at_cursor(texts: Sequence[str], prefix: str, suffix: str, language: str | None = None) -> list[int]:
    """``rank`` for suggestions at a cursor (LF text before/after it): a suggestion that would leave its
    statement unfinished there follows the complete ones of its kind. ``language``: the document's
    language id (None or empty: guessed from the text)."""
    from engine.text.statements import ends_mid_statement, split_cursor

    _, line_suffix = split_cursor(prefix, suffix)
    return rank(texts, incomplete=lambda t: ends_mid_statement(t, prefix, line_suffix, language),
                language=language)
