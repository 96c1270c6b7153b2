"""One generation's monitor: the document around the generated text, an analyser and a vocabulary.

The decode loop holds one ``Guide`` per request and asks, with the text generated so far:

- ``allowed(generated)``: the mask for the next token (None: unconstrained) — the name at the end of the
  text, the monitor of the paper;
- ``accepts(generated, token)``: whether one token keeps every name it writes valid, including a name
  that starts inside it: byte-level BPE writes ``self.assertEqual`` as ``self`` + ``.assertEqual`` and
  ``f(obj`` as ``f`` + ``(obj``, so a monitor that only looks at the text before a step never sees those
  names start. Used to verify drafts and to re-pick an argmax (ban it, take the next best).

Where a name starts, the analyser is asked about the text before it plus the document's suffix, at the
name's start: every step of one name asks the same question (the analyser's cache answers). A trigger
that is not ``definite`` (see ``monitor``) is skipped when ``hard_only``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.guidance.monitor import (
    DEFAULT_BUDGET_S,
    Analyser,
    Candidates,
    Trigger,
    TriggerKind,
    literal_names,
    safe_cut,
    trigger,
)
from engine.guidance.scope import bound_names, scope_question
from engine.guidance.trie import TokenTrie, continues, is_name_char, is_name_start

MAX_EVENTS = 32


@dataclass(frozen=True)
class GuideEvent:
    at: int  # offset in the generated text
    why: str  # "name": the mask at a name's start or inside it; "name inside token": a banned pick
    model: str  # the model's token
    chosen: str  # the monitor's


def member_names(names: tuple[str, ...], before: str) -> tuple[str, ...]:
    """Attribute candidates without the dunders every object has (a valid but unwanted way out when the
    model's own guess is banned: ``.__dict__`` for ``.items``), except after ``super().`` (``__init__``);
    all of them when only dunders are known."""
    if before.endswith("super()."):
        return names
    kept = tuple(n for n in names if not (n.startswith("__") and n.endswith("__")))
    return kept or names


class Guide:
    def __init__(self, analyser: Analyser, trie: TokenTrie, texts: Sequence[str | None], *, prefix: str,
                 suffix: str = "", path: str | None = None, version: int | None = None,
                 budget_s: float = DEFAULT_BUDGET_S, hard_only: bool = True,
                 wait_s: float | None = None) -> None:
        self.analyser, self.trie, self.texts = analyser, trie, texts
        self.prefix, self.suffix, self.path, self.version = prefix, suffix, path, version
        self.budget_s, self.hard_only = budget_s, hard_only
        self._cut = safe_cut(prefix)  # the text before it is read once, not at every step
        self._literals = literal_names()
        self._scope = scope_question(prefix, suffix)
        self._line = prefix[prefix.rfind("\n") + 1:]  # the cursor's line before the cursor
        # what this generation's monitor did, for the status and `flint complete --json`
        self.events: list[GuideEvent] = []
        self._asked_at = -1
        self._inner: dict[tuple[int, str, str], tuple[str, ...]] = {}
        # what this generation may still wait for the analyser (default: three names' budgets)
        self.wait_left = 3 * budget_s if wait_s is None else wait_s
        self.asked = 0  # trigger points the analyser was asked about
        self.unanswered = 0  # ... that got no candidates in time (the model decided alone)

    # ---- the two questions ----
    def allowed(self, generated: str) -> np.ndarray | None:
        """The bool mask for the next token after ``prefix + generated``, or None (unconstrained)."""
        text = self.prefix + generated
        trig = self._trigger(text)
        if trig is None:
            return None
        names = self._names(trig, text)
        if not names:
            return None
        return self.trie.for_trigger(trig, names)

    def accepts(self, generated: str, token: int) -> bool:
        """Whether ``token`` after ``prefix + generated`` keeps valid the name it continues and every name
        that starts inside it."""
        s = self.texts[token] if 0 <= token < len(self.texts) else None
        if not s:
            return True  # an end token or a piece of a character: the mask governs those
        text = self.prefix + generated
        trig = self._trigger(text)
        if trig is not None and not trig.glued:
            names = self._names(trig, text)
            free_start = not trig.partial and trig.kind != TriggerKind.MEMBER and not is_name_start(s[0])
            if names and not free_start and not continues(trig.partial + s, names):
                return False
        for k in range(1, len(s)):
            if not (is_name_start(s[k]) and not is_name_char(s[k - 1])):
                continue
            head = text + s[:k]
            inner = self._trigger(head)
            if inner is None or inner.partial or inner.glued:
                continue
            names = self._names(inner, head)
            if names and not continues(s[k:], names):
                return False
        return True

    def inside_ok(self, generated: str, token: int) -> bool:
        """``accepts`` for the names that start inside ``token`` only (the decode loop's mask governs the
        name the token continues); True at once for a token where no name starts after other text."""
        s = self.texts[token] if 0 <= token < len(self.texts) else None
        if not s or not self.trie.inner[token]:
            return True
        for k in range(1, len(s)):
            if not (is_name_start(s[k]) and not is_name_char(s[k - 1])):
                continue
            names = self._inner_names(generated, s[:k])
            if names and not continues(s[k:], names):
                return False
        return True

    def _inner_names(self, generated: str, lead: str) -> tuple[str, ...]:
        """The names valid where a name starts after ``generated + lead`` (empty: no constraint); the
        decode loop tries several tokens with the same lead at one position, so the last few are kept."""
        key = (len(generated), generated[-64:], lead)
        hit = self._inner.get(key)
        if hit is not None:
            return hit
        head = self.prefix + generated + lead
        inner = self._trigger(head)
        names = () if inner is None or inner.partial or inner.glued else self._names(inner, head)
        if len(self._inner) > 64:
            self._inner.clear()
        self._inner[key] = names
        return names

    def prefetch(self, timeout: float = 0.0) -> bool:
        """Ask about the name at the cursor, waiting at most ``timeout`` (0: jedi answers while the prompt is
        prefilled): whether an answer is in."""
        trig = self._trigger(self.prefix)
        if trig is None or trig.kind == TriggerKind.NAME:
            got = self.analyser.names_at(*self._scope, time.monotonic() + timeout, path=self.path, version=None)
            return got is not None
        before = self.prefix[: trig.start] + (" " if trig.glued else "")
        got = self.analyser.names_at(before + self.suffix, len(before), time.monotonic() + timeout,
                                     path=self.path, version=self.version)
        return got is not None

    def record(self, generated: str, model: int, chosen: int, why: str) -> None:
        """The decode loop replaced the model's pick ``model`` by ``chosen`` after ``generated``."""
        if len(self.events) < MAX_EVENTS:
            self.events.append(GuideEvent(len(generated), why, self._text(model), self._text(chosen)))

    def summary(self) -> dict[str, object]:
        """What the monitor did in this generation (JSON-ready)."""
        return {"constrained": len(self.events), "asked": self.asked, "unanswered": self.unanswered,
                "changes": [{"at": e.at, "why": e.why, "model": e.model, "chosen": e.chosen}
                            for e in self.events]}

    def _text(self, token: int) -> str:
        s = self.texts[token] if 0 <= token < len(self.texts) else None
        return s if s is not None else f"<{token}>"

    # ---- parts ----
    def _trigger(self, text: str) -> Trigger | None:
        cut = min(self._cut, len(text))
        trig = trigger(text[cut:])
        if trig is None or (self.hard_only and not trig.definite):
            return None
        return Trigger(trig.kind, trig.partial, trig.start + cut, trig.glued, trig.definite, trig.receiver)

    def _ask(self, source: str, offset: int, new: bool, version: int | None) -> Candidates | None:
        """The analyser's answer, waiting (``new``: the first step of a name) within the generation's wait."""
        wait = min(self.budget_s, self.wait_left) if new else 0.0
        t0 = time.monotonic()
        got = self.analyser.names_at(source, offset, t0 + wait, path=self.path, version=version)
        self.wait_left -= time.monotonic() - t0
        return got

    def _scope_names(self, trig: Trigger, text: str) -> tuple[str, ...]:
        """Names in scope (see engine/guidance/scope.py): the line's scope question plus what the line binds."""
        new = self._asked_at != trig.start
        got = self._ask(*self._scope, new, None)
        if new:
            self._asked_at = trig.start
            self.asked += 1
            self.unanswered += got is None or not got.items
        if got is None or not got.items:
            return ()
        return got.names + bound_names(self._line + text[len(self.prefix):]) + self._literals

    def _names(self, trig: Trigger, text: str) -> tuple[str, ...]:
        """The candidate names for a trigger in ``text`` (empty: the analyser has none in time)."""
        before = text[: trig.start]
        if trig.glued:  # asked right after "return", jedi would complete the keyword itself
            before += " "
        if trig.kind == TriggerKind.NAME:
            return self._scope_names(trig, text)
        new = self._asked_at != trig.start
        # a generation waits for the analyser at most ``budget_s`` per name and ``wait_s`` in all; a name it
        # was late for only looks in the cache at its next steps (the late answer lands there)
        got = self._ask(before + self.suffix, len(before), new, self.version)
        if new:  # one count per name, not per step of it
            self._asked_at = trig.start
            self.asked += 1
            self.unanswered += got is None or not got.items
        if got is None or not got.items:
            return ()
        if trig.kind == TriggerKind.MEMBER:
            return member_names(got.names, before)
        return got.names + self._literals
