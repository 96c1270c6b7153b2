"""The names in scope at a call site, for the model's argument there (issue 50; fill.py puts them in the
prompt).

jedi's completions at the jump target, kept when they are the calling function's own: its parameters and
the names it binds above the call (at module level: the module's names bound above it). They are what an
argument is most often made of, and a long function binds some of them above the prompt's window (fill.py
leaves out those the window shows). The nearest binding first, at most ``MAX_NAMES``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

log = logging.getLogger(__name__)

MAX_NAMES = 12
SCOPE_WAIT_S = 0.3  # jedi's completion at one call site (the Script of the text is usually parsed already)
_KINDS = ("param", "statement")


def own_names(found: Iterable[tuple[str, str, int | None]], call_line: int, def_line: int) -> list[str]:
    """Of jedi's completions (name, kind, line of its binding in this file; None: another file's), the
    parameters and names bound from ``def_line`` (the enclosing def's, 1 at module level) up to the line
    before ``call_line``, nearest first; keyword arguments (``name=``) and dunder names left out."""
    kept = [(line, name) for name, kind, line in found
            if kind in _KINDS and line is not None and def_line <= line < call_line
            and not name.endswith("=") and not name.startswith("__")]
    out: list[str] = []
    for _, name in sorted(kept, key=lambda x: -x[0]):
        if name not in out:
            out.append(name)
    return out[:MAX_NAMES]


def question(text: str, at: int, def_line: int, *, lead: str = "", path: str | None, analyser: Any
             ) -> Callable[[], list[str]]:
    """The question to run on the analyser's worker thread (``analyser.submit``): ``own_names`` at offset
    ``at`` of ``text`` (the file ``path``), asked with the jump's ``lead`` separator written there (jedi
    completes the token before its position: after ``, `` a new argument starts); [] on any failure."""
    from engine.guidance.jedi_analyser import line_col

    path = os.path.abspath(path) if path else os.path.abspath("untitled.py")
    text, at = text[:at] + lead + text[at:], at + len(lead)
    line, col = line_col(text, at)

    def run() -> list[str]:
        from engine.edits.rename import new_script

        if len(text) > analyser.max_chars:
            return []
        try:
            script = new_script(analyser, text, path)
            if script is None:
                return []
            found = [(c.name, c.type, c.line if c.module_path is not None and os.path.abspath(str(c.module_path))
                      == path else None) for c in script.complete(line, col)]
        except Exception as e:  # jedi on arbitrary text: any failure is "no opinion"
            log.debug("jedi completions failed at %s:%d: %r", path, at, e)
            return []
        return own_names(found, line, def_line)

    return run


def names_in_scope(text: str, at: int, def_line: int, *, lead: str = "", path: str | None, analyser: Any,
                   wait_s: float = SCOPE_WAIT_S) -> list[str]:
    """``question``'s answer, waited for at most ``wait_s`` ([] after that)."""
    fut = analyser.submit(question(text, at, def_line, lead=lead, path=path, analyser=analyser))
    try:
        result: list[str] = fut.result(timeout=wait_s)
    except FutureTimeout:
        fut.cancel()
        return []
    except Exception:
        return []
    return result
