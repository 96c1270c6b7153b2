"""Reading a tree-sitter tree: which nodes are strings and comments, the code tokens in order (a string
or comment as one token, the code of its interpolations opened up), a node's ancestors. Shared by
``queries`` and ``definitions``; node types differ per grammar, the names here cover the main ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# ---- node classes ----------------------------------------------------------------------------------------
STRING_TYPES = frozenset({
    "string", "template_string", "regex", "char_literal", "character_literal", "rune_literal", "heredoc",
    "heredoc_body", "nowdoc", "text_block", "system_lib_string", "encapsed_string", "string_literal",
    "raw_string_literal", "interpreted_string_literal", "concatenated_string",
})
# code inside a string: `${x}` (JS/TS), f"{x}" (Python), "#{x}" (Ruby), $"{x}" (C#), "${x}" (Kotlin)
CODE_IN_STRING = frozenset({"template_substitution", "interpolation", "interpolated_expression",
                             "interpolated_identifier"})
QUOTE_TOKENS = frozenset({'"', "'", "`", '"""', "'''", "string_start"})
OPENERS = {"(": ")", "[": "]", "{": "}", "${": "}", "#{": "}"}
CLOSERS = frozenset({")", "]", "}"})
MATCH = {")": "([", "]": "[", "}": "{$#"}  # a closer's possible openers, by the opener's first character


_DO_BODY = re.compile(rb"(?:^|[^\w$])do\s*$")


def closer_for(source: bytes, opener: str, at: int) -> str:
    """What closes ``opener`` (at byte ``at``) for the parse: a `do {` body's `}` needs its `while (...)`, else
    the whole do-statement is an error and nothing typed inside it would ever be complete."""
    if opener == "{" and _DO_BODY.search(source[max(0, at - 40):at]):
        return "} while (0)"
    return OPENERS[opener]


def is_string(node: Any) -> bool:
    t = node.type
    return bool(node.is_named) and (t in STRING_TYPES or t.endswith(("string_literal", "_string")))


def is_comment(node: Any) -> bool:
    return "comment" in node.type


@dataclass(frozen=True)
class _Whole:
    """A string with interpolations, yielded whole after their tokens."""
    node: Any

    @property
    def end_byte(self) -> int:
        return int(self.node.end_byte)


def leaves(node: Any, lo: int = 0, hi: int | None = None, balanced_before: int = 0) -> Iterator[Any]:
    """Leaves overlapping bytes [lo, hi) in order, a string or comment as one leaf (its interpolations
    opened up), MISSING and zero-width leaves skipped. Iterative: deep trees do not recurse.
    ``balanced_before``: a subtree without errors that ends by that byte is skipped whole (for a bracket walk:
    a parsed node's brackets close inside it, so only the spine down to the cursor tells what is open)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, _Whole):
            if n.end_byte > lo and (hi is None or n.node.start_byte < hi):
                yield n.node
            continue
        if n.end_byte <= lo and n.end_byte != n.start_byte or (hi is not None and n.start_byte >= hi):
            continue
        if n.is_missing:
            continue
        if n.end_byte <= balanced_before and n.child_count > 0 and not n.has_error and n is not node:
            continue
        if n.child_count == 0 or is_comment(n):
            if n.end_byte > n.start_byte:
                yield n
            continue
        if is_string(n):
            subs = [c for c in n.children if c.type in CODE_IN_STRING]
            if not subs:
                yield n
                continue
            # the code of its interpolations, then the string itself (its text between them is no code)
            stack.append(_Whole(n))
            stack.extend(reversed(subs))
            continue
        stack.extend(reversed(n.children))


def ancestors(node: Any) -> Iterator[Any]:
    while node is not None:
        yield node
        node = node.parent
