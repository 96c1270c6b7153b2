"""``repeats_following_lines``: a completion that re-writes the statement below the cursor's line, token by token
(re-exported by ``engine.syntax.queries``)."""

from __future__ import annotations

from engine.syntax.languages import grammar_for
from engine.syntax.nodes import is_comment, leaves
from engine.syntax.tree import SyntaxTree, parse_text

MIN_REPEAT_TOKENS = 4


def _code_tokens(tree: SyntaxTree) -> list[tuple[bytes, int]]:
    """(token text, start byte) of the code tokens, comments left out."""
    return [(tree.source[n.start_byte: n.end_byte], n.start_byte)
            for n in leaves(tree.root) if not is_comment(n)]


def repeats_following_lines(language_id: str | None, completion: str, suffix: str) -> int | None:
    """Offset in ``completion`` of the line where it starts re-writing the code after the cursor's line,
    compared token by token (spacing, line breaks and comments aside): the first statement below, or its
    first ``MIN_REPEAT_TOKENS``+ tokens when the completion stops before its end. Only at a line start
    after the first line. None: no copy, or no grammar. Line-level copies stay ``cut_at_following_lines``'s;
    this one catches the same statement wrapped differently."""
    grammar = grammar_for(language_id)
    nl = suffix.find("\n")
    if grammar is None or nl < 0 or "\n" not in completion:
        return None
    below = suffix[nl + 1:]
    below_tree = parse_text(grammar, below)
    stmt = next((c for c in below_tree.root.named_children if not is_comment(c)), None)
    if stmt is None:
        return None
    target = [t for t, at in _code_tokens(below_tree) if at < stmt.end_byte]
    if len(target) < MIN_REPEAT_TOKENS:
        return None
    tree = parse_text(grammar, completion)
    toks = _code_tokens(tree)
    texts = [t for t, _ in toks]
    src = tree.source
    for i, (_, at) in enumerate(toks):
        line_start = src.rfind(b"\n", 0, at) + 1
        if line_start == 0 or src[line_start:at].strip():
            continue  # not the first token of a line after the first
        got = texts[i: i + len(target)]
        if got == target[: len(got)] and (len(got) == len(target) or len(got) >= MIN_REPEAT_TOKENS):
            return tree.offset_at(line_start)
    return None
