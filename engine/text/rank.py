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

Which variants are alternatives at all (``distinct``): two suggestions are the same in substance when they
differ only in whitespace, in comment-only or blank lines, or by one more line at the end (a variant that
wrote the same code and then one line further is not an alternative a user would choose between). The
server keeps the first of each kind (lsp_server/items.py, for explicit requests) and the benchmark
(scripts/bench_picks.py) counts distinct items the same way.
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
_SPACE = re.compile(r"\s+")
_COMMENT = ("#", "//")


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
