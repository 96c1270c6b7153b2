"""Prompt building (pure given a tokenizer): FIM or prefix-only, anchors, and token healing.

Token healing: when the cursor sits inside a word, the prefix's last token is usually a fragment the
model would never have produced there ("re" of "return"). We back off that token and constrain the
first generated token to start with its text, so the model re-chooses the whole token.

The tokenizer is engine/decoding/tokenizer.py; the context block's layout in tokens
engine/decoding/layout.py; where a window starts and ends engine/text/window.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.decoding.layout import CONTEXT_LAYOUTS
from engine.decoding.tokenizer import PrefixIndex, Tok


@dataclass(frozen=True)
class Fim:
    prefix: str
    suffix: str
    middle: str


@dataclass
class Prompt:
    ids: list[int]
    heal: bytes = b""  # bytes already typed that the generated text must start with (token healing)
    anchor: tuple[str, str] | None = None  # FIM: (prefix-slot text, suffix), see choose_anchor
    head: int = 0  # leading ids a window cut must keep (BOS, the FIM prefix token, the context block)


def should_heal(prefix: str) -> bool:
    """Heal when the cursor follows a word character or an operator (not after whitespace)."""
    return bool(prefix) and not prefix[-1].isspace()


# Most of the prefix goes before the suffix (FIM's usual prefix slot); the text typed since the *anchor*
# goes after the middle token, as if the model had written it itself. Typing then only appends tokens
# after the cached suffix: a keystroke costs its own token(s), not a re-run of the suffix (which PSM order
# puts after the prefix). A new anchor inside a line goes FRESH_MIDDLE_CHARS back (at a line start), not at
# the cursor's line: with a middle between FRESH_MIDDLE_CHARS and MAX_MIDDLE_CHARS long the model completes
# more held-out lines exactly than with the cursor's line alone in the same window (scripts/bench_layout.py,
# docs/benchmarks/layout.md).
# The anchor is kept until the middle passes MAX_MIDDLE_CHARS: every re-anchor re-runs the suffix and the
# fresh middle (slow on a slow CPU), so it happens once per MAX_MIDDLE_CHARS - FRESH_MIDDLE_CHARS typed
# characters at most.
FRESH_MIDDLE_CHARS = 480
MAX_MIDDLE_CHARS = 1440


AUTO_CLOSERS = frozenset(")]}\"'`")


def choose_anchor(prefix: str, suffix: str, previous: tuple[str, str] | None,
                  max_middle: int = MAX_MIDDLE_CHARS, fresh_middle: int = FRESH_MIDDLE_CHARS) -> tuple[int, str]:
    """(anchor, suffix for the prompt): how many characters of ``prefix`` go into the FIM prefix slot (the
    rest is the typed-so-far middle), and the suffix text the prompt carries.

    ``previous`` is the (prefix-slot text, suffix) the KV cache holds. It is kept while the new prompt
    extends it: the prefix still starts with the slot's text, the middle is short, and the suffix is the
    same — or the same after a few characters an editor auto-closes (typing ``(`` inserts ``)`` after the
    cursor: the prompt keeps its suffix; post-processing merges the closers). Otherwise the new anchor is,
    inside a line, the start of the line ``fresh_middle`` characters back (the prefix's start if it is
    shorter), and on a blank line the cursor's line (a line boundary: the same cursor state always gives the
    same prompt)."""
    if previous is not None:
        head, prev_suffix = previous
        if prefix.startswith(head) and len(prefix) - len(head) <= max_middle and suffix.endswith(prev_suffix):
            extra = suffix[: len(suffix) - len(prev_suffix)]
            if len(extra) <= 4 and all(c in AUTO_CLOSERS for c in extra):
                return len(head), prev_suffix
    nl = prefix.rfind("\n")
    if prefix[nl + 1:].strip():  # inside a line (what was measured); at a line's start the model, "having
        # written" the lines before, tends to open a docstring where code was due
        back = len(prefix) - fresh_middle
        nl = prefix.rfind("\n", 0, back) if back > 0 else -1
    anchor = nl + 1
    if len(prefix) - anchor > max_middle:  # a very long line: anchor inside it
        anchor = len(prefix) - max_middle // 2
    return anchor, suffix


def build_prompt(tok: Tok, prefix: str, suffix: str, fim: Fim | None, *, bos_id: int | None = None,
                 heal: bool = True, anchor: int | None = None, context: Sequence[int] = (),
                 layout: str = "repository") -> Prompt:
    """FIM: ``<prefix> P[:anchor] <suffix> S <middle> P[anchor:]`` (``anchor`` None: the whole prefix in
    the prefix slot, plain PSM). Prefix-only models: the prefix. With ``heal``, the last token of the text
    the model continues is backed off and the generation must reproduce its bytes (see Healer).
    ``context``: the block's ids, a stable prefix whose KV every keystroke reuses, kept by a window cut
    (``Prompt.head``). ``layout`` "repository" (context_ids): right after BOS; "comments" (comment_ids):
    right after the FIM prefix token, before the file text (prefix-only models: right after BOS)."""
    assert layout in CONTEXT_LAYOUTS, layout
    bos = [bos_id] if bos_id is not None else []
    inner = list(context) if layout == "comments" and fim is not None else []  # after the FIM prefix token
    ids: list[int] = bos + ([] if inner else list(context))
    head = len(ids) + (1 + len(inner) if fim is not None else 0)
    flow = prefix
    if fim is not None:
        fp, fs, fm = (tok.special_id(fim.prefix), tok.special_id(fim.suffix), tok.special_id(fim.middle))
        assert fp is not None and fs is not None and fm is not None, "FIM tokens missing from the tokenizer"
        cut = len(prefix) if anchor is None else max(0, min(anchor, len(prefix)))
        slot, flow = prefix[:cut], prefix[cut:]
        slot_ids = tok.encode(slot) if slot else []
        healed = b""
        if anchor is None and heal and slot_ids and should_heal(slot):  # PSM: only a partial word heals
            last = tok.token_bytes(slot_ids[-1])
            if last and b"\n" not in last:
                healed, slot_ids = last, slot_ids[:-1]
        ids = ids + [fp] + inner + slot_ids + [fs] + (tok.encode(suffix) if suffix else []) + [fm]
        if anchor is None:
            return Prompt(ids, healed, head=head)
    flow_ids = tok.encode(flow) if flow else []
    healed = b""
    if heal and flow_ids:
        # the text after the prompt's last special token reads as the model's own output: its last token
        # is whatever the tokenizer cut at the cursor ("re" of "return", a trailing space, a newline and
        # indentation the next word would absorb), so it is always backed off and re-chosen
        healed = tok.token_bytes(flow_ids[-1])
        flow_ids = flow_ids[:-1]
        if len(healed) > 1 and healed[-1:] in (b" ", b"\t") and not healed.strip():
            # indentation (the cursor on an emptied indented line): byte-level BPE writes `        x` as
            # `       ` + ` x` (the last blank goes with the word), so only that last blank is re-chosen. Healing
            # the whole run lets the model pick a run of blanks no text tokenizes to, after which it keeps
            # writing blanks until its token limit
            flow_ids = flow_ids + tok.encode(healed[:-1].decode("utf-8"))
            healed = healed[-1:]
    return Prompt(ids + flow_ids, healed, head=head)


class Healer:
    """Token healing over several tokens: the generated bytes must start with ``heal``. While they do not
    yet cover it, the next token must either start with the rest of it or be a prefix of that rest."""

    def __init__(self, index: PrefixIndex, heal: bytes) -> None:
        self.index = index
        self.heal = heal

    def allowed(self, produced: bytes) -> list[int] | None:
        """Token ids allowed next after ``produced`` bytes, or None when healing is done."""
        if len(produced) >= len(self.heal):
            return None
        rest = self.heal[len(produced):]
        return self.index.starting_with(rest) + self.index.prefixes_of(rest)
