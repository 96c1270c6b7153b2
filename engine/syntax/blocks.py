"""The innermost block around a position in a parsed document (``enclosing_block``): its extent, the
indentation of its header and first statement, whether it is closed and whether statements follow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.syntax.nodes import ancestors, is_comment
from engine.syntax.tree import SyntaxTree
from engine.syntax.window import indent_width


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


def enclosing_block(tree: SyntaxTree, offset: int) -> Block | None:
    """The innermost block (a brace-delimited body, a Python indented block) containing ``offset``."""
    b = tree.byte_at(offset)
    code = len(tree.source[:b].rstrip())
    col = len(tree.text[tree.text.rfind("\n", 0, offset) + 1: offset].expandtabs(4))
    n = _indented_block_before(tree, code, col) if code < b else None
    if n is None:
        n = next((a for a in ancestors(tree.root.descendant_for_byte_range(b, b))
                  if _is_block(a) and a.start_byte < b <= a.end_byte), None)
    if n is None:
        return None
    owner = n.parent if n.parent is not None else n
    start, end = tree.offset_at(n.start_byte), tree.offset_at(n.end_byte)
    header = _line_indent(tree.text, tree.offset_at(owner.start_byte))
    stmts = [c for c in n.named_children if not is_comment(c)]
    body = _line_indent(tree.text, tree.offset_at(stmts[0].start_byte)) if stmts else None
    kids = n.children
    closed = not (kids and (kids[-1].is_missing or kids[0].type == "{" and kids[-1].type != "}"))
    after = any(c.start_byte >= b for c in stmts)
    return Block(start, end, header, body, closed, after)
