"""The model's next edit through the local engine (issue 37): build the prompt, generate, parse.

``Engine.complete`` lays every prompt out as fill-in-the-middle; a next-edit prompt is a chat turn the
model continues. Until the engine has an entry for raw prompts, ``generate`` switches the FIM layout off
for the one call (the engine then continues the text as a prefix-only model; its KV rows keep the
completion prompt parked, so the next completion does not start cold). Like every engine call it must run
on the thread that owns the engine. A repository context block set on the engine goes in front of the
chat text; callers clear it for next-edit calls (``set_context(None)``) until the engine has that entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.edits.exact import NextEdit, is_python
from engine.edits.history import Edit
from engine.edits.prompt import Prompt, build_prompt, parse_answer
from engine.types import GenParams


def generate(engine: Any, prompt: Prompt, deadline: float | None = None) -> tuple[str, bool]:
    """The model's answer to ``prompt`` and whether it ended by itself (a stop string or end of turn)."""
    fim = engine.fim
    engine.fim = None
    try:
        outs, _ = engine.complete(prompt.text, "", GenParams(max_tokens=prompt.max_tokens, stop=prompt.stop,
                                                             token_healing=False, deadline=deadline))
    finally:
        engine.fim = fim
    c = outs[0]
    return c.text, c.finish_reason in ("stop", "eos")


def model_next_edit(engine: Any, text: str, edits: Sequence[Edit], *, cursor: int | None = None,
                    path: str | None = None, language: str | None = None,
                    deadline: float | None = None) -> tuple[NextEdit | None, str]:
    """The model's next edit (None unless its answer is a small, well-formed edit) and its raw answer."""
    prompt = build_prompt(text, edits, cursor=cursor, path=path, language=language, model_dir=engine.model_dir)
    answer, complete = generate(engine, prompt, deadline)
    edit = parse_answer(answer, text, prompt.window, edits=edits, python=is_python(path, language),
                        complete=complete)
    return edit, answer
