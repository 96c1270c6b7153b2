"""The simulated user of bench_replay: typing rhythm, what Enter and Tab insert, when a ghost is read, and the records
a replay keeps per keystroke, per file and per configuration. Pure: no server, no clock of its own."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Typist:
    """Timing of the simulated user (seconds). Accepting (Tab after ``reaction_s``) and Enter (perfect
    auto-indent) are the same for every typist; only the rhythm and how a file is entered differ."""

    name: str
    key_s: float = 1 / 8
    jitter: float = 0.3  # each interval is key_s * uniform(1 - jitter, 1 + jitter)
    enter_pause_s: float = 0.0  # after each Enter
    word_pause_s: float = 0.0  # with probability pause_p after a space or , ( = :
    pause_p: float = 0.0
    reaction_s: float = 0.3  # a suggestion must have been visible this long before Tab
    open_then_type_s: float | None = None  # None: ask at the cursor first and wait for that generation
    # after didOpen, say where the cursor is (flint/didMoveCursor, as Flint's VS Code and Neovim clients do);
    # an editor without Flint's client (JetBrains through LSP4IJ) does not
    tells_cursor: bool = True

    def interval(self, rng: random.Random, typed: str) -> float:
        dt = self.key_s * rng.uniform(1 - self.jitter, 1 + self.jitter)
        word = rng.random() < self.pause_p  # drawn always, so the stream does not depend on the text
        if typed.startswith("\n"):
            dt += self.enter_pause_s
        elif typed[-1:] in " ,(=:" and word:
            dt += self.word_pause_s
        return dt

    def describe(self) -> str:
        parts = [f"{1 / self.key_s:.0f} characters/s ±{round(100 * self.jitter)}%"]
        if self.enter_pause_s:
            parts.append(f"{self.enter_pause_s:g} s after each Enter")
        if self.word_pause_s and self.pause_p:
            parts.append(f"{self.word_pause_s:g} s after {round(100 * self.pause_p)}% of spaces and `,(=:`")
        if not self.enter_pause_s and not self.word_pause_s:
            parts.append("no pauses")
        if self.open_then_type_s is not None:
            parts.append(f"first keystroke {self.open_then_type_s:g} s after didOpen"
                         + (" and flint/didMoveCursor" if self.tells_cursor else " (the cursor not reported)")
                         + ", nothing asked before")
        else:
            parts.append("typing starts once the request at the cursor has been generated")
        return ", ".join(parts)


TYPISTS = {
    "steady": Typist("steady"),
    "think": Typist("think", enter_pause_s=1.0, word_pause_s=0.8, pause_p=0.15),
    "open": Typist("open", enter_pause_s=1.0, word_pause_s=0.8, pause_p=0.15, open_then_type_s=1.0),
    "open-blind": Typist("open-blind", enter_pause_s=1.0, word_pause_s=0.8, pause_p=0.15, open_then_type_s=1.0,
                         tells_cursor=False),
    "klm": Typist("klm", key_s=1 / 6, jitter=0.35, enter_pause_s=1.35, word_pause_s=1.35, pause_p=0.15),
    # every keystroke is a pause long enough for the whole suggestion: the ceiling of characters saved by
    # this model and prompt when speed costs nothing
    "patient": Typist("patient", key_s=1.0, jitter=0.0),
}


def state_rng(seed: int, segment: int, typed: int) -> random.Random:
    """The rng for the keystroke that leaves ``typed`` characters of a segment: the same editor state gets
    the same timing on every server (str seeds hash deterministically)."""
    return random.Random(f"{seed}:{segment}:{typed}")


@dataclass
class Key:
    segment: str
    kind: str  # "char" | "enter" | "tab" | "tab-line"
    text: str
    sent: float
    latency_ms: float | None = None  # None: no suggestion for this keystroke
    source: str | None = None
    origin: str | None = None
    outcome: str = "pending"  # "suggestion" | "empty" | "superseded" | "error"
    in_ghost: bool = False  # the typed text is what the ghost text on screen showed
    saved: int = 0
    at: int = 0  # characters of the segment's text typed after this keystroke (the state it leaves)
    gap_s: float | None = None  # time to the next keystroke in the segment (None: the segment's last)
    # the segment's text is typed to its end: what follows it is already in the document, so nothing is
    # left to suggest (an empty answer is the right one)
    finished: bool = False
    refreshes: int = 0  # flint/refresh notifications for this state the editor asked again on
    # the ghost text on screen when this key was pressed (first 160 characters), and since when (s); with
    # the text that followed, it tells a wrong suggestion from a right one the typist had no time to take
    ghost: str | None = None
    ghost_age_s: float | None = None
    ghost_right: bool | None = None  # that ghost was what the file says next (whole, or its first line)
    # the answer that put that ghost there (its id: the server's gate records join on it) and how many of its
    # characters are what the file says next (bench_replay --records: a part of it cut before a doubt was right?)
    ghost_id: str | None = None
    ghost_match: int | None = None


@dataclass
class SegmentStats:
    segment: str
    file_lines: int
    typed_chars: int = 0  # the region's length
    first_request_s: float | None = None  # warm start: the request at the cursor -> non-empty answer
    first_generation_s: float | None = None  # warm start: that request -> engine ready
    first_suggestion_s: float | None = None  # open typist: first keystroke -> first non-empty answer
    typing_s: float = 0.0  # first keystroke .. last keystroke
    typing_cpu_s: float = 0.0
    idle_cores: list[float] = field(default_factory=list)  # per IDLE_STEP_S after the last keystroke
    finished: bool = False  # the region was typed to its end (a run scores arms on the functions all finished)


@dataclass
class Run:
    config: str
    server: str = ""
    typist: str = ""
    mode: str = "on"
    round: int = 0
    seed: int = 0  # the round's timing and pause seed (state_rng): each round a sample of its own
    keys: list[Key] = field(default_factory=list)
    segments: list[SegmentStats] = field(default_factory=list)
    target_chars: int = 0
    target_keys: int = 0  # target_chars less what auto-indent writes (auto_indent)
    wall_s: float = 0.0
    model_load_s: float = 0.0
    busy_s: list[float] = field(default_factory=list)  # engine busy stretches (busy .. ready), seconds
    split: str = ""  # the corpus half typed (replay_corpus.SPLITS)
    # characters of each new suggestion shown (a later answer that only grew it adds to it)
    ghost_chars: list[int] = field(default_factory=list)
    work: dict[str, dict[str, int]] = field(default_factory=dict)  # the server's work accounting (replay_work)


def auto_indent(text: str) -> int:
    """Characters of ``text`` an editor's auto-indent writes: the indentation after each line break (the
    typist's Enter inserts it; it is no typed character)."""
    return sum(len(line) - len(line.lstrip(" \t")) for line in text.split("\n")[1:])


def enter_text(rest: str) -> str:
    """What Enter types when the file says ``rest`` next (a line break first): the break and the next line's
    indentation (a perfect auto-indent)."""
    nxt = rest[1:].split("\n", 1)[0]
    return "\n" + nxt[: len(nxt) - len(nxt.lstrip(" \t"))]


def takeable(ghost: str, rest: str) -> tuple[str, str] | None:
    """What Tab on this ghost would insert, given the text the file says next: the whole ghost ("tab"), its
    first line when only that matches ("tab-line"), or None (the ghost is wrong)."""
    ghost = ghost.replace("\r\n", "\n")
    first = ghost.split("\n", 1)[0]
    if ghost.strip() and rest.startswith(ghost):
        return "tab", ghost
    if "\n" in ghost and first.strip() and rest.startswith(first + "\n"):
        return "tab-line", first
    return None




@dataclass
class Ghost:
    """The suggestion on screen for one document version, and each form it has had: ``history`` holds (time shown,
    text) for every answer that replaced the text with one extending or shortening it. A reader has read only
    what has stood still long enough (``readable_prefix``)."""

    version: int
    history: list[tuple[float, str]]

    @property
    def text(self) -> str:
        return self.history[-1][1]

    @property
    def since(self) -> float:
        return self.history[0][0]


def common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def readable_prefix(history: list[tuple[float, str]], now: float, reaction_s: float) -> str:
    """The longest prefix of the ghost shown last that has been on screen, in that form, for ``reaction_s`` by
    ``now``: a character counts from the moment it appeared and stayed (a ghost that grew shows its new part
    from the later answer; one that shrank and grew back shows the regrown part anew)."""
    if not history:
        return ""
    current = history[-1][1]
    steady = len(current)  # characters every form from here on agrees with the current text on
    for t, text in reversed(history):
        steady = min(steady, common_prefix(text, current))
        if now - t >= reaction_s:
            return current[:steady]
    return ""


def answered_empty(ghost: Ghost | None, version: int) -> Ghost | None:
    """The ghost on screen once the editor's request for document ``version`` came back with nothing: none. VS Code
    keeps a typed-through ghost only until its provider's answer for the new text comes, then shows what that
    answer holds (nothing); Flint's Neovim plugin clears on an empty list. A ghost of another version stays."""
    return ghost if ghost is not None and ghost.version != version else None


def shown(ghost: Ghost | None, text: str, t: float, version: int) -> tuple[Ghost, bool]:
    """The ghost on screen after an answer ``text`` at ``t`` for document ``version``, and whether it is a new
    suggestion (rather than the one on screen grown or cut)."""
    text = text.replace("\r\n", "\n")
    if ghost is not None and ghost.version == version and ghost.text and \
            (text.startswith(ghost.text) or ghost.text.startswith(text)):
        if text != ghost.text:
            ghost.history.append((t, text))
        return ghost, False
    return Ghost(version, [(t, text)]), True


def typed_through(ghost: Ghost, typed: str, version: int) -> Ghost | None:
    """The ghost left on screen once ``typed`` (what it showed next) is in the document: each form loses that
    prefix and keeps its time (the rest was on screen all along); None when nothing is left."""
    rest = [(t, text[len(typed):] if text.startswith(typed) else "") for t, text in ghost.history]
    return Ghost(version, rest) if rest[-1][1] else None


def take(ghost: Ghost, now: float, reaction_s: float, rest: str) -> tuple[str, str] | None:
    """What the typist takes from the ghost at ``now``: ``takeable``'s Tab (the whole ghost) or line (its first
    line), once every character that Tab inserts has been readable for ``reaction_s``; else None."""
    got = takeable(ghost.text, rest)
    if got is None or len(readable_prefix(ghost.history, now, reaction_s)) < len(got[1]):
        return None
    return got
