"""The names in scope for a generation, asked once: jedi is asked at the start of the cursor's line with that
line replaced by ``pass`` (the same question for every keystroke on the line, so its answer is cached across them),
and the names the line itself binds before the cursor or in the generated text (a comprehension's or a
``for``'s targets, a lambda's parameters, ``:=``, ``as``, an assignment) are added. A name trigger in the
generated text then costs a cache hit instead of a jedi question per position (each new text is a new
``jedi.Script``: 20-200 ms here). Pure functions.
"""

from __future__ import annotations

import re

_BINDERS = (
    re.compile(r"\bfor\s+([\w\s,()\[\]]+?)\s+in\b"),
    re.compile(r"\blambda\b([^:]*):"),
    re.compile(r"\b(\w+)\s*:="),
    re.compile(r"\bas\s+(\w+)"),
    re.compile(r"\b(?:def|class)\s+(\w+)"),
    re.compile(r"(?:^|\n)[ \t]*([\w \t,]+?)\s*(?<![=!<>])=(?!=)"),
)
_NAME = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = frozenset({"for", "in", "if", "else", "lambda", "and", "or", "not", "is"})


def scope_question(prefix: str, suffix: str) -> tuple[str, int]:
    """(source, offset): the document with the cursor's line replaced by ``pass`` at its indentation, and
    where that starts."""
    ls = prefix.rfind("\n") + 1
    line = prefix[ls:]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    le = suffix.find("\n")
    rest = suffix[le:] if le >= 0 else ""
    # a statement holds the line in its block: blank, the last line of a body would read as the next
    # line's scope (a method's parameters lost)
    return prefix[:ls] + indent + "pass" + rest, ls + len(indent)


def bound_names(text: str) -> tuple[str, ...]:
    """Names ``text`` (the cursor's line before the cursor plus the generated text) binds."""
    out: dict[str, None] = {}
    for rx in _BINDERS:
        for m in rx.finditer(text):
            for name in _NAME.findall(m.group(1)):
                if name not in _KEYWORDS:
                    out[name] = None
    return tuple(out)
