"""Drop-ins for ``engine/text/statements.py``'s syntax checks, with its signatures, for the integration:
each answers from tree-sitter for a language with a grammar other than Python, and None otherwise -- the
caller then keeps its own path (Python's ``ast``, the bracket scanner for the rest). Wiring one in is a
two-line change at the top of the existing function::

    r = adapt.ends_mid_statement(text, prefix, line_suffix, language)
    if r is not None:
        return r

``language`` is the LSP language id as the callers pass it (``Request.language``); no id, no tree (the
callers' ``guess_language`` only tells Python from the rest).
"""

from __future__ import annotations

from engine.syntax.blocks import Around
from engine.syntax.blocks import block_around as _block_around
from engine.syntax.languages import grammar_for
from engine.syntax.queries import (
    block_is_complete,
    first_stray_closer,
    is_complete,
    last_cut_point,
    open_brackets,
    scope_end,
)


def tree_language(language: str | None) -> str | None:
    """The language id when tree-sitter answers for it: a grammar, and not Python (``ast`` stays)."""
    if not language or language.lower() in ("python", "py", "python3"):
        return None
    return language if grammar_for(language) is not None else None


def ends_mid_statement(text: str, prefix: str, line_suffix: str = "", language: str | None = None) -> bool | None:
    """``statements.ends_mid_statement``: would inserting ``text`` at the cursor leave its statement
    unfinished? None: not ours to answer."""
    lang = tree_language(language)
    if lang is None:
        return None
    complete = is_complete(lang, prefix, text, line_suffix)
    return None if complete is None else not complete


def is_complete_statement(stmt: str, language: str | None = None) -> bool | None:
    """``statements.is_complete_statement``: ``stmt`` (a statement from its start) is whole."""
    lang = tree_language(language)
    return None if lang is None else is_complete(lang, "", stmt)


def cut_to_complete(text: str, prefix: str, line_suffix: str = "", language: str | None = None) -> str | None:
    """``statements.cut_to_complete``: the text cut back to its longest complete cut (a tree-sitter token end):
    on its last line, else the whole lines before it when they complete the statement, else earlier. None: not
    ours."""
    lang = tree_language(language)
    if lang is None:
        return None
    # the longest complete cut: on the last line, else in the lines before (which may leave the statement
    # open themselves: a ternary's `? a` whose `: b` line is cut)
    k = last_cut_point(lang, prefix, text, line_suffix)
    return None if k is None else text[:k].rstrip("\n")


def drop_dangling_header(text: str, prefix: str, language: str | None = None) -> str | None:
    """``statements.drop_dangling_header`` for a block a limit cut: its last line goes when it leaves a
    block open that the lines before it did not (a header without its body). None: not ours."""
    lang = tree_language(language)
    if lang is None:
        return None
    lines = text.split("\n")
    if len(lines) < 2:
        return text
    before = "\n".join(lines[:-1])
    if block_is_complete(lang, prefix, text) is False and block_is_complete(lang, prefix, before) is not False:
        return before.rstrip()
    return text


def open_pairs(prefix: str, language: str | None = None) -> tuple[str, ...] | None:
    """``statements.prefix_state(prefix).stack``: the brackets open at the cursor. None: not ours."""
    lang = tree_language(language)
    return None if lang is None else open_brackets(lang, prefix)


def stray_closer(text: str, prefix: str, language: str | None = None) -> int | None | bool:
    """``statements.scan(text, prefix_state(prefix))[1]``: the index of ``text``'s first closer that closes
    nothing (None: there is none), or False: not ours to answer."""
    lang = tree_language(language)
    return False if lang is None else first_stray_closer(lang, prefix, text)


def scope_end_at(text: str, prefix: str, language: str | None = None) -> int | None:
    """Offset in ``text`` of the first ``}`` closing a brace opened before the cursor (``limit_scope``), or
    None: it stays in its block, or not ours to answer."""
    lang = tree_language(language)
    return None if lang is None else scope_end(lang, prefix, text)


def block_around(prefix: str, suffix: str, language: str | None = None) -> Around | None:
    """``budget.py``'s ``_ends_body`` / ``_opens_block_below`` at an empty line: the braced block around the cursor
    read from the parse (``Around``). None: not ours (Python, no grammar), or no braced block there."""
    lang = tree_language(language)
    return None if lang is None else _block_around(lang, prefix, suffix)
