"""What goes at a jump target: the model's argument for a parameter added without a default (issue 50).

signature.py finds *where* each call needs the new argument (a jump target with its ``Fill``: the
separators and, when it must be passed by name, ``name=``); the model writes *what*: a fill-in-the-middle
completion of that spot, the call's argument list being the middle. The prompt (``fill_prompt``) is the
text around the call with the separators already written, so the middle is one argument; the edited
def's signature goes in front of the prefix when the window does not show it (the model needs the new
parameter's name and place, and that is the user's edit). ``argument`` cuts the model's text to one
argument and says how sure the model was: the lowest probability of the tokens that wrote it (the
completion path's doubts, engine/types.py ``Doubts``). Below ``FLOOR`` only the jump is offered.

Pure functions on texts, except ``engine_fill`` (one engine call: it must run on the thread that owns
the engine).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine.edits.bound import checked, own
from engine.edits.common import NextEdit, module_tree
from engine.types import Doubts, GenParams

FLOOR = 0.4  # the lowest token probability of an argument that is still shown (below: the jump alone; tuned:
# docs/benchmarks/archive/next_edit_signatures.pairs12.md, its floor sweep)
# the fill's window: a cold prompt pass of 2,000 characters took 1.6-4 s on the shared 2-core machine
# (docs/benchmarks/archive/next_edit_signatures.pairs12.md), long for an argument the user waits to see; its
# start is aligned to ALIGN_CHARS so that nearby call sites share it and the engine reuses the KV computed
# for the one before
# an argument analysis wrote where the model was unsure: the calling function's own name spelled as the new
# parameter (bound.own); shown like a model's argument at this confidence
OWN_NAME_CONFIDENCE = 0.9
MAX_PREFIX_CHARS = 1200
MAX_SUFFIX_CHARS = 200
ALIGN_CHARS = 512
MAX_HEADER_LINES = 12
MAX_ARGUMENT_CHARS = 120
CALLER_HEADER = True  # the calling function's header before a window that starts inside it (fill_prompt)
# the caller's names in scope that the window does not show, as a comment (fill_prompt): off until the tuning
# half's sweep says otherwise (scripts/bench_next_edit_signatures.py --scope on)
SCOPE_NAMES = False
FILL_PARAMS = GenParams(max_tokens=16, max_lines=1, language="python")
_CLOSE = {")": "(", "]": "[", "}": "{"}


def header(text: str, name_at: int) -> str:
    """The signature of the def whose name starts at ``name_at``: from its ``def`` line to the line that
    closes its parameter list ("" when that is not found within ``MAX_HEADER_LINES``)."""
    start = text.rfind("\n", 0, name_at) + 1
    open_at = text.find("(", name_at)
    if open_at < 0:
        return ""
    close = _closing(text, open_at)
    if close is None:
        return ""
    end = text.find("\n", close)
    out = text[start:len(text) if end < 0 else end].replace("\r", "")
    return out if out.count("\n") < MAX_HEADER_LINES else ""


def _closing(text: str, open_at: int) -> int | None:
    """The offset of the bracket closing ``text[open_at]`` (strings and comments skipped)."""
    depth, i, n = 0, open_at, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _string_end(text, i)
            continue
        if ch == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _string_end(text: str, i: int) -> int:
    """The offset after the string literal starting at ``text[i]`` (a quote); the end of text if open."""
    q = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j = i + len(q)
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text.startswith(q, j):
            return j + len(q)
        if len(q) == 1 and text[j] == "\n":
            return j
        j += 1
    return len(text)


def fill_prompt(text: str, jump: NextEdit, signature: str, *, max_prefix: int = MAX_PREFIX_CHARS,
                max_suffix: int = MAX_SUFFIX_CHARS, def_at: int = -1, caller: bool | None = None,
                names: Sequence[str] = ()) -> tuple[str, str]:
    """(prefix, suffix) of the model's prompt for ``jump``'s argument: the text before the target (from a
    line start at most ``max_prefix`` back) with the lead separator and ``name=`` written, and the trail
    separator with the text after it. ``signature`` (the edited def's, ``header``) goes in front, as a
    stub, unless the prefix holds it (``def_at``: the def's offset in ``text``, -1 unknown); with
    ``caller`` (None: ``CALLER_HEADER``), the header of the function holding the call goes before the
    window when the window starts below it; ``names`` (scope.py: the caller's own names bound above the
    call), those the window does not hold, as a comment line before it."""
    at, f = jump.range_start, jump.fill
    caller = CALLER_HEADER if caller is None else caller
    assert f is not None
    aligned = max(0, at - max_prefix) // ALIGN_CHARS * ALIGN_CHARS
    start = text.find("\n", aligned)
    start = 0 if aligned == 0 or start < 0 or start >= at else start + 1
    prefix = text[start:at] + f.lead + (f.keyword + "=" if f.keyword else "")
    above = ""
    if caller:
        # the function the call is in, when the window starts inside it below its def: its parameters
        # are the names most often passed on (the window's first lines stand for the elided rest)
        enclosing = _enclosing_def(text, at)
        if enclosing is not None and enclosing < start and not (enclosing <= def_at < start + 1):
            head = header(text, text.find("def", enclosing) + 4)
            if head:
                indent = len(head) - len(head.lstrip())
                above = head + "\n" + " " * (indent + 4) + "...\n"
    # the names bound above the window, where the model can see no other trace of them
    unseen = [n for n in names if not re.search(rf"(?<!\w){re.escape(n)}(?!\w)", above + text[start:at])]
    if unseen:
        line = text[text.rfind("\n", 0, at) + 1:at]
        above += line[:len(line) - len(line.lstrip())] + "# in scope: " + ", ".join(unseen) + "\n"
    prefix = above + prefix
    if signature and not (start <= def_at < at):
        stub = textwrap.dedent(signature)
        # the body under the last def or class line (a class's stub: its fields, or its __init__'s header)
        last = next((x for x in reversed(stub.split("\n")) if x.lstrip().startswith(("def ", "async def ", "class "))),
                    "")
        prefix = stub + "\n" + " " * (len(last) - len(last.lstrip()) + 4) + "...\n\n\n" + prefix
    suffix = f.trail + text[at:at + max_suffix]
    return prefix.replace("\r\n", "\n"), suffix.replace("\r\n", "\n")


def _enclosing_def(text: str, at: int) -> int | None:
    """The offset of the line of the innermost ``def`` holding offset ``at`` (by indentation: the nearest
    def line above indented less than every non-blank line between it and ``at``); None at module level."""
    line_start = text.rfind("\n", 0, at) + 1
    line = text[line_start:at]
    least = len(line) - len(line.lstrip()) if line.strip() else None
    end = line_start
    while end > 0:
        start = text.rfind("\n", 0, end - 1) + 1
        ln = text[start:end - 1] if end - 1 >= start else ""
        body = ln.lstrip()
        if body and not body.startswith(("#", ")", "]", "}")):  # (a closing bracket: a def's last line)
            indent = len(ln) - len(body)
            if least is None or indent < least:
                if body.startswith(("def ", "async def ")):
                    return start
                if indent == 0:
                    return None  # a class or module-level statement holds it, no function
                least = indent
        end = start
    return None


def _cut(raw: str) -> tuple[int, bool]:
    """Where one argument ends in ``raw`` (the model's text after the target) and whether something ended
    it there (a comma or closing bracket of the call, a line break) rather than the text running out."""
    depth, i = 0, 0
    while i < len(raw):
        ch = raw[i]
        if ch in "\"'":
            end = _string_end(raw, i)
            if end >= len(raw) and not raw.endswith(raw[i]):
                return len(raw), False  # an open string
            i = end
            continue
        if ch == "\n" or (depth == 0 and (ch == "," or ch in _CLOSE)):
            return i, True
        if ch in "([{":
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        i += 1
    return len(raw), False


def single_argument(arg: str, name: str = "") -> bool:
    """Is ``arg`` one argument expression (or ``name=`` one, the parameter's own keyword)?"""
    if not arg or len(arg) > MAX_ARGUMENT_CHARS or "\n" in arg or arg.strip() == "...":
        return False
    try:
        tree = ast.parse(f"f({arg})", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    call = tree.body
    if not isinstance(call, ast.Call):
        return False
    if len(call.args) == 1 and not call.keywords:
        return not isinstance(call.args[0], ast.Starred)
    return not call.args and len(call.keywords) == 1 and bool(name) and call.keywords[0].arg == name


def argument(raw: str, doubts: Doubts = (), finish_reason: str = "eos", *, name: str = "") -> tuple[str, float]:
    """The argument the model wrote (``raw``: its text at the target) and the lowest probability of the
    tokens that wrote it; ("", 0.0) when it is not one well-formed argument (cut off, two arguments, a
    statement). ``name``: a keyword accepted as ``name=value`` (the parameter's, where no argument follows
    and the prompt did not write ``name=`` already)."""
    end, ended = _cut(raw)
    if not ended and finish_reason not in ("eos", "stop"):
        return "", 0.0  # the token limit or the deadline cut it: the rest of the expression is unknown
    arg = raw[:end].strip()
    if not single_argument(arg, name):
        return "", 0.0
    return arg, min((p for off, p in doubts if off < end), default=1.0)


def answer(jump: NextEdit, raw: str, doubts: Doubts = (), finish_reason: str = "eos",
           floor: float = FLOOR, after: str = "", text: str = "") -> NextEdit:
    """``jump`` filled with the model's text at it (``argument``, then ``filled``). ``after``: the text
    after the target: an argument that only repeats the one standing there is none (a parameter added in
    front of ``verbose`` drew ``verbose`` from the model, which copies what it sees next). ``text``: the
    document the jump's offsets are in: an argument reading a name unbound there is none, or its qualified
    form; where the model wrote nothing at or above the floor, the calling function's own name spelled as the
    parameter is the argument (bound.py)."""
    f = jump.fill
    assert f is not None
    name = jump.note if not f.keyword and not f.trail else ""
    arg, p = argument(raw, doubts, finish_reason, name=name)
    if arg and f.trail and _repeats(arg, after):
        arg, p = "", 0.0
    if text:
        tree, line = module_tree(text), text.count("\n", 0, jump.range_start) + 1
        if arg:
            arg = checked(arg, tree, line, jump.note)
            p = p if arg else 0.0
        if (not arg or p < floor) and tree is not None and jump.note and own(tree, line, jump.note) \
                and not (f.trail and _repeats(jump.note, after)):
            arg, p = jump.note, OWN_NAME_CONFIDENCE
    return filled(jump, arg, p, floor)


def _repeats(arg: str, after: str) -> bool:
    rest = after.lstrip()
    return rest.startswith(arg) and rest[len(arg):].lstrip()[:1] in (",", ")")


def filled(jump: NextEdit, arg: str, confidence: float, floor: float = FLOOR) -> NextEdit:
    """``jump`` with the model's answer: its text when at or above ``floor``, else none (the jump alone);
    the confidence is kept either way (the model was asked)."""
    assert jump.fill is not None
    return replace(jump, fill=replace(jump.fill, text=arg if arg and confidence >= floor else "",
                                      confidence=confidence))


def engine_fill(engine: Any, text: str, jump: NextEdit, signature: str, *, def_at: int = -1,
                deadline: float | None = None, floor: float = FLOOR, names: Sequence[str] = ()
                ) -> tuple[NextEdit, str]:
    """``jump`` filled by ``engine`` (the facade of engine/engine_api.md) and the model's raw text. The
    server runs the same prompt through its completion worker instead (lsp_server/nextedit/fills.py)."""
    prefix, suffix = fill_prompt(text, jump, signature, def_at=def_at, names=names)
    outs, _ = engine.complete(prefix, suffix, replace(FILL_PARAMS, deadline=deadline))
    c = outs[0]
    return answer(jump, c.text, c.doubts, c.finish_reason, floor, after=text[jump.range_start:], text=text), c.text


def def_line(text: str, at: int) -> int:
    """The 1-based line of the innermost def holding offset ``at`` (1 at module level): where the caller's own
    names start (scope.py)."""
    d = _enclosing_def(text, at)
    return 1 if d is None else text.count("\n", 0, d) + 1
