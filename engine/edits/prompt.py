"""The model's next-edit prompt and the parser of its answer (issue 37).

The ask, as one chat turn for an Instruct checkpoint (rendered with the model directory's chat template,
``chat_template.jinja`` or tokenizer_config.json's ``chat_template``; ChatML by hand when jinja2 or the
template is missing):

- the recent edits, oldest first, each as a small line diff (the lines it touched, before and after), so
  the model sees what the user is doing, not only where the file stands (the idea of Zed's Zeta);
- the code around the most likely next site, with an *editable window* between ``<edit>`` and ``</edit>``
  lines and ``<cursor>`` at the cursor; the window is shown as it was *before* the recent edits and as it
  is now when they changed it (Sweep's original/current idea), which shows the pattern to continue in
  place;
- the instruction to rewrite the window with the next edit, changing nothing else.

The assistant's turn is opened with the fence (```` ```python ````), so the model's first token is the
window's text; generation stops at the closing fence (``Prompt.stop``).

``parse_answer`` turns the answer into a ``NextEdit`` only when it is a small, well-formed edit: the
window rewritten with exactly one hunk of at most ``max_lines`` lines differing and at least half of the
window's lines kept (the 0.5B model sometimes answers with other code of the prompt), not empty, not undoing
the user's last edit, and (Python) a file that still parses. Anything else is None: a model that copies
the window, rewrites it wholesale, stops half-way or breaks the file shows nothing.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.edits.exact import NextEdit, parses
from engine.edits.history import Edit

CURSOR = "<cursor>"
EDIT_OPEN = "<edit>"
EDIT_CLOSE = "</edit>"
SYSTEM = ("You are a code editor that predicts the next edit a programmer makes, from the edits they just "
          "made. You answer with code only.")
INSTRUCTION = (f"Rewrite the code between {EDIT_OPEN} and {EDIT_CLOSE} with the next edit the programmer will "
               "most likely make there, following their recent edits. Change only the lines that edit needs and "
               f"copy every other line exactly. Do not write {EDIT_OPEN}, {EDIT_CLOSE} or {CURSOR}. If no edit "
               "is needed, copy the code unchanged.")
WINDOW_BEFORE = 2  # editable lines above the cursor's line
WINDOW_AFTER = 8  # and below it (the next edit is more often below)
CONTEXT_BEFORE = 24  # read-only lines above the window
CONTEXT_AFTER = 12
MAX_EDITS_SHOWN = 4
MAX_DIFF_LINES = 12  # per edit
MAX_CHANGED_LINES = 6  # the answer's one hunk: at most this many lines on either side
CHATML = "<|im_start|>"
LANG_FENCE = {"python": "python", "javascript": "javascript", "typescript": "typescript", "go": "go",
              "rust": "rust", "java": "java", "c": "c", "cpp": "cpp", "csharp": "csharp", "ruby": "ruby"}


@dataclass(frozen=True)
class Window:
    """The editable window: ``text[start:end]`` (whole lines) of the current text, the cursor inside."""

    start: int
    end: int
    cursor: int


@dataclass
class Prompt:
    text: str  # the whole prompt, chat template applied, the assistant's turn opened
    window: Window
    stop: tuple[str, ...] = ("```",)
    max_tokens: int = 256


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _lines_down(text: str, pos: int, n: int) -> int:
    """The start of the line ``n`` lines below the one holding ``pos`` (the text's end when past it)."""
    for _ in range(n + 1):
        nl = text.find("\n", pos)
        if nl < 0:
            return len(text)
        pos = nl + 1
    return pos


def _lines_up(text: str, pos: int, n: int) -> int:
    """The start of the line ``n`` lines above the one holding ``pos``."""
    pos = _line_start(text, pos)
    for _ in range(n):
        if pos == 0:
            break
        pos = _line_start(text, pos - 1)
    return pos


def choose_window(text: str, cursor: int, *, before: int = WINDOW_BEFORE, after: int = WINDOW_AFTER) -> Window:
    """The lines around the cursor: ``before`` above its line, ``after`` below."""
    cursor = max(0, min(cursor, len(text)))
    return Window(_lines_up(text, cursor, before), _lines_down(text, cursor, after), cursor)


def edit_diff(before: str, edit: Edit, max_lines: int = MAX_DIFF_LINES) -> str:
    """One edit as a small line diff: ``@@ line N @@`` then the touched lines, ``-`` before and ``+`` after."""
    after = edit.apply(before)
    lo = _line_start(before, edit.start)
    hi_b = before.find("\n", edit.old_end)
    hi_b = len(before) if hi_b < 0 else hi_b
    hi_a = hi_b + edit.delta
    old_lines = before[lo:hi_b].split("\n")
    new_lines = after[lo:hi_a].split("\n")

    def cut(lines: list[str]) -> list[str]:
        return lines if len(lines) <= max_lines else lines[:max_lines - 1] + ["..."]

    body = [f"-{x}" for x in cut(old_lines)] + [f"+{x}" for x in cut(new_lines)]
    return f"@@ line {edit.line + 1} @@\n" + "\n".join(body)


def history_diffs(text: str, edits: Sequence[Edit], max_edits: int = MAX_EDITS_SHOWN) -> list[str]:
    """The last ``max_edits`` edits as diffs, oldest first (each against the text just before it)."""
    shown = list(edits)[-max_edits:]
    befores = []
    t = text
    for e in reversed(shown):
        t = e.undo(t)
        befores.append(t)
    befores.reverse()
    return [edit_diff(b, e) for b, e in zip(befores, shown, strict=True)]


def _original_window(text: str, window: Window, edits: Sequence[Edit]) -> str | None:
    """The window's lines as they were before the shown edits, when those edits touched it (else None)."""
    t = text
    lo, hi = window.start, window.end
    touched = False
    for e in reversed(list(edits)[-MAX_EDITS_SHOWN:]):
        if e.new_end <= lo and not (e.new_end == lo and e.start == lo):
            lo, hi = lo - e.delta, hi - e.delta
        elif e.start < hi:
            touched = True
            hi = hi - e.delta if hi >= e.new_end else e.old_end
            lo = min(lo, e.start)
        t = e.undo(t)
        lo = _line_start(t, lo)
        nl = t.find("\n", max(lo, hi - 1)) if hi > lo else -1
        hi = len(t) if nl < 0 and hi > lo else (nl + 1 if hi > lo else hi)
    return t[lo:hi] if touched else None


def user_message(text: str, edits: Sequence[Edit], window: Window, *, path: str | None = None,
                 language: str | None = None, context_before: int = CONTEXT_BEFORE,
                 context_after: int = CONTEXT_AFTER) -> str:
    """The user turn (module docstring)."""
    fence = LANG_FENCE.get((language or "python").lower(), "")
    name = os.path.basename(path) if path else "file"
    parts = []
    diffs = history_diffs(text, edits)
    if diffs:
        parts.append(f"My recent edits to {name}, oldest first:\n```diff\n" + "\n".join(diffs) + "\n```")
    original = _original_window(text, window, edits)
    if original is not None and original != text[window.start:window.end]:
        parts.append(f"Before those edits the code to rewrite was:\n```{fence}\n{original.rstrip(chr(10))}\n```")
    top = _lines_up(text, window.start, context_before)
    bottom = _lines_down(text, max(window.start, window.end - 1), context_after) if window.end > window.start \
        else window.end
    inner = text[window.start:window.cursor] + CURSOR + text[window.cursor:window.end]
    code = (text[top:window.start] + EDIT_OPEN + "\n" + inner.rstrip("\n") + "\n" + EDIT_CLOSE + "\n"
            + text[window.end:bottom])
    parts.append(f"The code now ({CURSOR} is my cursor):\n```{fence}\n{code.rstrip(chr(10))}\n```")
    parts.append(INSTRUCTION)
    return "\n\n".join(parts)


def chat_template(model_dir: str | Path | None) -> str | None:
    """The model directory's chat template (chat_template.jinja, else tokenizer_config.json's)."""
    if model_dir is None:
        return None
    d = Path(model_dir)
    f = d / "chat_template.jinja"
    if f.is_file():
        return f.read_text(encoding="utf-8")
    cfg = d / "tokenizer_config.json"
    if cfg.is_file():
        try:
            tpl = json.loads(cfg.read_text(encoding="utf-8")).get("chat_template")
        except (OSError, ValueError):
            return None
        return tpl if isinstance(tpl, str) else None
    return None


def chatml(messages: Sequence[dict[str, str]]) -> str:
    """ChatML (Qwen's format), the assistant's turn opened."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
        "<|im_start|>assistant\n"


def render_chat(messages: Sequence[dict[str, str]], template: str | None) -> str:
    """``messages`` through the model's chat template (jinja2, as transformers renders it), with the
    assistant's turn opened; ChatML when there is no template or no jinja2."""
    if template:
        try:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            ImmutableSandboxedEnvironment = None  # type: ignore[assignment,misc]  # noqa: N806
        if ImmutableSandboxedEnvironment is not None:
            def raise_exception(msg: str) -> None:
                raise ValueError(msg)

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.globals["raise_exception"] = raise_exception
            return env.from_string(template).render(messages=list(messages), tools=None,
                                                    add_generation_prompt=True)
        if CHATML not in template:
            raise ValueError("the model's chat template is not ChatML and jinja2 is missing")
    return chatml(messages)


def build_prompt(text: str, edits: Sequence[Edit], *, cursor: int | None = None, path: str | None = None,
                 language: str | None = None, model_dir: str | Path | None = None, template: str | None = None,
                 window: Window | None = None, max_tokens: int | None = None) -> Prompt:
    """The next-edit prompt for the current ``text`` after ``edits`` (the last one the user's), the cursor
    at ``cursor`` (default: the end of the last edit)."""
    if cursor is None:
        cursor = edits[-1].new_end if edits else 0
    window = window or choose_window(text, cursor)
    fence = LANG_FENCE.get((language or "python").lower(), "")
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": user_message(text, edits, window, path=path, language=language)}]
    tpl = template if template is not None else chat_template(model_dir)
    rendered = render_chat(messages, tpl) + f"```{fence}\n"
    if max_tokens is None:  # the window's own length and room for a few changed lines
        max_tokens = 64 + (window.end - window.start) // 2
    return Prompt(rendered, window, max_tokens=max_tokens)


def _answer_text(answer: str) -> str:
    """The window's new text from the model's answer: up to a closing fence; an opening fence, the
    window's markers and the cursor marker removed."""
    s = answer
    if s.lstrip().startswith("```"):  # the model opened a block of its own
        s = s.lstrip()
        nl = s.find("\n")
        s = "" if nl < 0 else s[nl + 1:]
    end = s.find("```")
    if end >= 0:
        s = s[:end]
    s = s.replace(CURSOR, "")
    lines = [x for x in s.split("\n") if x.strip() not in (EDIT_OPEN, EDIT_CLOSE)]
    return "\n".join(lines)


def parse_answer(answer: str, text: str, window: Window, *, edits: Sequence[Edit] = (), python: bool = True,
                 complete: bool = True, max_lines: int = MAX_CHANGED_LINES, confidence: float = 0.5
                 ) -> NextEdit | None:
    """The model's answer as one small edit of ``text``, or None (module docstring). ``complete``: the
    generation ended on its own (a closing fence or the end of the turn), not on the token limit."""
    if not complete:
        return None
    new_window = _answer_text(answer)
    old_window = text[window.start:window.end]
    if not new_window.strip():
        return None
    if old_window.endswith("\n") and not new_window.endswith("\n"):
        new_window += "\n"
    elif not old_window.endswith("\n"):
        new_window = new_window.rstrip("\n")
    a = old_window.splitlines(keepends=True)
    b = new_window.splitlines(keepends=True)
    hunks = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(hunks) != 1:
        return None
    _, i1, i2, j1, j2 = hunks[0]
    if max(i2 - i1, j2 - j1) > max_lines:
        return None
    if 2 * (len(a) - (i2 - i1)) < len(a):  # most of the window replaced: a rewrite, not an edit
        return None
    if i2 - i1 > 0 and j2 == j1 and i2 == len(a):  # the tail deleted: most likely an answer cut short
        return None
    start = window.start + sum(len(x) for x in a[:i1])
    old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
    n = 0
    while n < min(len(old), len(new)) and old[n] == new[n]:
        n += 1
    k = 0
    while k < min(len(old), len(new)) - n and old[len(old) - 1 - k] == new[len(new) - 1 - k]:
        k += 1
    old, new, start = old[n:len(old) - k], new[n:len(new) - k], start + n
    if not old and not new:
        return None
    if edits:
        last = edits[-1]
        if start == last.start and old == last.new_text and new == last.old_text:
            return None  # undoes the user's edit
    result = text[:start] + new + text[start + len(old):]
    if edits and result == edits[-1].undo(text):
        return None
    if python and not parses(result):
        return None
    return NextEdit(start, start + len(old), old, new, "model", confidence)


# ---- the compact prompt (a region of ~10 lines; the few-shot prefix is the same for every call) ----------

COMPACT_SYSTEM = ("You predict the next edit a programmer makes. Given their last edit as a diff and a region of "
                  "code, rewrite the region with the edit that follows from it, copying every other line exactly. "
                  "If nothing follows, copy the region unchanged.")
COMPACT_BEFORE = 3  # region lines above the cursor's line
COMPACT_AFTER = 6  # and below it: 10 lines in all
COMPACT_CONTEXT = 6  # read-only lines above the region
# one worked example (a made-up one: an argument added to one call is added to its sibling): the prefix of
# every compact prompt, so a model server that keeps the last prompt's KV (llama.cpp, Flint's engine)
# computes it once
_EXAMPLE_USER = ("Last edits in jobs.py, oldest first:\n```diff\n@@ line 12 @@\n-    log.info(\"start %s\", name)\n"
                 "+    log.info(\"start %s\", name, extra=ctx)\n```\n\nRegion:\n```python\n"
                 "def run(name, ctx):\n    log.info(\"start %s\", name, extra=ctx)\n    result = work(name)\n"
                 "    log.info(\"done %s\", name)\n    return result\n```")
_EXAMPLE_ANSWER = ("```python\ndef run(name, ctx):\n    log.info(\"start %s\", name, extra=ctx)\n"
                   "    result = work(name)\n    log.info(\"done %s\", name, extra=ctx)\n    return result\n```")


def compact_messages(text: str, edits: Sequence[Edit], window: Window, *, path: str | None = None,
                     language: str | None = None, context: int = COMPACT_CONTEXT) -> list[dict[str, str]]:
    """The compact next-edit chat: the fixed example, then the user's last two edits as diffs, a few
    read-only lines and the region (no cursor marker: the region is around it)."""
    fence = LANG_FENCE.get((language or "python").lower(), "")
    name = os.path.basename(path) if path else "file"
    diffs = history_diffs(text, edits, max_edits=2)
    top = _lines_up(text, window.start, context)
    parts = [f"Last edits in {name}, oldest first:\n```diff\n" + "\n".join(diffs) + "\n```"]
    if top < window.start:
        parts.append(f"Above the region:\n```{fence}\n{text[top:window.start].rstrip(chr(10))}\n```")
    parts.append(f"Region:\n```{fence}\n{text[window.start:window.end].rstrip(chr(10))}\n```")
    return [{"role": "system", "content": COMPACT_SYSTEM}, {"role": "user", "content": _EXAMPLE_USER},
            {"role": "assistant", "content": _EXAMPLE_ANSWER}, {"role": "user", "content": "\n\n".join(parts)}]


def build_compact_prompt(text: str, edits: Sequence[Edit], *, cursor: int | None = None, path: str | None = None,
                         language: str | None = None, model_dir: str | Path | None = None,
                         template: str | None = None) -> Prompt:
    """The compact next-edit prompt: ``parse_answer`` reads its answer like ``build_prompt``'s."""
    if cursor is None:
        cursor = edits[-1].new_end if edits else 0
    window = choose_window(text, cursor, before=COMPACT_BEFORE, after=COMPACT_AFTER)
    fence = LANG_FENCE.get((language or "python").lower(), "")
    tpl = template if template is not None else chat_template(model_dir)
    rendered = render_chat(compact_messages(text, edits, window, path=path, language=language), tpl) + f"```{fence}\n"
    return Prompt(rendered, window, max_tokens=48 + (window.end - window.start) // 2)
