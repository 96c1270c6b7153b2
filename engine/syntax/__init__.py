"""Syntax from tree-sitter for every language Flint has a grammar for (issue 36).

- ``languages``: LSP language id -> grammar, loaded lazily and once; a grammar that does not load is None
  (one warning), never an exception.
- ``tree``: ``SyntaxTree`` (a parse with its text, code point <-> byte offsets) and ``TreeCache``, the
  per-document cache keyed by (uri, version) with incremental reparse.
- ``queries``: the questions post-processing and the context block ask (strings and comments, complete
  statements and blocks, where a text leaves its block, brackets, definitions and their outlines).
- ``adapt``: drop-ins with ``engine/text/statements.py``'s signatures (None: Python, or no grammar).
- ``timing``: ``python -m engine.syntax.timing`` measures parses, incremental edits and queries.

Nothing here imports pygls or lsprotocol, nor the rest of the engine: the text modules call in.
See docs/syntax.md for the call sites each query will replace.
"""

from engine.syntax.languages import (
    EXTENSIONS,
    LANGUAGE_IDS,
    Grammar,
    LanguageRegistry,
    grammar_for,
    language_for_path,
)
from engine.syntax.queries import (
    Block,
    Definition,
    block_is_complete,
    complete_statement_end,
    definitions,
    enclosing_block,
    enclosing_definition,
    first_stray_closer,
    has_error_in,
    in_string_or_comment,
    is_complete,
    open_brackets,
    outline,
    outlines,
    repeats_following_lines,
    scope_end,
    statement_cut_points,
)
from engine.syntax.tree import SyntaxTree, TextEdit, TreeCache, parse

__all__ = [
    "EXTENSIONS", "LANGUAGE_IDS", "Block", "Definition", "Grammar", "LanguageRegistry", "SyntaxTree", "TextEdit", "TreeCache",
    "block_is_complete", "complete_statement_end", "definitions", "enclosing_block", "enclosing_definition",
    "first_stray_closer", "grammar_for", "has_error_in", "language_for_path", "in_string_or_comment", "is_complete", "open_brackets",
    "outline", "outlines", "parse", "repeats_following_lines", "scope_end", "statement_cut_points",
]
