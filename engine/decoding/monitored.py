"""A monitor in the greedy row (issue 35): where static analysis knows which names are valid next, the
pick comes from the full head restricted to the tokens that continue one of them; a token that starts a
name inside itself (``.attr``, ``(obj``) is checked and, when the name is invalid, banned and the next best
taken. Decoding does not import the analysers: the row sees a ``Monitor`` (engine/guidance/guide.py's
``Guide`` is one). Nothing here runs without a monitor, so the output without one is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from engine.decoding.sampling import pick_probs
from engine.decoding.tokenizer import safe_decode

if TYPE_CHECKING:
    from engine.decoding.tokenizer import HFTokenizer
    from engine.model.runtime import LMHead

# next-best tokens tried when a pick names something that does not exist (a valid ``.attr`` may rank far
# down: the model guessed another name), then the model's own; the monitor answers repeats from a cache
BAN_TRIES = 64


class Monitor(Protocol):
    def allowed(self, generated: str) -> np.ndarray | None:
        """A bool mask over the vocabulary for the token after ``generated`` (None: unconstrained)."""
        ...

    def inside_ok(self, generated: str, token: int) -> bool:
        """Whether every name that starts inside ``token`` (after ``generated``) may be valid."""
        ...

    def record(self, generated: str, model: int, chosen: int, why: str) -> None:
        """The monitor changed the model's pick ``model`` to ``chosen`` after ``generated``."""
        ...


def raw_text(tok: HFTokenizer, ids: list[int]) -> str:
    """The generated text as the document reads it (bytes token healing re-types included)."""
    return safe_decode(tok.decode_bytes(ids))


def constrained_ids(mask: np.ndarray | None, heal: np.ndarray | None) -> np.ndarray | None:
    """The ids the next pick must be one of: the monitor's mask within healing's ids (healing alone when
    they share none: the monitor then has no opinion); None when the monitor has none."""
    if mask is None:
        return None
    ids = np.flatnonzero(mask).astype(np.int64)
    if heal is not None:
        both = np.intersect1d(ids, heal)
        return both if both.size else None
    return ids if ids.size else None


def sampled_pick(monitor: Monitor | None, tok: HFTokenizer, out: list[int], heal: np.ndarray | None,
                 logits: np.ndarray, sample: Callable[[np.ndarray, np.ndarray | None], int]) -> int:
    """A sampled variant row's next token (engine/decoding/batch.py): ``sample(logits, allowed)`` within
    the monitor's mask (and healing's ids); a token that starts an invalid name inside itself is sampled
    again among the ``BAN_TRIES`` best tokens the monitor accepts (none: the first sample stands)."""
    if monitor is None:
        return sample(logits, heal)
    text = raw_text(tok, out)
    ids = constrained_ids(monitor.allowed(text), heal)
    allowed = heal if ids is None else ids
    first = sample(logits, allowed)
    if monitor.inside_ok(text, first):
        return first
    lg = np.asarray(logits, dtype=np.float32)
    pool = allowed if allowed is not None else np.argpartition(-lg, BAN_TRIES)[:BAN_TRIES]
    pool = pool[pool < lg.shape[0]]
    pool = pool[np.argsort(-lg[pool], kind="stable")[:BAN_TRIES]]
    ok = np.asarray([i for i in pool.tolist() if monitor.inside_ok(text, i)], dtype=np.int64)
    if not ok.size:
        return first
    chosen = sample(logits, ok)
    monitor.record(text, first, chosen, "name inside token")
    return chosen


def masked_pick(full: LMHead, row: np.ndarray, allowed: np.ndarray) -> tuple[int, float, int]:
    """(the best allowed token, its probability among the allowed ones, the model's free choice) from the
    full head's logits for one hidden row."""
    lg = full(row.reshape(1, -1))[0]
    allowed = allowed[allowed < lg.shape[0]]
    sub = lg[allowed]
    j = int(np.argmax(sub))
    return int(allowed[j]), float(pick_probs(sub[None, :], np.asarray([j]))[0]), int(np.argmax(lg))


def checked_pick(full: LMHead, row: np.ndarray, monitor: Monitor, text: str, tok: int,
                 allowed: np.ndarray | None) -> tuple[int, float | None]:
    """``tok`` when the monitor accepts the names starting inside it (probability None: unchanged), else
    the full head's next best it accepts (within ``allowed``); after ``BAN_TRIES`` the model's own."""
    if monitor.inside_ok(text, tok):
        return tok, None
    lg = np.array(full(row.reshape(1, -1))[0], dtype=np.float32)
    if allowed is not None:
        keep = np.full(lg.shape, -np.inf, dtype=np.float32)
        ids = allowed[allowed < lg.shape[0]]
        keep[ids] = lg[ids]
        lg = keep
    k = min(BAN_TRIES + 1, lg.shape[0] - 1)
    top = np.argpartition(-lg, k)[:k]
    for cur in top[np.argsort(-lg[top], kind="stable")]:
        cur = int(cur)
        if cur == tok or not np.isfinite(lg[cur]):
            continue
        if monitor.inside_ok(text, cur):
            monitor.record(text, tok, cur, "name inside token")
            return cur, float(pick_probs(lg[None, :], np.asarray([cur]))[0])
    return tok, None
