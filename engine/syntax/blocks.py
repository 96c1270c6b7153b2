"""The innermost block around a position in a parsed document (``enclosing_block``): its extent, the
indentation of its header and first statement, whether it is closed and whether statements follow."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from engine.syntax.languages import grammar_for
from engine.syntax.nodes import ancestors, is_comment
from engine.syntax.tree import SyntaxTree, parse_text
from engine.syntax.window import WINDOW_LINES, indent_width, statement_window


@dataclass(frozen=True)
class Block:
    """The innermost block around a position: its extent (code points), the indentation of the line that
    opens it, that of its first statement (None when empty), whether it is closed (its ``}`` is there, or an
    indented block), and whether statements follow the position inside it."""
    start: int
    end: int
    header_indent: int
    body_indent: int | None
    closed: bool
    statements_after: bool


def _is_block(node: Any) -> bool:
    if node.type == "block" or node.type.endswith(("_block", "_body", "statement_list")):
        return True
    kids = node.children
    return len(kids) >= 2 and kids[0].type == "{" and kids[-1].type == "}"


def _line_indent(text: str, offset: int) -> int:
    start = text.rfind("\n", 0, offset) + 1
    return indent_width(text[start: offset + 1] if offset < len(text) else text[start:])


def _indented_block_before(tree: SyntaxTree, code: int, col: int) -> Any:
    """The innermost indented block (Python's: no braces, it ends with its last statement) that ends on
    the code at byte ``code`` and whose body is no deeper than column ``col``: blank space after a block,
    as deep as its body, is still in it."""
    if code <= 0:
        return None
    for a in ancestors(tree.root.descendant_for_byte_range(code - 1, code)):
        if a.type == "block" and a.end_byte == code and a.children and a.children[0].type != "{" and \
                _line_indent(tree.text, tree.offset_at(a.start_byte)) <= col:
            return a
    return None


def _block_node(tree: SyntaxTree, offset: int) -> Any:
    b = tree.byte_at(offset)
    code = len(tree.source[:b].rstrip())
    col = len(tree.text[tree.text.rfind("\n", 0, offset) + 1: offset].expandtabs(4))
    n = _indented_block_before(tree, code, col) if code < b else None
    if n is None:
        n = next((a for a in ancestors(tree.root.descendant_for_byte_range(b, b))
                  if _is_block(a) and a.start_byte < b <= a.end_byte), None)
    return n


def enclosing_block(tree: SyntaxTree, offset: int) -> Block | None:
    """The innermost block (a brace-delimited body, a Python indented block) containing ``offset``."""
    n = _block_node(tree, offset)
    if n is None:
        return None
    b = tree.byte_at(offset)
    owner = n.parent if n.parent is not None else n
    start, end = tree.offset_at(n.start_byte), tree.offset_at(n.end_byte)
    header = _line_indent(tree.text, tree.offset_at(owner.start_byte))
    stmts = [c for c in n.named_children if not is_comment(c)]
    body = _line_indent(tree.text, tree.offset_at(stmts[0].start_byte)) if stmts else None
    kids = n.children
    closed = not (kids and (kids[-1].is_missing or kids[0].type == "{" and kids[-1].type != "}"))
    after = any(c.start_byte >= b for c in stmts)
    return Block(start, end, header, body, closed, after)


@dataclass(frozen=True)
class Around:
    """What a budget asks of the braced block around an empty cursor line: whether statements of that block
    follow the cursor (``ends_body`` when none do), and whether the code below is the body of a block whose
    header is missing at the cursor (``opens_below``; None when the block's ``}`` is past the lines read)."""
    ends_body: bool
    opens_below: bool | None


def _after_window(text_after: str, max_lines: int) -> str:
    """The first ``max_lines`` lines of ``text_after`` (no split of a whole file's rest)."""
    at = -1
    for _ in range(max_lines):
        at = text_after.find("\n", at + 1)
        if at < 0:
            return text_after
    return text_after[:at]


@functools.lru_cache(maxsize=32)  # budget_for is asked by several steps of one request with the same text
def _around(language_id: str, before: str, after: str) -> Around | None:
    grammar = grammar_for(language_id)
    if grammar is None:
        return None
    tree = parse_text(grammar, before + after)
    n = _block_node(tree, len(before))
    if n is not None and n.type == "statement_list" and n.parent is not None:
        n = n.parent  # Go: the statements of a `{ }` block sit in a statement_list
    kids = n.children if n is not None else []
    if not kids or kids[0].type != "{":
        return None  # no braced block around the cursor (the file's top level, an indented block)
    b = tree.byte_at(len(before))
    stmts = [s for c in n.named_children for s in (c.named_children if c.type == "statement_list" else [c])]
    after_stmts = [c for c in stmts if not is_comment(c) and c.start_byte >= b]
    if not after_stmts:
        return Around(True, False)
    close = kids[-1]
    if close.type != "}" or close.is_missing:
        return Around(False, None)
    owner = n.parent if n.parent is not None else n
    header = _line_indent(tree.text, tree.offset_at(owner.start_byte))
    cursor_col = len(before[before.rfind("\n") + 1:].expandtabs(4))
    first = _line_indent(tree.text, tree.offset_at(after_stmts[0].start_byte))
    # the `}` that closes the cursor's block sits deeper than that block's header: it closes the block the
    # code below is the body of, whose header is the line to write at the cursor
    closer = _line_indent(tree.text, tree.offset_at(close.start_byte))
    return Around(False, first > cursor_col and closer > header)


def block_around(language_id: str | None, text_before: str, text_after: str,
                 max_lines: int = WINDOW_LINES) -> Around | None:
    """``Around`` the end of ``text_before`` (an empty line's cursor), from a parse of its statement window and
    the first ``max_lines`` lines of ``text_after``: the extent of the block from its braces, not from
    indentation. None: no grammar, or no braced block around the cursor."""
    if grammar_for(language_id) is None:
        return None
    return _around(language_id, statement_window(text_before), _after_window(text_after, max_lines))
