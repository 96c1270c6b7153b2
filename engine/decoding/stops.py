"""What decoding shares between the greedy row and the batch: the text of generated ids, the stop rules
(``stop_rule``: stop strings, line limits and the settled block), the budget a generation runs with
(``budgeted``), interruption, token healing's constraint and the doubts of a greedy text."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from engine.decoding.prompt import Healer, Prompt
from engine.decoding.tokenizer import HFTokenizer, safe_decode
from engine.text.budget import Budget, budget_for, stop_reached
from engine.text.statements import split_cursor
from engine.types import DOUBT_KEEP, CancelToken, Completion, Doubts, GenParams, stop_cut


def finish_text(tok: HFTokenizer, pr: Prompt, ids: list[int]) -> str:
    """The text of generated ids, without the bytes token healing re-typed."""
    data = tok.decode_bytes(ids)
    if pr.heal:
        if data.startswith(pr.heal):
            data = data[len(pr.heal):]
        elif pr.heal.startswith(data):  # stopped while still re-typing the healed bytes
            data = b""
    return safe_decode(data)


def interrupted(params: GenParams, cancel: CancelToken | None) -> str | None:
    if cancel is not None and cancel.cancelled:
        return "cancelled"
    if params.deadline is not None and time.monotonic() >= params.deadline:
        return "deadline"
    return None


def allowed_ids(tok: HFTokenizer, healer: Healer | None, out: list[int]) -> np.ndarray | None:
    """Token ids the next token must be one of while token healing is not done (None: any)."""
    if healer is None:
        return None
    ids = healer.allowed(tok.decode_bytes(out))
    return np.asarray(ids, dtype=np.int64) if ids else None


def doubts_of(tok: HFTokenizer, pr: Prompt, out: list[int], probs: dict[int, float], shown: int) -> Doubts:
    """(offset, probability) of each token in ``out`` the model chose with probability below
    ``DOUBT_KEEP``: the offset is where the token starts in the text (its first ``shown`` characters)."""
    found: list[tuple[int, float]] = []
    for i in range(len(out)):
        p = probs.get(i)
        if p is None or p >= DOUBT_KEEP:
            continue
        at = len(finish_text(tok, pr, out[:i])) if i else 0
        if at >= shown:
            break
        if not found or found[-1][0] != at:  # a token inside a character keeps the first
            found.append((at, round(p, 4)))
    return tuple(found)


@dataclass(frozen=True)
class Settle:
    """When a block's suggestion at the cursor is settled: the text has gone past what post-processing
    shows for ``budget`` (a line after the statement or below the body has started)."""

    line_prefix: str
    budget: Budget
    language: str | None


def budgeted(prefix: str, suffix: str, params: GenParams) -> tuple[GenParams, Settle | None]:
    """The parameters to generate with and the settled rule for the cursor. ``auto_budget``: the budget
    the context asks for (postprocess.budget_for) replaces max_tokens / max_lines. A generation of more
    than two lines (a block) stops each row once its suggestion is settled, whatever the budget's source:
    one or two lines (a single line, its look-ahead line) stop on their line count already, and without a
    line limit nothing is cut."""
    line_prefix, _ = split_cursor(prefix, suffix)
    shown = params.max_lines - 1 if params.max_lines is not None and params.max_lines > 2 else 8
    budget = budget_for(prefix, suffix, params.language, max_lines=shown)
    if params.auto_budget:
        # multi: +1 line, a block opened at the cursor starts with a line break
        lines = budget.max_lines + (1 if budget.mode == "multi" else 0)
        params = replace(params, max_tokens=budget.max_tokens, max_lines=lines)
    # a caller that sets no line limit (a raw engine call, a reference comparison) gets plain generation
    if budget.kind == "line" or params.max_lines is None or params.max_lines <= 2:
        return params, None
    return params, Settle(line_prefix, budget, params.language)


def stop_rule(text: str, params: GenParams, settle: Settle | None) -> tuple[str | None, str]:
    """``stop_cut``, and a settled block (``Settle``) stops with its complete lines ("stop")."""
    reason, cut = stop_cut(text, params)
    if reason is None and settle is not None and "\n" in cut and \
            stop_reached(cut, settle.line_prefix, settle.budget):
        return "stop", cut[: cut.rfind("\n")]
    return reason, cut


def dedupe(outs: list[Completion]) -> list[Completion]:
    """The completions whose text (trailing blanks aside) differs from every earlier one, in order."""
    seen: set[str] = set()
    res = []
    for c in outs:
        key = c.text.rstrip()
        if key in seen:
            continue
        seen.add(key)
        res.append(c)
    return res
