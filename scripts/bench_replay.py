#!/usr/bin/env python
"""Keystroke -> suggestion on replayed typing, through the real `flint serve` over stdio; old policy vs new.

An editor is simulated the way VS Code drives an inline-completion server: the file is open with a
region removed; the region is typed back one keystroke at a time (``didChange`` per keystroke, an
automatic ``textDocument/inlineCompletion`` right after it, ``$/cancelRequest`` for the previous one
if it is still open). When the suggestion on screen is what the file says next, the simulated user
accepts it (Tab; or the first line of a block that only matches there) once it has been visible for a
reaction time. Enter inserts the line break plus the next line's indentation (a perfect auto-indent),
so indentation is not typed. Keystroke timing is seeded per editor state (segment, characters typed),
so every server sees the same script until an accept makes the two diverge.

Code: function bodies from pinned PyPI packages that no corpus of ours contains (not the standard
library the trimmed LM head is built from, engine/model/lm_head.py; not pygls/lsprotocol, bench_quality; not
engine/data/eval_prompts.json; not Flint). They are fetched at run time with
``pip download --no-deps <pkg>==<version>`` into ``--pkg-cache``; each segment is the body of one
function typed after its signature and docstring; more_itertools/more.py (~5,000 lines) gives spots deep
in a long file.

Typists (``--typists``):

- ``steady``: 8 characters/s (±30%), no pauses;
- ``think``: 8 characters/s, 1 s after each Enter and 0.8 s after 15% of spaces and ``,(=:``;
- ``open``: ``think``'s rhythm, but the first keystroke comes 1 s after ``didOpen`` with nothing asked
  before (the other typists let the cursor land, ask once and start when that first generation is done);
  right after didOpen it reports the cursor (``flint/didMoveCursor``), as Flint's VS Code and Neovim
  clients do;
- ``open-blind``: ``open`` without that report (an editor without Flint's client: JetBrains via LSP4IJ);
- ``klm``: the older default (6 characters/s, a 1.35 s KLM mental operator after Enter and 15% of word
  boundaries);
- ``patient``: 1 character/s, every keystroke a pause: what the model and prompt could save if answers were
  free (a ceiling for the others, not a typist to tune for).

Servers (``--server NAME=TREE``, repeatable): each runs ``python -m lsp_server`` (``flint serve``) with
``PYTHONPATH=TREE`` from the shared venv, so two source trees (e.g. a detached worktree of main and one
of a policy branch) are compared in one run. Default: this tree, as ``cur``. Modes (``--modes``):
``on`` (defaults), ``off`` (``speculation: false, cacheSizeMb: 0``), ``restart`` (a new process on the
disk cache ``on`` left behind). Every (server, typist, mode) gets a fresh FLINT_CACHE_DIR (restart: the
one its ``on`` filled); one server at a time; ``--rounds N`` repeats the whole set in the same order
(A B A B) and pools the keystrokes.

Per configuration: keystrokes answered before the next key; pauses (>= 0.5 s to the next key; not the
keystroke that types a region to its end, where the rest of the file follows) whose keystroke got a
suggestion within 150 ms; latency p50/p95/p99 of answers (didChange sent -> non-empty
response); where answers came from (flint/status); characters saved (accepted characters minus Tabs);
time to the first suggestion after opening (``open``: from the first keystroke; others: the request at
the cursor); server CPU seconds per minute of typing (/proc/<pid>/stat) and CPU in the seconds after the
last keystroke of each segment. Writes replay.md, replay.json and PNGs under ``--out``; the CPU model
(lscpu) is recorded.

``--reference [GGUF]`` first types the same code with the GGUF the model was built from asked directly
(llama-cpp-python, plain FIM over the engine's window, greedy, one line) at every keystroke with no
latency, for each typist's timing and a patient typist: the quality reference the served rows must not
lose to (scripts/replay_reference.py; ``--reference-only``: that alone, no servers).

    python scripts/bench_replay.py --keys 60 --functions 2 --typists steady --out /tmp/replay   # a quick look
    flock /tmp/flint-heavy.lock python scripts/bench_replay.py \\
        --server old=/work/wt/old --server new=/work/wt/snap-abc1234 --rounds 2       # old vs new
    python scripts/bench_replay.py --modes off,on,restart --typists klm               # the older report
    python scripts/bench_replay.py --render-only                                      # redraw from JSON
    python scripts/bench_replay.py --reference-only --typists steady,think            # the model asked directly
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lsp_stdio import Server, proc_cpu_seconds, utf16_position  # noqa: E402,F401 - proc_cpu_seconds: tests

SOURCES = ("type-through", "memory", "disk", "model")
ANSWER_RE = re.compile(r"^(model|memory|disk|type-through)( \((\w+) entry\))? in ")
PAUSE_S = 0.5  # a gap to the next key at least this long is a pause
SHOWN_MS = 150.0  # a pause "shows a suggestion" when its keystroke was answered this fast
IDLE_WINDOW_S = 4.0  # CPU is sampled this long after the last keystroke of each segment
IDLE_STEP_S = 0.25
IDLE_CORES = 0.05  # below this many cores busy counts as idle

# ------------------------------------------------------------------------------------------------ corpus

# (package, version, file inside the wheel, function): plain pure-Python functions, round-robin over the
# three packages so that a small --functions still covers all of them.
FUNCTIONS = [
    ("more-itertools", "10.5.0", "more_itertools/more.py", "split_when"),
    ("toolz", "1.0.0", "toolz/itertoolz.py", "reduceby"),
    ("boltons", "24.1.0", "boltons/iterutils.py", "windowed_iter"),
    ("more-itertools", "10.5.0", "more_itertools/more.py", "map_reduce"),
    ("toolz", "1.0.0", "toolz/itertoolz.py", "diff"),
    ("boltons", "24.1.0", "boltons/strutils.py", "ordinalize"),
    ("more-itertools", "10.5.0", "more_itertools/more.py", "nth_permutation"),
    ("toolz", "1.0.0", "toolz/itertoolz.py", "unique"),
    ("boltons", "24.1.0", "boltons/iterutils.py", "soft_sorted"),
    ("more-itertools", "10.5.0", "more_itertools/more.py", "unique_in_window"),
    ("toolz", "1.0.0", "toolz/dicttoolz.py", "update_in"),
    ("boltons", "24.1.0", "boltons/strutils.py", "int_ranges_from_int_list"),
]


@dataclass
class Segment:
    name: str
    language: str
    path: str
    before: str  # file text before the typed region
    typed: str  # the region the user types (ends before a line break that stays in the document)
    after: str  # file text after the region (starts with that line break)
    file_lines: int = 0


def fetch_package(pkg: str, version: str, cache: Path) -> Path:
    """The unpacked wheel of ``pkg==version`` (pip download --no-deps, once per cache directory)."""
    dest = cache / f"{pkg}-{version}"
    if not (dest / ".done").exists():
        dl = cache / "wheels"
        dl.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--quiet", "-d", str(dl), f"{pkg}=={version}"], check=True)
        norm = re.sub(r"[-_.]+", "_", pkg).lower()
        wheels = [w for w in dl.glob("*.whl") if w.name.lower().startswith(f"{norm}-{version}-")]
        if not wheels:
            raise SystemExit(f"pip download gave no wheel for {pkg}=={version} in {dl}")
        shutil.rmtree(dest, ignore_errors=True)
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(dest)
        (dest / ".done").write_text("")
    return dest


def body_region(text: str, func: str) -> tuple[int, int]:
    """Character offsets (start, end) of a top-level function's body after its docstring: whole lines,
    ``end`` before the last line break (the cursor types before it)."""
    tree = ast.parse(text)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == func),
                None)
    if node is None:
        raise ValueError(f"no top-level function {func!r}")
    body = node.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)
    if has_doc and len(body) == 1:
        raise ValueError(f"{func}: only a docstring")
    first = body[1] if has_doc else body[0]
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    start = line_starts[first.lineno - 1]
    end = line_starts[node.end_lineno] - 1  # node.end_lineno is 1-based: the next line's start, minus "\n"
    return start, end


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def function_segment(path: Path, func: str, label: str, max_chars: int) -> Segment:
    """The body of ``func`` in ``path`` (after its docstring), cut to whole lines of about ``max_chars``, at
    a statement of the body's own level: the code left below the typed region starts back at the body's
    indentation, as below a user who inserts statements into a function. (A region cut inside a nested
    block would leave a deeper-indented line right below every line typed, a document no one types into:
    Flint rightly shows nothing at a line end there that does not open a block, postprocess's
    misses_block_opener.)"""
    text = path.read_text(encoding="utf-8")
    start, end = body_region(text, func)
    body_indent = indent_of(text[start: text.find("\n", start)])

    def nested(pos: int) -> bool:  # the line at ``pos`` is blank or inside a nested block
        nl = text.find("\n", pos, end)
        line = text[pos: end if nl < 0 else nl]
        return not line.strip() or indent_of(line) > body_indent

    cut = start
    while cut < end and (cut - start < max_chars or nested(cut)):
        nl = text.find("\n", cut, end)
        cut = end if nl < 0 else nl + 1
    if cut < end:
        cut -= 1  # keep the line break in the document
    return Segment(f"{label}:{func}", "python", str(path), text[:start], text[start:cut], text[cut:],
                   file_lines=text.count("\n") + 1)


def pypi_segments(n: int, max_chars: int, cache: Path, only: tuple[str, ...] = ()) -> list[Segment]:
    segs = []
    chosen = [f for f in FUNCTIONS if f[3] in only] if only else FUNCTIONS[:n]
    for pkg, ver, member, func in chosen:
        root = fetch_package(pkg, ver, cache)
        segs.append(function_segment(root / member, func, f"{pkg}=={ver}/{member}", max_chars))
    return segs


# ------------------------------------------------------------------------------------------ LSP over stdio


# (lsp_stdio.py: Server, utf16_position, proc_cpu_seconds)


# ---------------------------------------------------------------------------------------------- the user


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


@dataclass
class SegmentStats:
    segment: str
    file_lines: int
    first_request_s: float | None = None  # warm start: the request at the cursor -> non-empty answer
    first_generation_s: float | None = None  # warm start: that request -> engine ready
    first_suggestion_s: float | None = None  # open typist: first keystroke -> first non-empty answer
    typing_s: float = 0.0  # first keystroke .. last keystroke
    typing_cpu_s: float = 0.0
    idle_cores: list[float] = field(default_factory=list)  # per IDLE_STEP_S after the last keystroke


@dataclass
class Run:
    config: str
    server: str = ""
    typist: str = ""
    mode: str = "on"
    round: int = 0
    keys: list[Key] = field(default_factory=list)
    segments: list[SegmentStats] = field(default_factory=list)
    target_chars: int = 0
    target_keys: int = 0  # target_chars less what auto-indent writes (auto_indent)
    wall_s: float = 0.0
    model_load_s: float = 0.0
    busy_s: list[float] = field(default_factory=list)  # engine busy stretches (busy .. ready), seconds


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


def has_suggestion(msg: dict) -> bool:
    return bool(((msg.get("result") or {}).get("items") or [{}])[0].get("insertText"))


async def warm_start(server: Server, uri: str, doc: str, cursor: int, st: SegmentStats) -> None:
    """The cursor lands at the spot and the editor asks there once; typing starts when the server has
    finished that first generation (or 60 s passed). When that answer is empty, the editor asks again on
    flint/refresh and once the engine reports ready (as typing on, or a manual trigger, would find it):
    ``first_request_s`` is when a suggestion was first there."""
    n_status, n_refresh = len(server.statuses), len(server.refreshes)
    t0 = time.perf_counter()
    position = utf16_position(doc, cursor)
    _, fut = server.request("textDocument/inlineCompletion", {
        "context": {"triggerKind": 2}, "textDocument": {"uri": uri}, "position": position})
    answered_at, msg = await asyncio.wait_for(fut, 120)
    if has_suggestion(msg):
        st.first_request_s = round(answered_at - t0, 3)
    asked_at_ready = False
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        engine_says = [p["message"] for _, p in server.statuses[n_status:]
                       if p.get("message") in ("generating", "ready")]
        ready = bool(engine_says) and engine_says[-1] == "ready"
        refreshed = any((p.get("textDocument") or {}).get("uri") == uri for _, p in server.refreshes[n_refresh:])
        n_refresh = len(server.refreshes)
        if st.first_request_s is None and (refreshed or (ready and not asked_at_ready)):
            asked_at_ready = asked_at_ready or ready
            # on refresh VS Code asks as an explicit trigger (1); at ready, what the next automatic ask
            # would find (2: an invoked ask may start a whole-window generation of its own)
            _, again = server.request("textDocument/inlineCompletion", {
                "context": {"triggerKind": 1 if refreshed else 2}, "textDocument": {"uri": uri},
                "position": position})
            t_again, msg = await asyncio.wait_for(again, 120)
            if has_suggestion(msg):
                st.first_request_s = round(t_again - t0, 3)
            continue
        if ready:
            break
        if not engine_says and time.perf_counter() - answered_at > 1.0:
            break  # answered without the model (from disk): nothing to wait for
        await asyncio.sleep(0.05)
    st.first_generation_s = round(time.perf_counter() - t0, 2)


async def replay(server: Server, segments: list[Segment], typist: Typist, seed: int, run: Run,
                 max_keys: int) -> None:
    for seg_no, seg in enumerate(segments):
        if len(run.keys) >= max_keys:
            break
        await type_segment(server, seg, seg_no, typist, seed, run, max_keys)


async def type_segment(server: Server, seg: Segment, seg_no: int, typist: Typist, seed: int, run: Run,
                       max_keys: int) -> None:
    """Open one file, type its region back keystroke by keystroke, watch the server idle, close it."""
    st = SegmentStats(seg.name, seg.file_lines)
    run.segments.append(st)
    uri = f"file:///replay/{seg_no}-{Path(seg.path).name}"
    doc = seg.before + seg.after
    cursor = len(seg.before)
    version = 1
    server.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": seg.language, "version": version, "text": doc}})
    if typist.open_then_type_s is not None and typist.tells_cursor:
        server.notify("flint/didMoveCursor", {"textDocument": {"uri": uri, "version": version},
                                              "position": utf16_position(doc, cursor)})
    run.target_chars += len(seg.typed)
    run.target_keys += len(seg.typed) - auto_indent(seg.typed)
    await asyncio.sleep(typist.open_then_type_s or 1.0)  # the file is open; the user starts a moment later
    if typist.open_then_type_s is None:
        await warm_start(server, uri, doc, cursor, st)
    typed = 0  # characters of seg.typed in the document
    shown: tuple[str, float, int] | None = None  # (text, time shown, document version)
    last_req: tuple[int, asyncio.Future, Key] | None = None
    again: tuple[int, asyncio.Future, Key] | None = None  # the editor asking again after flint/refresh
    n_refresh = len(server.refreshes)
    seg_keys: list[Key] = []
    first_answer: float | None = None
    next_at = time.perf_counter()
    cpu0 = server.cpu_s()

    def show(key: Key, t: float, msg: dict, now_version: int) -> bool:
        """Take a non-empty answer for ``key``'s state; the latest one for the current version is on
        screen. False when the answer held no suggestion."""
        nonlocal shown, first_answer
        items = (msg.get("result") or {}).get("items") or []
        if not items or not items[0].get("insertText"):
            return False
        if key.outcome != "suggestion":
            key.outcome = "suggestion"
            key.latency_ms = (t - key.sent) * 1000
            status = next((p for ts, p in reversed(server.statuses)
                           if ts <= t and ANSWER_RE.match(p.get("message", ""))), None)
            if status is not None:
                m = ANSWER_RE.match(status["message"])
                key.source, key.origin = m.group(1), m.group(3) or ("disk" if m.group(1) == "disk" else None)
        if first_answer is None:
            first_answer = t
        text = items[0]["insertText"]
        if shown is not None and shown[2] == now_version and shown[0] and \
                (text.startswith(shown[0]) or shown[0].startswith(text)):
            shown = (text, shown[1], now_version)  # the same suggestion, on screen since it first came
        else:
            shown = (text, t, now_version)
        return True

    def harvest(now_version: int) -> None:
        """Record answers that arrived; ask again (as VS Code's extension does) on a flint/refresh for
        this document's current version once the keystroke's own request is answered."""
        nonlocal again, n_refresh
        if last_req is not None and last_req[2].outcome == "pending" and last_req[1].done():
            key = last_req[2]
            t, msg = last_req[1].result()
            if "error" in msg:
                key.outcome = "superseded" if msg["error"].get("code") in (-32800, -32801, -32802) else "error"
            elif not show(key, t, msg, now_version):
                key.outcome = "empty"
        if again is not None and again[1].done():
            t, msg = again[1].result()
            if "error" not in msg:
                show(again[2], t, msg, now_version)
            again = None
        while n_refresh < len(server.refreshes):
            _, params = server.refreshes[n_refresh]
            doc_id = params.get("textDocument") or {}
            if last_req is None or last_req[2].outcome == "pending" or again is not None:
                break  # the pending answer comes anyway; look at this refresh again later
            n_refresh += 1
            if doc_id.get("uri") == uri and doc_id.get("version") in (None, now_version):
                last_req[2].refreshes += 1
                msg_id, fut = server.request("textDocument/inlineCompletion", {
                    "context": {"triggerKind": 1}, "textDocument": {"uri": uri},
                    "position": utf16_position(doc, cursor)})
                again = (msg_id, fut, last_req[2])

    async def pump(until: float) -> None:
        """Wait until ``until``, taking answers and refreshes as they come."""
        while True:
            harvest(version)
            left = until - time.perf_counter()
            if left <= 0:
                return
            waiters = [r[1] for r in (last_req, again) if r is not None and not r[1].done()]
            waiters.append(server.refresh_signal())
            await asyncio.wait(waiters, timeout=left, return_when=asyncio.FIRST_COMPLETED)

    while typed < len(seg.typed) and len(run.keys) < max_keys:
        await pump(next_at)  # wait for the next action, recording answers as they come
        rest = seg.typed[typed:]
        action, text = None, ""
        if shown is not None and shown[2] == version and time.perf_counter() - shown[1] >= typist.reaction_s:
            take = takeable(shown[0], rest)
            if take is not None:
                action, text = take
        if action is None:
            ch = rest[0]
            if ch == "\n":
                action, text = "enter", enter_text(rest)
            else:
                action, text = "char", ch
        in_ghost = (action in ("char", "enter") and shown is not None and shown[2] == version
                    and shown[0].replace("\r\n", "\n").startswith(text))
        on_screen = shown if shown is not None and shown[2] == version and shown[0] else None
        # the edit
        pos = utf16_position(doc, cursor)
        doc = doc[:cursor] + text + doc[cursor:]
        cursor += len(text)
        typed += len(text)
        version += 1
        if last_req is not None and last_req[2].outcome == "pending":
            server.cancel(last_req[0])  # as VS Code does when it asks again
            last_req[2].outcome = "superseded"
        if again is not None:
            server.cancel(again[0])
            again = None
        sent = time.perf_counter()
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": pos, "end": pos}, "text": text}]})
        key = Key(seg.name, action, text, sent, in_ghost=in_ghost,
                  saved=len(text) - 1 if action in ("tab", "tab-line") else 0, at=typed,
                  finished=typed >= len(seg.typed))
        if on_screen is not None:
            key.ghost, key.ghost_age_s = on_screen[0][:160], round(sent - on_screen[1], 3)
            key.ghost_right = takeable(on_screen[0], rest) is not None
        if seg_keys:
            seg_keys[-1].gap_s = round(sent - seg_keys[-1].sent, 3)
        seg_keys.append(key)
        run.keys.append(key)
        msg_id, fut = server.request("textDocument/inlineCompletion", {
            "context": {"triggerKind": 2}, "textDocument": {"uri": uri},
            "position": utf16_position(doc, cursor)})
        last_req = (msg_id, fut, key)
        shown = (shown[0][len(text):], shown[1], version) if in_ghost and shown is not None else None
        next_at = sent + typist.interval(state_rng(seed, seg_no, typed), text)
    if not seg_keys:
        return
    t_last = seg_keys[-1].sent
    st.typing_s = round(t_last - seg_keys[0].sent, 3)
    st.typing_cpu_s = round(server.cpu_s() - cpu0, 2)
    # the user stops: let the last answer land and sample the server's CPU meanwhile
    prev = server.cpu_s()
    for step in range(1, round(IDLE_WINDOW_S / IDLE_STEP_S) + 1):
        await pump(t_last + step * IDLE_STEP_S)
        now_cpu = server.cpu_s()
        st.idle_cores.append(round((now_cpu - prev) / IDLE_STEP_S, 3))
        prev = now_cpu
    harvest(version)
    if last_req is not None and last_req[2].outcome == "pending":
        last_req[2].outcome = "superseded"
    if again is not None:
        server.cancel(again[0])
    if typist.open_then_type_s is not None and first_answer is not None:
        st.first_suggestion_s = round(first_answer - seg_keys[0].sent, 3)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def git_commit(tree: str) -> str:
    try:
        out = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


async def run_config(run: Run, tree: str, options: dict, segments: list[Segment], typist: Typist, args,
                     env: dict[str, str], logs: Path, model_dir: str | None = None) -> Run:
    server = Server()
    cmd = [sys.executable, "-m", "lsp_server", "--threads", str(args.threads), "--model", model_dir or args.model_dir,
           *(["-v"] if args.keep_logs else [])]
    env = {**env, "PYTHONPATH": tree}
    t0 = time.perf_counter()
    await server.start(cmd, env, logs / f"server-{run.config.replace('/', '-')}-r{run.round}.log", cwd=tree)
    _, init = server.request("initialize", {
        "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "bench-replay", "version": "1"},
        "capabilities": {"textDocument": {"synchronization": {"dynamicRegistration": False},
                                          "inlineCompletion": {}}},
        "initializationOptions": options})
    await asyncio.wait_for(init, 120)
    server.notify("initialized", {})
    await asyncio.wait_for(server.ready.wait(), 300)
    run.model_load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    await replay(server, segments, typist, args.seed, run, args.keys)
    run.wall_s = time.perf_counter() - t1
    # how long the engine was busy per stretch of work ("generating" .. "ready"), for context
    busy_at = None
    for ts, p in server.statuses:
        if p.get("message") == "generating" and busy_at is None:
            busy_at = ts
        elif p.get("message") == "ready" and busy_at is not None:
            run.busy_s.append(ts - busy_at)
            busy_at = None
    await server.stop()
    return run


# ------------------------------------------------------------------------------------------------ report


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def finite(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) else v


def pause_shown(keys: list[Key], pause_s: float = PAUSE_S, within_ms: float = SHOWN_MS, *,
                finished: bool = False) -> tuple[int, int]:
    """(pauses, pauses whose keystroke was answered with a suggestion within ``within_ms``). A pause is a
    gap of at least ``pause_s`` to the next keystroke, or a segment's last keystroke (the user stops) unless
    it finished the segment's text (what follows it is already in the document: nothing is left to
    suggest there); ``finished`` counts those too (the definition of the reports before session 13)."""
    pauses = [k for k in keys if (k.gap_s is None and (finished or not k.finished))
              or (k.gap_s is not None and k.gap_s >= pause_s)]
    shown = [k for k in pauses if k.outcome == "suggestion" and k.latency_ms is not None
             and k.latency_ms <= within_ms]
    return len(pauses), len(shown)


def idle_settle_s(idle_cores: list[float], step_s: float = IDLE_STEP_S, idle: float = IDLE_CORES) -> float | None:
    """Seconds after the last keystroke from which the server stays below ``idle`` cores for the rest of the
    sampled window (None: still busy at the window's end)."""
    settle = len(idle_cores)
    while settle > 0 and idle_cores[settle - 1] < idle:
        settle -= 1
    return None if settle == len(idle_cores) else round(settle * step_s, 2)


def summarize(runs: list[Run]) -> dict:
    """Pooled numbers for one configuration over its rounds."""
    run = runs[0]
    keys = [k for r in runs for k in r.keys]
    segs = [s for r in runs for s in r.segments]
    target = sum(r.target_chars for r in runs)
    target_keys = sum(r.target_keys for r in runs)
    keys_saved = sum(k.saved - auto_indent(k.text) for k in keys if k.kind in ("tab", "tab-line"))
    busy = [b for r in runs for b in r.busy_s]
    n = len(keys)
    answered = [k for k in keys if k.outcome == "suggestion"]
    lat = [k.latency_ms for k in answered if k.latency_ms is not None]
    by_source = {s: sum(k.source == s for k in answered) for s in SOURCES}
    inside = [k for k in keys if k.in_ghost]
    inside_ok = [k for k in inside if k.outcome == "suggestion" and k.source not in (None, "model")]
    from_disk = [k for k in answered if k.source == "disk" or k.origin == "disk"]
    tabs = [k for k in keys if k.kind in ("tab", "tab-line")]
    n_pauses, n_shown = pause_shown(keys)
    n_pauses_all, n_shown_all = pause_shown(keys, finished=True)
    typing_s = sum(s.typing_s for s in segs)
    typing_cpu = sum(s.typing_cpu_s for s in segs)
    idle_after = [statistics.fmean(s.idle_cores[round(2 / IDLE_STEP_S):]) for s in segs
                  if len(s.idle_cores) > round(2 / IDLE_STEP_S)]
    settles = [idle_settle_s(s.idle_cores) for s in segs if s.idle_cores]
    # a file with no suggestion at all counts as slower than every file with one
    first_open = [math.inf if s.first_suggestion_s is None else s.first_suggestion_s for s in segs]
    opens = run.typist in TYPISTS and TYPISTS[run.typist].open_then_type_s is not None
    long_first = [s.first_suggestion_s if opens else s.first_request_s for s in segs
                  if s.file_lines >= 2000]
    return {
        "config": run.config, "server": run.server, "typist": run.typist, "mode": run.mode,
        "rounds": len(runs),
        "keystrokes": n,
        "typed_chars": sum(len(k.text) for k in keys if k.kind in ("char", "enter")),
        "target_chars": target,
        "wall_s": round(sum(r.wall_s for r in runs), 1),
        "server_ready_s": [round(r.model_load_s, 1) for r in runs],
        "engine_busy_stretch_s": {"count": len(busy), "p50": round(pct(busy, 50) or 0, 2),
                                  "total": round(sum(busy), 1)},
        "with_suggestion": len(answered),
        "with_suggestion_per_round": [round(sum(k.outcome == "suggestion" for k in r.keys) / max(1, len(r.keys)), 3)
                                      for r in runs],
        "empty": sum(k.outcome == "empty" for k in keys),
        "superseded": sum(k.outcome == "superseded" for k in keys),
        "errors": sum(k.outcome == "error" for k in keys),
        "latency_ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99),
                       "mean": round(statistics.fmean(lat), 1) if lat else None},
        "pauses": {"count": n_pauses, "shown_within_150ms": n_shown,
                   "share": round(n_shown / n_pauses, 3) if n_pauses else None,
                   "with_finished": {"count": n_pauses_all, "shown_within_150ms": n_shown_all,
                                     "share": round(n_shown_all / n_pauses_all, 3) if n_pauses_all else None}},
        "share_of_keystrokes": {s: round(by_source[s] / n, 3) if n else 0.0 for s in SOURCES}
        | {"none": round((n - len(answered)) / n, 3) if n else 0.0},
        "share_of_answers": {s: round(by_source[s] / len(answered), 3) if answered else 0.0 for s in SOURCES},
        "no_model_call_share_of_answers": round(1 - by_source["model"] / len(answered), 3) if answered else 0.0,
        "inside_suggestion": {"keystrokes": len(inside), "answered_without_model": len(inside_ok),
                              "share": round(len(inside_ok) / len(inside), 3) if inside else None},
        "from_disk_share_of_answers": round(len(from_disk) / len(answered), 3) if answered else 0.0,
        "accepts": len(tabs),
        # keystrokes typed with a ghost on screen: right ones not taken (too young for the typist) vs wrong
        "ghosts": {"on_screen": sum(k.ghost is not None for k in keys),
                   "right": sum(bool(k.ghost_right) and k.kind in ("char", "enter") for k in keys),
                   "wrong": sum(k.ghost is not None and k.ghost_right is False for k in keys)},
        "chars_saved": sum(k.saved for k in keys),
        "chars_saved_share": round(sum(k.saved for k in keys) / target, 3) if target else 0.0,
        # the same counted in keystrokes: the indentation an accepted line break brings is what Enter's
        # auto-indent would have written, so it is neither typed nor saved
        "keys_saved": keys_saved,
        "target_keys": target_keys,
        "keys_saved_share": round(keys_saved / target_keys, 3) if target_keys else 0.0,
        "first_request_s": [s.first_request_s for s in segs if s.first_generation_s is not None],
        "first_generation_s": [s.first_generation_s for s in segs if s.first_generation_s is not None],
        "first_suggestion_after_open_s": {"per_segment": [s.first_suggestion_s for s in segs],
                                          # no suggestion in a file: none came within this long
                                          "none_within_s": [round(s.typing_s + IDLE_WINDOW_S, 1) for s in segs
                                                            if s.first_suggestion_s is None],
                                          "p50": finite(pct(first_open, 50)),
                                          "none": sum(s.first_suggestion_s is None for s in segs)}
        if opens else None,
        "first_suggestion_long_file_s": {"p50": finite(pct([math.inf if x is None else x for x in long_first], 50)),
                                         "per_segment": long_first, "none": sum(x is None for x in long_first)},
        "cpu_s_per_typing_min": round(typing_cpu / (typing_s / 60), 1) if typing_s else None,
        "typing_min": round(typing_s / 60, 2),
        "idle_cores_2_to_4s_after": {"p50": pct(idle_after, 50), "max": max(idle_after) if idle_after else None},
        "idle_settle_s": {"p50": pct([x for x in settles if x is not None], 50),
                          "max": max((x for x in settles if x is not None), default=None),
                          "never": sum(x is None for x in settles), "segments": len(settles)},
        "segments": [asdict(s) for s in segs],
    }


def restart_overlap(first: list[Run], again: list[Run]) -> dict:
    """The editor states (segment, characters typed) the first run answered that the restart visited too
    (accepts make the two keystroke scripts differ slightly), and how many of them the restart answered from
    disk entries (directly or typed through) / at all."""
    answered = {(k.segment, k.at) for r in first for k in r.keys if k.outcome == "suggestion"}
    revisits = [k for r in again for k in r.keys if (k.segment, k.at) in answered]
    disk = [k for k in revisits if k.outcome == "suggestion" and (k.source == "disk" or k.origin == "disk")]
    any_ = [k for k in revisits if k.outcome == "suggestion"]
    return {"states": len(revisits), "from_disk": len(disk), "answered": len(any_),
            "from_disk_share": round(len(disk) / len(revisits), 3) if revisits else None}


def config_name(server: str, typist: str, mode: str) -> str:
    return f"{server}/{typist}" + ("" if mode == "on" else f"/{mode}")


def group(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(r.config, []).append(r)
    return out


def add_overlap(groups: dict[str, list[Run]], summaries: list[dict]) -> None:
    for sm in summaries:
        if sm["mode"] == "restart":
            on = groups.get(config_name(sm["server"], sm["typist"], "on"))
            if on:
                sm["restart_overlap"] = restart_overlap(on, groups[sm["config"]])


def plot(groups: dict[str, list[Run]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = ["#d9480f", "#1c7ed6", "#2f9e44", "#888888", "#ae3ec9", "#f59f00"]
    typists = list(dict.fromkeys(rs[0].typist for rs in groups.values()))

    def label(c: str, rs: list[Run]) -> str:
        return rs[0].server + ("" if rs[0].mode == "on" else f"/{rs[0].mode}")

    series = list(dict.fromkeys(label(c, rs) for c, rs in groups.items()))
    colors = {s: palette[i % len(palette)] for i, s in enumerate(series)}

    lat = {c: [k.latency_ms for r in rs for k in r.keys if k.latency_ms is not None] for c, rs in groups.items()}
    hi = max([max(v) for v in lat.values() if v] + [10.0])
    bins = [10 ** (x / 10) for x in range(0, int(math.log10(hi) * 10) + 2)]  # 1 ms .. max, log-spaced
    names = []
    w = max(1, len(typists))
    fig, axes = plt.subplots(1, w, figsize=(4.6 * w, 4.0), squeeze=False)
    for ax, t in zip(axes[0], typists, strict=True):
        for c, rs in groups.items():
            if rs[0].typist == t and lat[c]:
                ax.hist(lat[c], bins=bins, alpha=0.55, label=f"{label(c, rs)} ({len(lat[c])} answers)",
                        color=colors[label(c, rs)])
        ax.set_xscale("log")
        ax.set_xlabel("keystroke → suggestion (ms, log)")
        ax.set_title(f"typist `{t}`")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("answered keystrokes")
    fig.suptitle("Latency of answered keystrokes")
    fig.tight_layout()
    fig.savefig(out / "replay_hist.png", dpi=100)
    plt.close(fig)
    names.append("replay_hist.png")

    fig, axes = plt.subplots(1, w, figsize=(4.6 * w, 4.0), squeeze=False)
    for ax, t in zip(axes[0], typists, strict=True):
        for c, rs in groups.items():
            n = sum(len(r.keys) for r in rs)
            v = sorted(lat[c])
            if rs[0].typist == t and v:
                # share of *all* keystrokes answered within x ms (unanswered keystrokes never arrive)
                ax.step(v, [(i + 1) / n for i in range(len(v))], where="post", label=label(c, rs),
                        color=colors[label(c, rs)])
        ax.axvline(SHOWN_MS, color="#bbbbbb", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_xlabel("keystroke → suggestion (ms, log)")
        ax.set_title(f"typist `{t}`")
        ax.legend(loc="upper left", fontsize=8)
    axes[0][0].set_ylabel("share of all keystrokes answered within")
    fig.suptitle("CDF over keystrokes (unanswered keystrokes never reach 1.0)")
    fig.tight_layout()
    fig.savefig(out / "replay_cdf.png", dpi=100)
    plt.close(fig)
    names.append("replay_cdf.png")

    # server CPU after the last keystroke of each segment (median over segments)
    fig, axes = plt.subplots(1, w, figsize=(4.6 * w, 3.4), squeeze=False)
    for ax, t in zip(axes[0], typists, strict=True):
        for c, rs in groups.items():
            curves = [s.idle_cores for r in rs for s in r.segments if s.idle_cores]
            if rs[0].typist != t or not curves:
                continue
            m = min(len(x) for x in curves)
            med = [statistics.median(x[i] for x in curves) for i in range(m)]
            ax.step([(i + 1) * IDLE_STEP_S for i in range(m)], med, where="pre", label=label(c, rs),
                    color=colors[label(c, rs)])
        ax.axvline(2.0, color="#bbbbbb", linestyle=":", linewidth=1)
        ax.set_xlabel("seconds after the last keystroke")
        ax.set_title(f"typist `{t}`")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("server CPU (cores, median over segments)")
    fig.tight_layout()
    fig.savefig(out / "replay_idle_cpu.png", dpi=100)
    plt.close(fig)
    names.append("replay_idle_cpu.png")
    return names


def ms(v: float | None) -> str:
    return "–" if v is None else (f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms")


def share(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def secs(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f} s"


def seclist(vals: list[float | None]) -> str:
    return ", ".join("none" if x is None else f"{x:.1f}" for x in vals) or "–"


def targets(summaries: list[dict]) -> list[str]:
    """Issue 13's targets per server (mode `on`), each against the first server listed (the baseline)."""
    on = [s for s in summaries if s["mode"] == "on"]
    servers = list(dict.fromkeys(s["server"] for s in on))
    by = {(s["server"], s["typist"]): s for s in on}
    if not servers:
        return []
    base = servers[0]

    def cell(server: str, typist: str, fn) -> str:
        s = by.get((server, typist))
        return "–" if s is None else fn(s)

    def answered(s: dict) -> str:
        v = s["with_suggestion"] / max(1, s["keystrokes"])
        return f"{share(v)} {'✓' if v >= 0.5 else '✗'}"

    def p95(s: dict) -> str:
        v = s["latency_ms"]["p95"]
        return f"{ms(v)} {'✓' if v is not None and v <= 150 else '✗'}"

    def pauses(s: dict) -> str:
        v = s["pauses"]["share"]
        return f"{share(v)} {'✓' if v is not None and v >= 0.8 else '✗'}"

    def saved(s: dict) -> str:
        v = s["chars_saved_share"]
        return f"{share(v)} {'✓' if v >= 0.3 else '✗'}"

    lands = "steady" if any(t == "steady" for _, t in by) else "think"
    opening = [t for t in TYPISTS if TYPISTS[t].open_then_type_s is not None and any(t == x for _, x in by)]

    def first_long(server: str, typist: str) -> str:
        s, b = by.get((server, typist)), by.get((base, typist))
        if s is None:
            return "–"
        v = s["first_suggestion_long_file_s"]["p50"]
        if server == base or b is None:
            return secs(v) if v is not None else "none"
        bv = b["first_suggestion_long_file_s"]["p50"]
        if v is None:
            return "none ✗"
        if bv is None:  # the baseline showed none while typing: any time at all is better
            return f"{secs(v)} (baseline: none) ✓"
        return f"{secs(v)} = {v / bv:.2f}× {'✓' if v <= bv / 3 else '✗'}"

    rows = [
        ("`steady`: ≥ 50% of keystrokes answered before the next key", lambda sv: cell(sv, "steady", answered)),
        ("`steady`: p95 of answers ≤ 150 ms", lambda sv: cell(sv, "steady", p95)),
        ("`think`: ≥ 80% of pauses show a suggestion within 150 ms", lambda sv: cell(sv, "think", pauses)),
        ("`think`: characters saved ≥ 30%", lambda sv: cell(sv, "think", saved)),
        ("`steady`: characters saved ≥ 30%", lambda sv: cell(sv, "steady", saved)),
        (f"file ≥ 2,000 lines, cursor lands (`{lands}`): first suggestion ≤ 1/3 of `{base}`'s",
         lambda sv: first_long(sv, lands)),
        *[(f"file ≥ 2,000 lines opened, typing 1 s later (`{t}`): first suggestion ≤ 1/3 of `{base}`'s",
           lambda sv, t=t: first_long(sv, t)) for t in opening],
    ]
    return ["## Issue 13's targets", "",
            "| target | " + " | ".join(f"`{sv}`" for sv in servers) + " |",
            "|---|" + "---|" * len(servers),
            *[f"| {name} | " + " | ".join(fn(sv) for sv in servers) + " |" for name, fn in rows], ""]


def pauses_cell(p: dict | None) -> str:
    """A report cell for a pause count: "shown of pauses (share)"."""
    return f"{p['shown_within_150ms']} of {p['count']} ({share(p['share'])})" if p else "–"


def report(summaries: list[dict], meta: dict, plots: list[str]) -> str:
    cols = [s["config"] for s in summaries]

    def first_open(s: dict) -> str:
        f = s["first_suggestion_after_open_s"]
        if f is None:
            return "–"
        vals = ", ".join(f"{x:.1f}" for x in f["per_segment"] if x is not None)
        nones = ", ".join(f"none in {x:.0f}" for x in f.get("none_within_s", []))
        return f"{secs(f['p50'])} ({', '.join(v for v in (vals, nones) if v)})"

    rows = [
        ("keystrokes (chars, Enter, Tab)", [str(s["keystrokes"]) for s in summaries]),
        ("**answered before the next key**", [f"{s['with_suggestion']} ({share(s['with_suggestion'] / max(1, s['keystrokes']))})"
                                              for s in summaries]),
        ("… per round", [", ".join(share(x) for x in s["with_suggestion_per_round"]) for s in summaries]),
        (f"**pauses ≥ {PAUSE_S} s showing a suggestion within {SHOWN_MS:.0f} ms**",
         [pauses_cell(s["pauses"]) for s in summaries]),
        ("… counting each file's last keystroke (its text typed to the end: nothing left to suggest)",
         [pauses_cell(s["pauses"].get("with_finished")) for s in summaries]),
        ("**latency p50**", [ms(s["latency_ms"]["p50"]) for s in summaries]),
        ("**latency p95**", [ms(s["latency_ms"]["p95"]) for s in summaries]),
        ("**latency p99**", [ms(s["latency_ms"]["p99"]) for s in summaries]),
        ("**characters saved**", [f"{s['chars_saved']} of {s['target_chars']} ({share(s['chars_saved_share'])})"
                                  for s in summaries]),
        ("… in keystrokes (the indentation an Enter's auto-indent writes is neither typed nor saved)",
         [f"{s['keys_saved']} of {s['target_keys']} ({share(s['keys_saved_share'])})" for s in summaries]),
        ("accepts (Tab)", [str(s["accepts"]) for s in summaries]),
        ("keys typed under a ghost: right (not yet taken) / wrong",
         [f"{s['ghosts']['right']} / {s['ghosts']['wrong']}" if s.get("ghosts") else "–" for s in summaries]),
        ("**first suggestion after opening: p50 (per file, s)**", [first_open(s) for s in summaries]),
        ("cursor lands, editor asks → first suggestion there (s, per file)", [seclist(s["first_request_s"]) for s in summaries]),
        ("request at the cursor → engine ready (s, per file)", [seclist(s["first_generation_s"]) for s in summaries]),
        ("… in files ≥ 2,000 lines (`open`: after the first keystroke) (s)",
         [f"{secs(s['first_suggestion_long_file_s']['p50'])} ({seclist(s['first_suggestion_long_file_s']['per_segment'])})"
          for s in summaries]),
        ("**server CPU s per minute of typing**", [f"{s['cpu_s_per_typing_min']}" for s in summaries]),
        ("server CPU 2–4 s after the last key (cores, p50 / max)",
         [f"{s['idle_cores_2_to_4s_after']['p50']:.2f} / {s['idle_cores_2_to_4s_after']['max']:.2f}"
          if s["idle_cores_2_to_4s_after"]["p50"] is not None else "–" for s in summaries]),
        (f"idle (< {IDLE_CORES} cores) from … after the last key (p50 / max; never in {IDLE_WINDOW_S:.0f} s)",
         [f"{secs(s['idle_settle_s']['p50'])} / {secs(s['idle_settle_s']['max'])}; {s['idle_settle_s']['never']} of "
          f"{s['idle_settle_s']['segments']}" for s in summaries]),
        *[(f"answered from {src}", [share(s["share_of_keystrokes"][src]) for s in summaries]) for src in SOURCES],
        ("no suggestion (empty, superseded)", [share(s["share_of_keystrokes"]["none"]) for s in summaries]),
        ("keystrokes inside a shown suggestion", [str(s["inside_suggestion"]["keystrokes"]) for s in summaries]),
        ("… answered with no model call", [share(s["inside_suggestion"]["share"]) for s in summaries]),
        ("engine busy stretches: count, median, total (s)",
         [f"{s['engine_busy_stretch_s']['count']}, {s['engine_busy_stretch_s']['p50']:.1f}, "
          f"{s['engine_busy_stretch_s']['total']:.0f}" for s in summaries]),
    ]
    if any(s.get("restart_overlap") for s in summaries):
        rows.append(("states `on` answered, revisited after restart: from disk", [
            f"{share(s['restart_overlap']['from_disk_share'])} ({s['restart_overlap']['from_disk']} of "
            f"{s['restart_overlap']['states']})" if s.get("restart_overlap") else "–" for s in summaries]))
    servers = "; ".join(f"`{k}` = `{v['tree']}` at `{v['commit']}`" + (f" on model `{v['model']}`" if v.get("model") else "")
                        for k, v in meta["servers"].items())
    lines = [
        "# Replay benchmark: keystroke → suggestion, old policy vs new",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} UTC ({meta['cpu']}; {meta['machine']}; load average "
        f"at start {meta['load_average']}). Model `{meta['model']}`, {meta['threads']} threads. Servers: {servers}. "
        f"{meta['rounds']} round(s), configurations in the order {', '.join(f'`{c}`' for c in meta['order'])} "
        "each round, one server process at a time, each on a fresh FLINT_CACHE_DIR"
        + (" (restart: the cache its `on` filled)" if any(s["mode"] == "restart" for s in summaries) else "") + ".",
        "",
        *(["**Partial run**: only the configurations in the table below had finished when this was written.", ""]
          if not meta.get("complete", True) else []),
        "Held-out code is typed back into the real `flint serve` over stdio, as VS Code drives an "
        "inline-completion server: one `didChange` per keystroke, an automatic `textDocument/inlineCompletion` "
        "right after it (the previous one cancelled with `$/cancelRequest` if still open), Tab when the "
        "suggestion on screen is what the file says next and has been visible for 0.3 s, Enter with a perfect "
        "auto-indent. Latency is didChange sent → non-empty response received; a keystroke counts as answered "
        "when that response arrived before the next keystroke.",
        "",
        f"Code ({meta['corpus_note']}): " + ", ".join(f"`{s}`" for s in meta["segments"]) + ".",
        "",
        "Typists: " + "; ".join(f"`{k}`: {v}" for k, v in meta["typists"].items()) + ".",
        "",
        "| | " + " | ".join(f"`{c}`" for c in cols) + " |",
        "|---|" + "---|" * len(cols),
        *[f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows],
        "",
        f"- A pause is a gap of ≥ {PAUSE_S} s to the next keystroke, or a file's last keystroke when the typing "
        "stopped before the end of the typed region; it shows a "
        f"suggestion when that keystroke's answer (non-empty) arrived within {SHOWN_MS:.0f} ms. The keystroke "
        "that finishes the region is no pause: what follows it is already in the file and an empty answer is "
        "the right one (reports before session 13 counted it; the row below the pauses still does).",
        "- Latency percentiles are over answered keystrokes; the CDF is over all keystrokes (a curve's height is "
        "its answer rate).",
        "- First suggestion after opening (`open`, `open-blind`): first keystroke (1 s after didOpen; `open` "
        "reports the cursor with `flint/didMoveCursor` right after didOpen) → first non-empty answer "
        "in that file. For the other typists the cursor lands and the editor asks once before typing; if that "
        "answer is empty it asks again on `flint/refresh` and once when the engine reports ready (what typing "
        "on or a manual trigger would find): the time to the first suggestion there, and to the engine being "
        "ready (typing starts then), are listed apart. Files ≥ 2,000 lines: "
        "more_itertools/more.py (~5,000 lines), spots at its lines 1,500-4,500.",
        "- CPU: user + system time of the server process (/proc/<pid>/stat, all threads) from the first to the "
        f"last keystroke of each file, per minute of that typing; after the last keystroke it is sampled every "
        f"{IDLE_STEP_S} s for {IDLE_WINDOW_S:.0f} s (replay_idle_cpu.png). The benchmark client runs on the same "
        "machine.",
        "- `off`: `speculation: false, cacheSizeMb: 0`; `restart`: a new server on the disk cache `on` filled "
        "(only when those modes were run).",
        "",
        *reference_lines(meta.get("reference")),
        *targets(summaries),
        *[f"![{p}]({p})" for p in plots],
        "",
        "Raw numbers, per keystroke and per file, are in `replay.json`.",
        "",
    ]
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------------- main


def cpu_model() -> str:
    """The CPU as benchmarks record it: model name, family/model and the widest int8 instruction set (ORT's
    int8 kernels are several times faster with AVX-512 VNNI than with AVX2 alone), and the core count."""
    name, fam, model, isa = "?", "?", "?", "?"
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().split("\n\n", 1)[0]
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        name, fam, model = fields.get("model name", "?"), fields.get("cpu family", "?"), fields.get("model", "?")
        flags = set(fields.get("flags", "").split())
        isa = next((x for x in ("avx512_vnni", "avx_vnni", "avx512f", "avx2") if x in flags), "no avx2")
    except OSError:
        pass
    return f"{name} (family {fam} model {model}, {isa}), {os.cpu_count()} cores"


def runs_from_json(data: dict) -> list[Run]:
    runs = []
    for r in data["runs"]:
        run = Run(r["config"], r["server"], r["typist"], r["mode"], r["round"],
                  keys=[Key(**{**k, "sent": 0.0}) for k in r["keys"]],
                  segments=[SegmentStats(**s) for s in r["segments"]])
        runs.append(run)
    return runs


def render_only(out: Path) -> int:
    """Redraw replay.md and the PNGs from replay.json (no replay)."""
    data = json.loads((out / "replay.json").read_text())
    groups = group(runs_from_json(data))
    plots = plot(groups, out)
    (out / "replay.md").write_text(report(data["summaries"], data["meta"], plots))
    print(f"wrote {out / 'replay.md'}")
    return 0


def print_table(summaries: list[dict]) -> None:
    head = f"{'configuration':<24}{'keys':>6}{'answered':>10}{'pauses':>9}{'p50':>9}{'p95':>9}{'p99':>9}" \
           f"{'saved':>7}{'1st':>8}{'cpu/min':>9}{'idle':>7}"
    print(head)
    for s in summaries:
        f = s["first_suggestion_after_open_s"]
        first = f["p50"] if f else (pct([x for x in s["first_request_s"] if x is not None], 50))
        print(f"{s['config']:<24}{s['keystrokes']:>6}{share(s['with_suggestion'] / max(1, s['keystrokes'])):>10}"
              f"{share(s['pauses']['share']):>9}{ms(s['latency_ms']['p50']):>9}{ms(s['latency_ms']['p95']):>9}"
              f"{ms(s['latency_ms']['p99']):>9}{share(s['chars_saved_share']):>7}{secs(first):>8}"
              f"{s['cpu_s_per_typing_min'] or 0:>9}{secs(s['idle_settle_s']['p50']):>7}")


async def amain(args) -> int:
    from engine.engine import resolve_model_dir
    from engine.model.manifest import load_manifest

    model_dir = resolve_model_dir(args.model)
    args.model_dir = str(model_dir)
    manifest = load_manifest(model_dir)
    servers: dict[str, str] = {}
    models: dict[str, str] = {}
    for spec in args.server or [f"cur={ROOT}"]:
        name, _, tree = spec.partition("=")
        tree, _, model = tree.partition("@")  # NAME=TREE@MODEL: this server on its own model
        if model:
            models[name] = str(resolve_model_dir(model))
        if not name or not tree or "/" in name or not (Path(tree) / "lsp_server" / "__main__.py").exists():
            raise SystemExit(f"--server {spec!r}: expected NAME=TREE with TREE/lsp_server/__main__.py")
        if name in servers:
            raise SystemExit(f"--server {name!r} given twice")
        servers[name] = str(Path(tree).resolve())
    typists = [t.strip() for t in args.typists.split(",") if t.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for t in typists:
        if t not in TYPISTS:
            raise SystemExit(f"unknown typist {t!r} (choose from {', '.join(TYPISTS)})")
    per_segment = max(40, int(args.keys * 1.15 / (len(args.only) or args.functions)))  # accepts skip characters
    segments = pypi_segments(args.functions, per_segment, Path(args.pkg_cache), args.only)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="flint-replay-"))
    logs = work / "logs"
    logs.mkdir()
    mode_opts = {
        "off": {"speculation": False, "cacheSizeMb": 0},
        "on": {"speculation": True, "cacheSizeMb": 256},
        "restart": {"speculation": True, "cacheSizeMb": 256},
    }
    server_opts: dict[str, dict] = {}
    for spec in args.options or []:  # NAME=JSON: that server's settings on top of the mode's
        name, _, raw = spec.partition("=")
        if name not in servers:
            raise SystemExit(f"--options {spec!r}: no server named {name!r}")
        try:
            server_opts[name] = json.loads(raw)
        except ValueError as e:
            raise SystemExit(f"--options {spec!r}: {e}") from None
        capable = server_opts[name].get("capableModel")
        if capable:  # each server runs with its own FLINT_HOME: a preset name is resolved here, as @MODEL is
            server_opts[name]["capableModel"] = str(resolve_model_dir(capable))
    order = [(t, s, m) for t in typists for s in servers for m in modes]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    meta = {
        "command": "python scripts/bench_replay.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "cpu": cpu_model(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "load_average": " / ".join(f"{x:.2f}" for x in load),
        "model": manifest.model_id if manifest else str(model_dir),
        "threads": args.threads,
        "rounds": args.rounds,
        "order": [config_name(s, t, m) for t, s, m in order],
        "servers": {k: {"tree": v, "commit": git_commit(v), **({"model": models[k]} if k in models else {}),
                        **({"options": server_opts[k]} if k in server_opts else {})}
                    for k, v in servers.items()},
        "corpus_note": "function bodies typed after their signature and docstring, from wheels fetched with "
                       "`pip download --no-deps`; none of these packages is in the trimmed-head corpus (standard "
                       "library, /usr/include, global node_modules, /usr/share/doc; engine/model/lm_head.py), "
                       "bench_quality's pygls/lsprotocol, engine/data/eval_prompts.json or Flint",
        "segments": [f"{s.name} (line {s.before.count(chr(10)) + 1} of {s.file_lines}, {len(s.typed)} chars)"
                     for s in segments],
        "typists": {t: TYPISTS[t].describe() for t in typists},
        "seed": args.seed,
    }
    if args.reference is not None:  # before any server: never two engines at once
        gguf = args.reference or str((manifest.source if manifest else {}).get("gguf", ""))
        meta["reference"] = reference(segments, gguf, typists, args.seed, args.threads)
    if args.reference_only:
        (out / "replay.json").write_text(json.dumps({"meta": meta, "summaries": [], "runs": []}))
        (out / "replay.md").write_text("\n".join([
            "# Replay benchmark: the model asked directly", "",
            f"Generated by `{meta['command']}` on {meta['date']} UTC ({meta['cpu']}; {meta['machine']}). "
            f"{meta['threads']} threads. Code ({meta['corpus_note']}): " + ", ".join(f"`{s}`" for s in meta["segments"])
            + ".", "", "Typists: " + "; ".join(f"`{k}`: {v}" for k, v in meta["typists"].items()) + ".", "",
            *reference_lines(meta["reference"])]))
        print(f"wrote {out / 'replay.md'}")
        return 0
    runs: list[Run] = []
    try:
        for rnd in range(args.rounds):
            for t, s, m in order:
                name = config_name(s, t, m)
                cache = work / f"{s}-{t}-r{rnd}"  # restart reuses the cache its `on` filled this round
                env = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_HOME": str(cache / "home"),
                       "FLINT_CACHE_DIR": str(cache / ("cache" if m != "off" else "cache-off"))}
                if m == "on":
                    shutil.rmtree(cache, ignore_errors=True)
                print(f"[{name} r{rnd}] {len(segments)} functions, up to {args.keys} keystrokes ...", flush=True)
                run = Run(name, s, t, m, rnd)
                try:
                    await run_config(run, servers[s], {**mode_opts[m], **server_opts.get(s, {})}, segments, TYPISTS[t],
                                     args, env, logs, models.get(s))
                except Exception as e:  # one broken server must not lose the other configurations
                    print(f"[{name} r{rnd}] failed: {type(e).__name__}: {e}", flush=True)
                    continue
                sm = summarize([run])
                print(f"[{name} r{rnd}] {sm['keystrokes']} keys in {sm['wall_s']} s: answered "
                      f"{share(sm['with_suggestion'] / max(1, sm['keystrokes']))}, pauses {share(sm['pauses']['share'])}, "
                      f"p50 {ms(sm['latency_ms']['p50'])}, p95 {ms(sm['latency_ms']['p95'])}, saved "
                      f"{share(sm['chars_saved_share'])}, cpu/min {sm['cpu_s_per_typing_min']}", flush=True)
                runs.append(run)
                write_outputs(runs, meta, out, final=False)  # a partial replay.json survives an interruption
    finally:
        if args.keep_logs:
            print(f"server logs kept in {logs}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    write_outputs(runs, meta, out, final=True)
    return 0


def reference(segments: list[Segment], gguf: str, typists: list[str], seed: int, threads: int) -> dict:
    """The GGUF asked directly at every keystroke, no latency, for each typist's timing and a patient typist
    (scripts/replay_reference.py)."""
    from replay_reference import DirectModel, ReferenceResult, memo_completer, simulate

    from engine.config import EngineConfig

    if not gguf or not Path(gguf).is_file():
        raise SystemExit(f"--reference: no GGUF at {gguf!r} (give its path)")
    try:
        import llama_cpp
    except ImportError:
        raise SystemExit("--reference needs llama-cpp-python (pip install llama-cpp-python)") from None
    cfg = EngineConfig()
    names = ["patient", *dict.fromkeys(t for t in typists if t != "patient")]
    print(f"[reference] {Path(gguf).name} through llama-cpp-python {llama_cpp.__version__} ...", flush=True)
    model = DirectModel(gguf, threads)
    totals = {t: ReferenceResult() for t in names}
    call_s: list[float] = []
    for seg_no, seg in enumerate(segments):
        complete = memo_completer(model, seg.before, seg.after, seg.typed, cfg.max_prefix_chars,
                                  cfg.max_suffix_chars, call_s)
        for t in names:
            typist = TYPISTS[t]

            def interval(n: int, text: str, typist: Typist = typist, seg_no: int = seg_no) -> float:
                return typist.interval(state_rng(seed, seg_no, n), text)

            r = simulate(seg.typed, complete, None if t == "patient" else interval,
                         0.0 if t == "patient" else typist.reaction_s)
            totals[t].add(r)
        print(f"[reference] {seg.name}: " + ", ".join(
            f"{t} {totals[t].chars_saved}" for t in names) + f" chars saved so far, {len(call_s)} calls", flush=True)
    del model
    return {"gguf": Path(gguf).name, "llama_cpp": llama_cpp.__version__,
            "window": [cfg.max_prefix_chars, cfg.max_suffix_chars], "calls": len(call_s),
            "call_ms_p50": round(1000 * (pct(call_s, 50) or 0), 1),
            "typists": {t: asdict(r) for t, r in totals.items()}}


def reference_lines(ref: dict | None) -> list[str]:
    if not ref:
        return []

    def row(t: str, r: dict) -> str:
        who = "patient (takes every right ghost at once)" if t == "patient" else f"`{t}`'s timing, Tab after 0.3 s"
        return (f"| {who} | {r['chars_saved']} of {r['target_chars']} ({share(r['chars_saved'] / max(1, r['target_chars']))})"
                f" | {r['keys_saved']} of {r['target_keys']} ({share(r['keys_saved'] / max(1, r['target_keys']))})"
                f" | {r['tabs']} |")

    return [
        "## The model asked directly (the quality reference)",
        "",
        f"`{ref['gguf']}` through llama-cpp-python {ref['llama_cpp']}: plain FIM over the engine's window "
        f"({ref['window'][0]:,} characters before the cursor, {ref['window'][1]} after), greedy, stopped at the "
        "first line break, its line on screen the moment a keystroke is made (no latency); the ghost stays while "
        "typed through and is asked again when taken or contradicted. Each typist's timing as above; the model "
        f"was asked at {ref['calls']} states, {ref['call_ms_p50']:.0f} ms each (p50; not part of the simulation). "
        "What this model and window save when speed costs nothing (`scripts/replay_reference.py`):",
        "",
        "| typist | characters saved | in keystrokes | Tabs |",
        "|---|---|---|---|",
        *[row(t, r) for t, r in ref["typists"].items()],
        "",
    ]


def write_outputs(runs: list[Run], meta: dict, out: Path, final: bool) -> None:
    """replay.json and replay.md (+ PNGs when ``final``) from the runs so far."""
    groups = group(runs)
    summaries = [summarize(rs) for rs in groups.values()]
    add_overlap(groups, summaries)
    meta = {**meta, "complete": final}
    (out / "replay.json").write_text(json.dumps({
        "meta": meta, "summaries": summaries,
        "runs": [{"config": r.config, "server": r.server, "typist": r.typist, "mode": r.mode, "round": r.round,
                  "wall_s": round(r.wall_s, 1), "segments": [asdict(s) for s in r.segments],
                  "keys": [{k: v for k, v in asdict(key).items() if k != "sent"} for key in r.keys]}
                 for r in runs]}, indent=None, separators=(",", ":")))
    if final:
        print_table(summaries)
        plots = plot(groups, out)
        (out / "replay.md").write_text(report(summaries, meta, plots))
        print(f"wrote {out / 'replay.md'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", action="append", metavar="NAME=TREE[@MODEL]",
                   help="a server to test: run `python -m lsp_server` with PYTHONPATH=TREE, on MODEL if given "
                        "(repeat; default: this tree)")
    p.add_argument("--options", action="append", metavar="NAME=JSON",
                   help='settings (initializationOptions) for the server NAME, e.g. cut=\'{"confidenceCut": 0.5}\' '
                        "(repeat; the same tree may run as two servers with different settings)")
    p.add_argument("--typists", default="steady,think,open", help=f"comma-separated: {', '.join(TYPISTS)}")
    p.add_argument("--modes", default="on", help="comma-separated: off, on, restart (default on)")
    p.add_argument("--rounds", type=int, default=1, help="repeat every configuration, A B A B (default 1)")
    p.add_argument("--keys", type=int, default=900, help="keystrokes per configuration and round (default 900)")
    p.add_argument("--functions", type=int, default=6, help=f"functions to type (1-{len(FUNCTIONS)}, default 6)")
    p.add_argument("--only", default="", help="comma-separated function names to type instead (a look at a few "
                   f"spots, not a benchmark): {', '.join(f[3] for f in FUNCTIONS)}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default=None, help="preset or model directory (default: the default model)")
    p.add_argument("--pkg-cache", default=str(Path.home() / ".cache" / "flint-bench" / "pypi"),
                   help="where the pinned PyPI wheels are downloaded and unpacked")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--reference", nargs="?", const="", default=None, metavar="GGUF",
                   help="first type the code with the GGUF asked directly at every keystroke, no latency (the "
                        "quality reference; llama-cpp-python; default GGUF: the one the model was built from)")
    p.add_argument("--reference-only", action="store_true", help="only the reference (no server runs)")
    p.add_argument("--keep-logs", action="store_true", help="keep the servers' stderr logs (verbose)")
    p.add_argument("--render-only", action="store_true", help="redraw the report from --out/replay.json")
    args = p.parse_args()
    if args.reference_only and args.reference is None:
        args.reference = ""
    if args.render_only:
        return render_only(Path(args.out))
    if not 1 <= args.functions <= len(FUNCTIONS):
        p.error(f"--functions must be 1-{len(FUNCTIONS)}")
    args.only = tuple(x for x in args.only.split(",") if x)
    unknown = set(args.only) - {f[3] for f in FUNCTIONS}
    if unknown:
        p.error(f"--only: unknown functions {sorted(unknown)}")
    modes = args.modes.split(",")
    if "restart" in modes and ("on" not in modes or modes.index("on") > modes.index("restart")):
        p.error("restart replays on the cache that `on` fills: list `on` before it")
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
