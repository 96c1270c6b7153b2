"""The syntax questions post-processing and the context block ask, answered from a tree-sitter parse for
any language with a grammar. Pure functions: text (or a ``SyntaxTree``) in, an answer out; None where the
language has no grammar, so a caller keeps its text heuristic there.

Offsets are code points (Flint's ``prefix``/``suffix`` are ``str``); trees count bytes, the functions
convert. Python keeps its current behaviour at the call sites (``ast`` is the better judge of a Python
statement); everything here works for Python too and is tested on it.

What each function replaces for non-Python languages (``engine/text/statements.py`` unless named):

- ``in_string_or_comment(tree, offset)``: ``ScanState.quote`` from ``prefix_state``/``scan`` (strings on one
  line, ``#``/``//`` comments only) where a caller asks "is the cursor in a string or comment" -- template
  literals, raw strings, block comments, char literals vs Rust lifetimes are right here.
- ``is_complete(language_id, text_before, completion, line_suffix)``: ``_heuristic_complete`` under
  ``is_complete_statement`` and ``_ends_mid`` (so ``ends_mid_statement``, ``cut_to_complete`` and
  ``cut_block_to_complete``, and budget.py's ``budget_for`` "next" check).
- ``statement_cut_points`` / ``complete_statement_end``: ``_cut_points`` (regex tokens) + the
  ``_ends_mid`` loop in ``cut_to_complete``; postprocess.py's ``_finish_statement`` (where the
  statement the cursor's line started ends).
- ``block_is_complete(language_id, text_before, completion)``: the ``opens_block`` test in
  ``drop_dangling_header`` and the dangling-header check after ``cut_block_to_complete`` in postprocess.py.
- ``scope_end(language_id, text_before, completion)``: postprocess.py's ``limit_scope`` and budget.py's
  ``cut_to_budget`` ``_CLOSING_LINE`` rule for brace languages (where the text closes the cursor's block).
- ``first_stray_closer(language_id, text_before, text)``: ``scan(text + tail, state)[1]`` in
  postprocess.py's ``fit_line_suffix`` / ``_balanced_cut`` (a closer that closes nothing).
- ``open_brackets(language_id, text_before)``: ``prefix_state(prefix).stack`` (the auto-closed pairs open
  at the cursor, ``_inside_open_bracket``).
- ``enclosing_block(tree, offset)``: budget.py's ``_ends_body`` / ``_opens_block_below`` (wired through
  ``blocks.block_around`` on a window) and ``statement_start``'s indentation reading (block extent, its
  indentation, statements after the cursor).
- ``definitions(tree)``, ``enclosing_definition(tree, offset)``, ``outlines(tree, names)`` (defined in
  ``engine/syntax/definitions.py``, importable here): ``engine/context/sources.py``'s ``regex_definitions``
  (same return shape: name -> (line, outline)).
- ``repeats_following_lines(language_id, completion, suffix)``: a token-level check beside postprocess.py's
  ``cut_at_following_lines`` (a copy of the next statement re-wrapped over other lines).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.syntax.blocks import Block, enclosing_block
from engine.syntax.definitions import Definition, definitions, enclosing_definition, outline, outlines
from engine.syntax.languages import Grammar, grammar_for
from engine.syntax.nodes import (
    CLOSERS,
    CODE_IN_STRING,
    MATCH,
    OPENERS,
    QUOTE_TOKENS,
    ancestors,
    closer_for,
    is_comment,
    is_string,
    leaves,
)
from engine.syntax.repeats import repeats_following_lines
from engine.syntax.tree import SyntaxTree, parse_text
from engine.syntax.window import statement_window

__all__ = [
    "Block", "Definition", "block_is_complete", "complete_statement_end", "definitions", "enclosing_block",
    "enclosing_definition", "first_stray_closer", "has_error_in", "in_string_or_comment", "is_comment", "literal_at", "literal_kind",
    "is_complete", "is_string", "last_cut_point", "open_brackets", "outline", "outlines", "repeats_following_lines", "scope_end",
    "statement_cut_points", "statement_window",
]


# ---- strings and comments --------------------------------------------------------------------------------
def _open_ended_comment(tree: SyntaxTree, node: Any) -> bool:
    """A line comment (or one left unclosed): the cursor right after its last character is still in it."""
    text = tree.source[node.start_byte: node.end_byte]
    return not (text.startswith(b"/*") and text.endswith(b"*/") and len(text) >= 4) and \
        not text.rstrip().endswith((b"-->", b"-}", b"*)", b"]]", b"=#"))


def in_string_or_comment(tree: SyntaxTree, offset: int) -> bool:
    """Is code point ``offset`` of ``tree``'s text inside a string, a character literal or a comment (not
    inside an interpolation ``${...}`` of a string)? The cursor right after a closing quote is outside; right
    after a line comment's last character, inside. A string left open (``"abc|`` while typing) counts as a
    string to the end of its line."""
    return literal_kind(tree, offset) is not None


def literal_kind(tree: SyntaxTree, offset: int) -> str | None:
    """``in_string_or_comment`` telling which: "comment", "string" (character literals too), or None."""
    b = tree.byte_at(offset)
    if b <= 0:
        return None
    for n in ancestors(tree.root.descendant_for_byte_range(b - 1, b)):
        if n.type in CODE_IN_STRING and n.start_byte < b < n.end_byte:
            return None
        if is_comment(n):
            inside = n.start_byte < b < n.end_byte or (b == n.end_byte and _open_ended_comment(tree, n))
            return "comment" if inside else None
        if is_string(n):
            if n.start_byte < b < n.end_byte or (b == n.end_byte and n.has_error):  # its closing quote missing
                return "string"
            break
        if n.is_error:
            break
    return "string" if _in_open_quote(tree, b) else None


def literal_at(language_id: str | None, text_before: str, line_suffix: str = "") -> str | None | bool:
    """``literal_kind`` at the end of ``text_before`` (the rest of its line after it), parsing only its statement
    window: "comment", "string", None (code), or False: no grammar."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return False
    before = statement_window(text_before)
    return literal_kind(parse_text(grammar, before + line_suffix), len(before))


def _in_open_quote(tree: SyntaxTree, b: int) -> bool:
    """An unterminated quote on the cursor's line, before it: an error node opened by a quote token."""
    line_start = tree.source.rfind(b"\n", 0, b) + 1
    for leaf in leaves(tree.root, line_start, b):
        parent = leaf.parent
        # the quote token left loose in an ERROR (which may start before it, at the statement)
        if leaf.start_byte < b and leaf.type in QUOTE_TOKENS and parent is not None and parent.is_error:
            return True
    return False


# ---- brackets --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Brackets:
    stack: tuple[tuple[str, int], ...]  # (opener, byte offset), innermost last
    stray: int | None  # byte offset of the first closer at or after ``since`` that closes nothing


def _bracket_walk(tree: SyntaxTree, since: int, until: int | None = None) -> _Brackets:
    """Brackets of the code tokens of ``tree`` up to byte ``until``; closers before byte ``since`` that
    close nothing are skipped (the window starts inside something)."""
    stack: list[tuple[str, int]] = []
    for leaf in leaves(tree.root, 0, until, balanced_before=since):
        t = leaf.type
        if until is not None and leaf.end_byte > until:
            break
        if t in OPENERS:
            stack.append((t, leaf.start_byte))
        elif t in CLOSERS:
            if stack and stack[-1][0][0] in MATCH[t]:
                stack.pop()
            elif leaf.start_byte >= since:
                return _Brackets(tuple(stack), leaf.start_byte)
    return _Brackets(tuple(stack), None)


@functools.lru_cache(maxsize=64)  # the steps of one request ask again with the same strings
def open_brackets(language_id: str | None, text_before: str) -> tuple[str, ...] | None:
    """The brackets open at the end of ``text_before`` (innermost last), strings and comments skipped;
    None without a grammar. The tree-sitter reading of ``prefix_state(prefix).stack``."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    tree = parse_text(grammar, statement_window(text_before))
    return tuple(o for o, _ in _bracket_walk(tree, len(tree.source)).stack)


@functools.lru_cache(maxsize=64)  # the steps of one request ask again with the same strings
def first_stray_closer(language_id: str | None, text_before: str, text: str) -> int | None | bool:
    """Index in ``text`` (inserted after ``text_before``) of its first closer that closes nothing or the
    wrong thing (None: no such closer; False: no grammar). The tree-sitter reading of ``scan(text, state)``."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return False
    before = statement_window(text_before)
    tree = parse_text(grammar, before + text)
    cursor = len(before.encode("utf-8"))
    bad = _bracket_walk(tree, cursor).stray
    return None if bad is None else tree.offset_at(bad) - len(before)


# ---- complete statements ---------------------------------------------------------------------------------
_BARE = frozenset({"identifier", "member_expression", "field_expression", "attribute", "selector_expression",
                   "scoped_identifier", "field_access", "qualified_identifier", "property_identifier",
                   "navigation_expression"})


def _errors(node: Any) -> Iterator[Any]:
    """ERROR and MISSING nodes under ``node``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_error or n.is_missing:
            yield n
            if n.is_missing:
                continue
        if n.has_error:
            stack.extend(n.children)


def _ends_on_bare_name(tree: SyntaxTree, end: int) -> bool:
    """The last statement is a name or an attribute alone (``self.insert``): still being written."""
    n = tree.root.descendant_for_byte_range(max(0, end - 1), end)
    for a in ancestors(n):
        if a.end_byte != end:
            return False
        if a.type == "expression_statement":
            kids = [c for c in a.named_children if not is_comment(c)]
            return len(kids) == 1 and kids[0].type in _BARE
    return False


def _terminator(missing: Any) -> bool:
    """A missing ``;`` that ends a statement, not one standing for a missing body (``for (...)`` alone)."""
    parent = missing.parent
    if missing.type != ";" or parent is None or parent.type == "empty_statement":
        return False
    body = parent.child_by_field_name("body")
    return body is None or body.id != missing.id


# what a `{` opened inside a call's brackets is the body of, when the call's `)` comes after that body
_CALLBACK_BODY = frozenset({"arrow_function", "function_expression", "function", "generator_function",
                            "func_literal", "closure_expression", "lambda_expression", "anonymous_function",
                            "object_creation_expression", "lambda_literal"})


def _callback_header(tree: SyntaxTree, own: list[tuple[str, int]]) -> bool:
    """The brackets the completion left open (``own``, outermost first, in ``tree`` parsed with them closed) are
    braces, or each other bracket is followed by a ``{`` that opens a function's body: ``xs.forEach(d => {``,
    ``t.Run("x", func(t *testing.T) {`` is a block header whose ``})`` follows the body, as ``if (x) {``'s
    ``}`` does. A ``{`` of an object literal (``f({``) is not one."""
    last = max((i for i, (o, _) in enumerate(own) if o != "{"), default=-1)
    for _, at in own[last + 1:]:
        brace = tree.root.descendant_for_byte_range(at, at + 1)
        parent = brace.parent if brace is not None else None
        if parent is not None and (parent.type in _CALLBACK_BODY or
                                   (parent.parent is not None and parent.parent.type in _CALLBACK_BODY)):
            return True
    return last < 0


def _verdict(grammar: Grammar, before: str, completion: str, line_suffix: str, block: bool) -> bool:
    """Is ``completion`` (then ``line_suffix``) after the window ``before`` a complete statement? Its own
    brackets balanced (in ``block`` mode braces too, else a trailing ``{`` is a block header), no closer
    that closes nothing, and once the brackets open before it are closed, no error from the cursor on
    (a missing ``;`` at the very end, or after the brackets closed for the parse, is allowed: the user types it)."""
    region = completion + line_suffix
    text = before + region
    tree = parse_text(grammar, text)
    cursor = len(before.encode("utf-8"))
    walk = _bracket_walk(tree, cursor)
    if walk.stray is not None:
        return False
    own = [(o, at) for o, at in walk.stack if at >= cursor]
    if any(o != "{" or block for o, _ in own):
        if block or own[-1][0] != "{":
            return False
    closers = "".join(closer_for(tree.source, o, at) for o, at in reversed(walk.stack))
    end, after = len(tree.source.rstrip()), len(tree.source)  # after: a `;` past the closers added is the user's
    code_before = len(before.rstrip().encode("utf-8"))  # an error ending on the last token before the cursor
    if closers:                                           # is the cursor's statement's
        tree = parse_text(grammar, text + "\n" + closers)
    if not _callback_header(tree, own):
        return False
    for e in _errors(tree.root):
        if e.is_missing:
            # a missing `;` is the user's to type (at the end), or the line above's (not this statement's)
            if e.start_byte >= code_before and not (_terminator(e) and (e.start_byte in (code_before, end) or
                                                                        e.start_byte > after)) \
                    and not e.type.startswith("#"):  # an `#endif` of an `#if` the window opened is not ours
                return False
        elif e.end_byte >= code_before and e.end_byte > 0:
            return False
    return not _ends_on_bare_name(tree, end) if end > cursor else True


@functools.lru_cache(maxsize=64)  # the steps of one request ask again with the same strings
def is_complete(language_id: str | None, text_before: str, completion: str, line_suffix: str = "") -> bool | None:
    """Would inserting ``completion`` after ``text_before`` (followed by ``line_suffix``, the rest of the
    cursor's line) leave a complete statement -- or a block header ending in ``{`` -- rather than one cut in
    its middle (``x = foo(a,``, ``a +``, ``for (const b of``)? Brackets opened before the cursor are the
    context's (inside a call, ``b`` completes ``foo(a, |``). None: no grammar for the language."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    before = statement_window(text_before)
    return _verdict(grammar, before, completion, line_suffix, block=False)


def block_is_complete(language_id: str | None, text_before: str, completion: str) -> bool | None:
    """Like ``is_complete``, and every bracket the completion opens -- braces too -- is closed in it: a
    block suggestion that ends on a header without its body (``for (...) {``) or inside its body is not.
    None: no grammar."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    before = statement_window(text_before)
    return _verdict(grammar, before, completion, "", block=True)


_NAME_CUT_FROM = "([.=:<"  # a name cut from its call, index, attribute, assignment or type says something else


def _cut_candidates(grammar: Grammar, before: str, completion: str) -> list[int]:
    """Token ends ``k`` of ``completion`` (after the window ``before``) where no bracket it opened is open (but
    a ``{``: a header) and no name is cut from its call, index, attribute, assignment or type."""
    tree = parse_text(grammar, before + completion)
    cursor = len(before.encode("utf-8"))
    ends: list[int] = []
    stack: list[str] = []
    for leaf in leaves(tree.root, cursor):
        if leaf.end_byte <= cursor:
            continue
        t = leaf.type
        if t in OPENERS:
            stack.append(t)
        elif t in CLOSERS and stack and stack[-1][0] in MATCH[t]:
            stack.pop()
        if stack and stack[-1] != "{":
            continue  # a bracket the completion opened is open here (but a callback's `(... {`: maybe a header)
        k = tree.offset_at(leaf.end_byte) - len(before)
        rest = completion[k:].lstrip(" \t")
        if rest and rest[0] in _NAME_CUT_FROM and rest[:2] not in ("==", "=>", ":=") and \
                any(ch.isalnum() for ch in completion[:k]):
            continue
        ends.append(k)
    return ends


@functools.lru_cache(maxsize=64)  # the steps of one request ask again with the same strings
def statement_cut_points(language_id: str | None, text_before: str, completion: str,
                         line_suffix: str = "") -> list[int] | None:
    """Every offset ``k`` of ``completion`` (token ends, ascending) where ``completion[:k]`` completes the
    statement (``is_complete``): the candidate cuts for a text a limit stopped mid-statement. A cut that
    leaves a name before its ``(``/``.``/``=`` is no candidate. None: no grammar."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    before = statement_window(text_before)
    ends = _cut_candidates(grammar, before, completion)
    return [k for k in ends if _verdict(grammar, before, completion[:k], line_suffix, block=False)]


@functools.lru_cache(maxsize=64)  # the steps of one request ask again with the same strings
def last_cut_point(language_id: str | None, text_before: str, completion: str, line_suffix: str = "") -> int | None:
    """The last of ``statement_cut_points`` (0: there is none), judging from the end: a cut back to the longest
    complete statement parses only the candidates after it. None: no grammar."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    before = statement_window(text_before)
    ends = _cut_candidates(grammar, before, completion)
    return next((k for k in reversed(ends) if _verdict(grammar, before, completion[:k], line_suffix, block=False)), 0)


def complete_statement_end(language_id: str | None, text_before: str, completion: str,
                           line_suffix: str = "") -> int | None:
    """Where in ``completion`` the statement the cursor is in first becomes complete (the first of
    ``statement_cut_points``), or None (never, or no grammar)."""
    points = statement_cut_points(language_id, text_before, completion, line_suffix)
    return points[0] if points else None


@functools.lru_cache(maxsize=64)  # the steps of one request ask again with the same strings
def scope_end(language_id: str | None, text_before: str, completion: str) -> int | None:
    """Offset in ``completion`` of the first ``}`` that closes a brace opened before the cursor (the text
    leaves the cursor's block there), or None (it never does, or no grammar)."""
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    before = statement_window(text_before)
    tree = parse_text(grammar, before + completion)
    cursor = len(before.encode("utf-8"))
    stack: list[tuple[str, int]] = []
    for leaf in leaves(tree.root):
        t = leaf.type
        if t in OPENERS:
            stack.append((t, leaf.start_byte))
        elif t in CLOSERS:
            if stack and stack[-1][0][0] in MATCH[t]:
                opener, at = stack.pop()
                if t == "}" and at < cursor <= leaf.start_byte:
                    return tree.offset_at(leaf.start_byte) - len(before)
    return None


# ---- errors and blocks in a document ---------------------------------------------------------------------
def has_error_in(tree: SyntaxTree, start: int, end: int) -> bool:
    """Does the parse have an ERROR or a MISSING node overlapping code points [start, end] of its text?"""
    lo, hi = tree.byte_at(start), tree.byte_at(end)
    for e in _errors(tree.root):
        if e.is_missing and lo <= e.start_byte <= hi:
            return True
        if e.is_error and e.start_byte <= hi and e.end_byte >= lo:
            return True
    return False
