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

import numpy as np

from engine.guidance.monitor import (
    DEFAULT_BUDGET_S,
    Analyser,
    Trigger,
    TriggerKind,
    literal_names,
    safe_cut,
    trigger,
)
from engine.guidance.trie import TokenTrie, continues, is_name_char, is_name_start


class Guide:
    def __init__(self, analyser: Analyser, trie: TokenTrie, texts: Sequence[str | None], *, prefix: str,
                 suffix: str = "", path: str | None = None, version: int | None = None,
                 budget_s: float = DEFAULT_BUDGET_S, hard_only: bool = True) -> None:
        self.analyser, self.trie, self.texts = analyser, trie, texts
        self.prefix, self.suffix, self.path, self.version = prefix, suffix, path, version
        self.budget_s, self.hard_only = budget_s, hard_only
        self._cut = safe_cut(prefix)  # the text before it is read once, not at every step
        self._literals = literal_names()

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

    # ---- parts ----
    def _trigger(self, text: str) -> Trigger | None:
        cut = min(self._cut, len(text))
        trig = trigger(text[cut:])
        if trig is None or (self.hard_only and not trig.definite):
            return None
        return Trigger(trig.kind, trig.partial, trig.start + cut, trig.glued, trig.definite, trig.receiver)

    def _names(self, trig: Trigger, text: str) -> tuple[str, ...]:
        """The candidate names for a trigger in ``text`` (empty: the analyser has none in time)."""
        before = text[: trig.start]
        if trig.glued:  # asked right after "return", jedi would complete the keyword itself
            before += " "
        got = self.analyser.names_at(before + self.suffix, len(before), time.monotonic() + self.budget_s,
                                     path=self.path, version=self.version)
        if got is None or not got.items:
            return ()
        names = got.names
        if trig.kind != TriggerKind.MEMBER:
            names = names + self._literals
        return names
