"""A small lexer for next edits: names, numbers, strings, comments and the rest, with spans.

Not a parser: enough to tell a literal or a name from code around it and code from strings and comments,
for Python and the C family (``//``, ``/* */``, backquoted strings). Unterminated strings and comments run
to the end of the line (of the text, for a block comment). Lexing starts at a line start the caller
chooses, so a triple-quoted string that began above it is misread; callers start at a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NAME, NUMBER, STRING, COMMENT, OP, SPACE = "name", "number", "string", "comment", "op", "space"

_NUM = r"(?:0[xXoObB][0-9a-fA-F_]+[lLuU]*|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJlLuUfF]*)"
_NAME = r"[^\W\d]\w*"
_SPACE = r"\s+"
_PY_STRING = (r"(?:[rRbBuUfF]{1,2}(?=['\"]))?(?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)"
              r"|\"(?:\\.|[^\"\\\n])*(?:\"|$)|'(?:\\.|[^'\\\n])*(?:'|$))")
_C_STRING = r"(?:\"(?:\\.|[^\"\\\n])*(?:\"|$)|'(?:\\.|[^'\\\n])*(?:'|$)|`(?:\\.|[^`\\])*(?:`|\Z))"
_PY_COMMENT = r"#[^\n]*"
_C_COMMENT = r"//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)"

_HASH_COMMENTS = {"python", "ruby", "shellscript", "shell", "bash", "perl", "r", "yaml", "toml", "makefile",
                  "dockerfile", "elixir", "julia", "nim", "coffeescript", "powershell"}


def _pattern(string: str, comment: str) -> re.Pattern[str]:
    return re.compile(f"(?P<{COMMENT}>{comment})|(?P<{STRING}>{string})|(?P<{NAME}>{_NAME})"
                      f"|(?P<{NUMBER}>{_NUM})|(?P<{SPACE}>{_SPACE})|(?P<{OP}>.)", re.MULTILINE | re.DOTALL)


_PY = _pattern(_PY_STRING, _PY_COMMENT)
_HASH = _pattern(_C_STRING, _PY_COMMENT)
_C = _pattern(_C_STRING, _C_COMMENT)


@dataclass(frozen=True)
class Token:
    kind: str
    start: int
    end: int
    text: str


def pattern_for(language: str | None) -> re.Pattern[str]:
    lang = (language or "python").lower()
    if lang == "python":
        return _PY
    return _HASH if lang in _HASH_COMMENTS else _C


def tokens(text: str, start: int = 0, end: int | None = None, language: str | None = "python") -> list[Token]:
    """The tokens of ``text[start:end]`` (spaces included), with offsets in ``text``."""
    pat = pattern_for(language)
    end = len(text) if end is None else end
    out = []
    for m in pat.finditer(text, start, end):
        kind = m.lastgroup or OP
        out.append(Token(kind, m.start(), m.end(), m.group()))
    return out


def is_literal_sequence(toks: list[Token]) -> bool:
    """Names, numbers and strings, with only dots between them (``os.path``, ``"utf-8"``, ``10``)."""
    if not toks:
        return False
    for i, t in enumerate(toks):
        if t.kind in (NAME, NUMBER, STRING):
            continue
        if t.kind == OP and t.text == "." and 0 < i < len(toks) - 1:
            continue
        return False
    return True
