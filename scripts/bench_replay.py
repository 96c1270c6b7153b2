#!/usr/bin/env python
"""Keystroke -> suggestion latency on replayed typing, through the real `flint serve` over stdio.

An editor is simulated the way VS Code drives an inline-completion server: the file is open with a
region removed; the region is typed back one keystroke at a time (``didChange`` per keystroke, an
automatic ``textDocument/inlineCompletion`` right after it, ``$/cancelRequest`` for the previous one
if it is still open). When the suggestion on screen is what the file says next, the simulated user
accepts it (Tab; or the first line of a block that only matches there) once it has been visible for a
reaction time. Enter inserts the line break plus the next line's indentation (a perfect auto-indent),
so indentation is not typed. Before typing in a file, the editor asks once at the cursor (the cursor
landed there) and typing starts when the server has finished that first whole-prompt generation: its
time is reported apart, as it depends on the file and the engine only (``--cold`` types at once).

Per configuration it measures:

- keystroke -> suggestion latency (didChange sent -> non-empty response received), p50/p95/p99;
- where each answer came from (``type-through`` | ``memory`` | ``disk`` | ``model``, as the server
  reports it in flint/status), over all keystrokes and over keystrokes *inside a shown suggestion*
  (the typed character is the one the ghost text showed);
- characters saved by accepting (accepted characters minus the Tab keystrokes).

Configurations, same keystroke script (seeded), one server process each:

- ``off``: speculation and the disk cache switched off (``speculation: false``, ``cacheSizeMb: 0``):
  each request is its own model call, as a plain server does it;
- ``on``: the defaults, with an empty disk cache;
- ``restart``: a new server process on the cache ``on`` left behind, same replay: answers from disk.

Writes docs/benchmarks/replay.md, replay.json and two PNGs (latency histogram and CDF).

    python scripts/bench_replay.py                    # ~300 keystrokes per configuration
    python scripts/bench_replay.py --keys 1000        # longer
    python scripts/bench_replay.py --configs on --keys 60 --out /tmp/replay   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOURCES = ("type-through", "memory", "disk", "model")
ANSWER_RE = re.compile(r"^(model|memory|disk|type-through)( \((\w+) entry\))? in ")


# ------------------------------------------------------------------------------------------------ corpus


@dataclass
class Segment:
    name: str
    language: str
    path: str
    before: str  # file text before the typed region
    typed: str  # the region the user types (ends before a line break that stays in the document)
    after: str  # file text after the region (starts with that line break)


def default_corpus() -> list[tuple[str, str, str]]:
    """(path, language id, start marker): Python standard library files and a JavaScript file from the
    VS Code extension's dependencies (both are on this machine; neither was written for Flint)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    js = ROOT / "editor-extension/vscode/node_modules/vscode-jsonrpc/lib/common/linkedMap.js"
    js_entry = (str(js), "javascript", "    forEach(callbackfn, thisArg) {")
    if not js.exists():  # the extension's dependencies are not installed: npm's own copy of semver
        npm_js = Path(shutil.which("npm") or "/usr/bin/npm").resolve().parent.parent / "node_modules/semver/classes/comparator.js"
        js_entry = (str(npm_js), "javascript", "  parse (comp) {")
    return [
        (str(stdlib / "textwrap.py"), "python", "    def _split_chunks(self, text):"),
        (str(stdlib / "shlex.py"), "python", "def split(s, comments=False, posix=True):"),
        js_entry,
        (str(stdlib / "graphlib.py"), "python", "    def done(self, *nodes):"),
        (str(stdlib / "fnmatch.py"), "python", "def filter(names, pat):"),
    ]


def make_segment(path: str, language: str, marker: str, chars: int) -> Segment:
    text = Path(path).read_text(encoding="utf-8")
    start = text.find(marker)
    if start < 0 or (start > 0 and text[start - 1] != "\n"):
        raise SystemExit(f"{path}: start marker {marker!r} not found at a line start")
    # the region: whole lines from the marker until about ``chars`` characters are covered
    end = start
    while end < len(text) and end - start < chars:
        nl = text.find("\n", end)
        end = len(text) if nl < 0 else nl + 1
    end -= 1  # keep the last line break in the document: the cursor types before it
    return Segment(f"{Path(path).name}:{text[:start].count(chr(10)) + 1}", language, path,
                   text[:start], text[start:end], text[end:])


# ------------------------------------------------------------------------------------------ LSP over stdio


class Server:
    """A minimal JSON-RPC client for `flint serve` (stdio), timing every message on arrival."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self._id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.statuses: list[tuple[float, dict]] = []
        self._reader: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.stderr_path: Path | None = None

    async def start(self, cmd: list[str], env: dict[str, str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.PIPE, stderr=self._stderr,
                                                         env=env, limit=2**24)
        self._reader = asyncio.create_task(self._read())

    def _send(self, msg: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: dict) -> tuple[int, asyncio.Future]:
        self._id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self._id] = fut
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        return self._id, fut

    def cancel(self, msg_id: int) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            headers = await out.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"Content-Length: (\d+)", headers).group(1))
            msg = json.loads(await out.readexactly(length))
            now = time.perf_counter()
            if "id" in msg and "method" in msg:  # a request from the server: accept it plainly
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                fut = self.pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result((now, msg))
            elif msg.get("method") == "flint/status":
                self.statuses.append((now, msg["params"]))
                if msg["params"].get("state") in ("ready", "error"):
                    self.ready.set()

    async def stop(self) -> None:
        if self.proc is None:
            return
        try:
            _, fut = self.request("shutdown", {})
            await asyncio.wait_for(fut, 30)
            self.notify("exit", {})
            await asyncio.wait_for(self.proc.wait(), 30)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()
        self._stderr.close()


def utf16_position(text: str, offset: int) -> dict:
    line = text.count("\n", 0, offset)
    col_text = text[text.rfind("\n", 0, offset) + 1: offset]
    return {"line": line, "character": len(col_text.encode("utf-16-le")) // 2}


# ---------------------------------------------------------------------------------------------- the user


@dataclass
class Typist:
    """Timing of the simulated user (seconds), after the keystroke-level model (Card, Moran & Newell):
    keystrokes at ~6 characters/s within a burst (about 70 words per minute), and the KLM's mental
    operator (1.35 s) before each new line and, with probability ``pause_p``, at a word boundary."""

    key_s: float = 1 / 6
    jitter: float = 0.35  # each interval is key_s * uniform(1 - jitter, 1 + jitter)
    mental_s: float = 1.35  # KLM "M": deciding what to type next
    pause_p: float = 0.15  # chance of an M after a space or , ( = :
    reaction_s: float = 0.3  # a suggestion must have been visible this long before Tab

    def interval(self, rng: random.Random, typed: str) -> float:
        dt = self.key_s * rng.uniform(1 - self.jitter, 1 + self.jitter)
        if typed.startswith("\n"):
            dt += self.mental_s
        elif typed[-1:] in " ,(=:" and rng.random() < self.pause_p:
            dt += self.mental_s
        return dt

    def describe(self) -> str:
        return (f"{1 / self.key_s:.1f} characters/s ±{int(100 * self.jitter)}% within bursts, a {self.mental_s} s "
                f"pause (KLM mental operator) after each Enter and with probability {self.pause_p} after a space "
                f"or `,(=:`, Tab once a suggestion has been visible {self.reaction_s} s, Enter auto-indents")


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


@dataclass
class Run:
    config: str
    keys: list[Key] = field(default_factory=list)
    target_chars: int = 0
    wall_s: float = 0.0
    model_load_s: float = 0.0
    cold_s: list[float] = field(default_factory=list)  # per segment: the first whole-prompt generation
    busy_s: list[float] = field(default_factory=list)  # engine busy stretches (busy .. ready), seconds


async def replay(server: Server, segments: list[Segment], typist: Typist, seed: int, run: Run,
                 max_keys: int, warm_start: bool = True) -> None:
    rng = random.Random(seed)
    version = 0
    for seg_no, seg in enumerate(segments):
        if len(run.keys) >= max_keys:
            break
        uri = f"file:///replay/{seg_no}-{Path(seg.path).name}"
        doc = seg.before + seg.after
        cursor = len(seg.before)
        version = 1
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": seg.language, "version": version, "text": doc}})
        run.target_chars += len(seg.typed)
        await asyncio.sleep(1.0)  # the file is open; the user starts typing a moment later
        if warm_start:
            # the cursor lands at the spot and the editor asks there once; typing starts when the server
            # has finished its first (whole-prompt) generation. Its time is reported apart ("cold").
            n_status = len(server.statuses)
            t_cold = time.perf_counter()
            _, fut = server.request("textDocument/inlineCompletion", {
                "context": {"triggerKind": 2}, "textDocument": {"uri": uri},
                "position": utf16_position(doc, cursor)})
            answered_at, _ = await asyncio.wait_for(fut, 120)
            deadline = time.perf_counter() + 120
            while time.perf_counter() < deadline:
                engine_says = [p["message"] for _, p in server.statuses[n_status:]
                               if p.get("message") in ("generating", "ready")]
                if engine_says and engine_says[-1] == "ready":
                    break
                if not engine_says and time.perf_counter() - answered_at > 1.0:
                    break  # answered without the model (from disk): nothing to wait for
                await asyncio.sleep(0.05)
            run.cold_s.append(round(time.perf_counter() - t_cold, 2))
        typed = 0  # characters of seg.typed in the document
        shown: tuple[str, float, int] | None = None  # (text, time shown, document version)
        last_req: tuple[int, asyncio.Future, Key] | None = None
        next_at = time.perf_counter()

        def harvest(req: tuple[int, asyncio.Future, Key] | None, now_version: int) -> None:
            """Record answers that arrived; the latest one for the current version is on screen."""
            nonlocal shown
            if req is None:
                return
            _, fut, key = req
            if key.outcome != "pending" or not fut.done():
                return
            t, msg = fut.result()
            if "error" in msg:
                key.outcome = "superseded" if msg["error"].get("code") in (-32800, -32801, -32802) else "error"
                return
            items = (msg.get("result") or {}).get("items") or []
            if not items or not items[0].get("insertText"):
                key.outcome = "empty"
                return
            key.outcome = "suggestion"
            key.latency_ms = (t - key.sent) * 1000
            st = next((p for ts, p in reversed(server.statuses) if ts <= t and ANSWER_RE.match(p.get("message", ""))),
                      None)
            if st is not None:
                m = ANSWER_RE.match(st["message"])
                key.source, key.origin = m.group(1), m.group(3) or ("disk" if m.group(1) == "disk" else None)
            text = items[0]["insertText"]
            if shown is not None and shown[2] == now_version and shown[0] and \
                    (text.startswith(shown[0]) or shown[0].startswith(text)):
                shown = (text, shown[1], now_version)  # the same suggestion, on screen since it first came
            else:
                shown = (text, t, now_version)

        while typed < len(seg.typed) and len(run.keys) < max_keys:
            # wait for the next action, recording answers as they come
            while True:
                harvest(last_req, version)
                now = time.perf_counter()
                if now >= next_at:
                    break
                waiters = [last_req[1]] if last_req and not last_req[1].done() else []
                if waiters:
                    await asyncio.wait(waiters, timeout=next_at - now)
                else:
                    await asyncio.sleep(next_at - now)
            harvest(last_req, version)
            rest = seg.typed[typed:]
            action, text = None, ""
            if shown is not None and shown[2] == version and time.perf_counter() - shown[1] >= typist.reaction_s:
                ghost = shown[0].replace("\r\n", "\n")
                first = ghost.split("\n", 1)[0]
                if ghost.strip() and rest.startswith(ghost):
                    action, text = "tab", ghost
                elif "\n" in ghost and first.strip() and rest.startswith(first + "\n"):
                    action, text = "tab-line", first
            if action is None:
                ch = rest[0]
                if ch == "\n":
                    nxt = rest[1:].split("\n", 1)[0]
                    indent = nxt[: len(nxt) - len(nxt.lstrip(" \t"))]
                    action, text = "enter", "\n" + indent
                else:
                    action, text = "char", ch
            in_ghost = (action in ("char", "enter") and shown is not None and shown[2] == version
                        and shown[0].replace("\r\n", "\n").startswith(text))
            # the edit
            pos = utf16_position(doc, cursor)
            doc = doc[:cursor] + text + doc[cursor:]
            cursor += len(text)
            typed += len(text)
            version += 1
            if last_req is not None and last_req[2].outcome == "pending":
                server.cancel(last_req[0])  # as VS Code does when it asks again
                last_req[2].outcome = "superseded"
            sent = time.perf_counter()
            server.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": pos, "end": pos}, "text": text}]})
            key = Key(seg.name, action, text, sent, in_ghost=in_ghost,
                      saved=len(text) - 1 if action in ("tab", "tab-line") else 0, at=typed)
            run.keys.append(key)
            msg_id, fut = server.request("textDocument/inlineCompletion", {
                "context": {"triggerKind": 2}, "textDocument": {"uri": uri},
                "position": utf16_position(doc, cursor)})
            last_req = (msg_id, fut, key)
            shown = (shown[0][len(text):], shown[1], version) if in_ghost and shown is not None else None
            next_at = sent + typist.interval(rng, text)
        # let the last answer land, then close the file
        if last_req is not None:
            try:
                await asyncio.wait_for(asyncio.shield(last_req[1]), 5)
            except TimeoutError:
                pass
            harvest(last_req, version)
            if last_req[2].outcome == "pending":
                last_req[2].outcome = "superseded"
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


async def run_config(name: str, options: dict, segments: list[Segment], args, env: dict[str, str],
                     logs: Path) -> Run:
    server = Server()
    cmd = [sys.executable, "-m", "lsp_server", "--threads", str(args.threads), "--model", args.model_dir,
           *(["-v"] if args.keep_logs else [])]
    t0 = time.perf_counter()
    await server.start(cmd, env, logs / f"server-{name}.log")
    _, init = server.request("initialize", {
        "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "bench-replay", "version": "1"},
        "capabilities": {"textDocument": {"synchronization": {"dynamicRegistration": False},
                                          "inlineCompletion": {}}},
        "initializationOptions": options})
    await asyncio.wait_for(init, 120)
    server.notify("initialized", {})
    await asyncio.wait_for(server.ready.wait(), 300)
    run = Run(name, model_load_s=time.perf_counter() - t0)
    t1 = time.perf_counter()
    await replay(server, segments, Typist(key_s=1 / args.cps, pause_p=args.pause_p), args.seed, run, args.keys,
                 not args.cold)
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


def summarize(run: Run) -> dict:
    keys = run.keys
    n = len(keys)
    answered = [k for k in keys if k.outcome == "suggestion"]
    lat = [k.latency_ms for k in answered if k.latency_ms is not None]
    by_source = {s: sum(k.source == s for k in answered) for s in SOURCES}
    inside = [k for k in keys if k.in_ghost]
    inside_ok = [k for k in inside if k.outcome == "suggestion" and k.source not in (None, "model")]
    from_disk = [k for k in answered if k.source == "disk" or k.origin == "disk"]
    tabs = [k for k in keys if k.kind in ("tab", "tab-line")]
    return {
        "config": run.config,
        "keystrokes": n,
        "typed_chars": sum(len(k.text) for k in keys if k.kind in ("char", "enter")),
        "target_chars": run.target_chars,
        "wall_s": round(run.wall_s, 1),
        "server_ready_s": round(run.model_load_s, 1),
        "cold_first_generation_s": run.cold_s,
        "engine_busy_stretch_s": {"count": len(run.busy_s), "p50": round(pct(run.busy_s, 50) or 0, 2),
                                  "total": round(sum(run.busy_s), 1)},
        "with_suggestion": len(answered),
        "empty": sum(k.outcome == "empty" for k in keys),
        "superseded": sum(k.outcome == "superseded" for k in keys),
        "errors": sum(k.outcome == "error" for k in keys),
        "latency_ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99),
                       "mean": round(statistics.fmean(lat), 1) if lat else None},
        "share_of_keystrokes": {s: round(by_source[s] / n, 3) if n else 0.0 for s in SOURCES}
        | {"none": round((n - len(answered)) / n, 3) if n else 0.0},
        "share_of_answers": {s: round(by_source[s] / len(answered), 3) if answered else 0.0 for s in SOURCES},
        "no_model_call_share_of_answers": round(1 - by_source["model"] / len(answered), 3) if answered else 0.0,
        "inside_suggestion": {"keystrokes": len(inside), "answered_without_model": len(inside_ok),
                              "share": round(len(inside_ok) / len(inside), 3) if inside else None},
        "from_disk_share_of_answers": round(len(from_disk) / len(answered), 3) if answered else 0.0,
        "accepts": len(tabs),
        "chars_saved": sum(k.saved for k in keys),
        "chars_saved_share": round(sum(k.saved for k in keys) / run.target_chars, 3) if run.target_chars else 0.0,
    }


def restart_overlap(first: Run, again: Run) -> dict:
    """The editor states (segment, characters typed) the first run answered that the restart visited too
    (accepts make the two keystroke scripts differ slightly), and how many of them the restart answered from
    disk entries (directly or typed through) / at all."""
    answered = {(k.segment, k.at) for k in first.keys if k.outcome == "suggestion"}
    revisits = [k for k in again.keys if (k.segment, k.at) in answered]
    disk = [k for k in revisits if k.outcome == "suggestion" and (k.source == "disk" or k.origin == "disk")]
    any_ = [k for k in revisits if k.outcome == "suggestion"]
    return {"states": len(revisits), "from_disk": len(disk), "answered": len(any_),
            "from_disk_share": round(len(disk) / len(revisits), 3) if revisits else None}


def add_overlap(runs: list[Run], summaries: list[dict]) -> None:
    by = {r.config: r for r in runs}
    if "on" in by and "restart" in by:
        for sm in summaries:
            if sm["config"] == "restart":
                sm["restart_overlap"] = restart_overlap(by["on"], by["restart"])


def plot(runs: list[Run], out: Path) -> tuple[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"off": "#888888", "on": "#d9480f", "restart": "#1c7ed6"}
    lat = {r.config: [k.latency_ms for k in r.keys if k.latency_ms is not None] for r in runs}
    hi = max([max(v) for v in lat.values() if v] + [10.0])
    bins = [10 ** (x / 10) for x in range(0, int(math.log10(hi) * 10) + 2)]  # 1 ms .. max, log-spaced
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for r in runs:
        if lat[r.config]:
            ax.hist(lat[r.config], bins=bins, alpha=0.55, label=f"{r.config} ({len(lat[r.config])} answers)",
                    color=colors.get(r.config))
    ax.set_xscale("log")
    ax.set_xlabel("keystroke → suggestion (ms, log scale)")
    ax.set_ylabel("keystrokes")
    ax.set_title("Latency of answered keystrokes")
    ax.legend()
    fig.tight_layout()
    hist = out / "replay_hist.png"
    fig.savefig(hist, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4.2))
    for r in runs:
        n = len(r.keys)
        v = sorted(lat[r.config])
        if not v:
            continue
        # share of *all* keystrokes with a suggestion within x ms (keystrokes never answered never arrive)
        ax.step(v, [(i + 1) / n for i in range(len(v))], where="post", label=r.config, color=colors.get(r.config))
    for x in (40, 150):
        ax.axvline(x, color="#bbbbbb", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("keystroke → suggestion (ms, log scale)")
    ax.set_ylabel("share of all keystrokes answered within")
    ax.set_title("CDF over keystrokes (unanswered keystrokes never reach 1.0)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    cdf = out / "replay_cdf.png"
    fig.savefig(cdf, dpi=110)
    plt.close(fig)
    return hist.name, cdf.name


def ms(v: float | None) -> str:
    return "–" if v is None else (f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms")


def share(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def report(summaries: list[dict], meta: dict, hist: str, cdf: str) -> str:
    cols = [s["config"] for s in summaries]
    rows = [
        ("keystrokes (chars, Enter, Tab)", [str(s["keystrokes"]) for s in summaries]),
        ("engine busy stretches: count, median, total (s)",
         [f"{s['engine_busy_stretch_s']['count']}, {s['engine_busy_stretch_s']['p50']:.1f}, "
          f"{s['engine_busy_stretch_s']['total']:.0f}" for s in summaries]),
        ("first generation per file, before typing (s)", [", ".join(f"{x:.1f}" for x in s["cold_first_generation_s"])
                                                         or "–" for s in summaries]),
        ("answered with a suggestion", [f"{s['with_suggestion']} ({share(s['with_suggestion'] / max(1, s['keystrokes']))})"
                                        for s in summaries]),
        ("latency p50", [ms(s["latency_ms"]["p50"]) for s in summaries]),
        ("latency p95", [ms(s["latency_ms"]["p95"]) for s in summaries]),
        ("latency p99", [ms(s["latency_ms"]["p99"]) for s in summaries]),
        *[(f"answered from {src}", [share(s["share_of_keystrokes"][src]) for s in summaries]) for src in SOURCES],
        ("no suggestion (empty, superseded)", [share(s["share_of_keystrokes"]["none"]) for s in summaries]),
        ("answers with no model call", [share(s["no_model_call_share_of_answers"]) for s in summaries]),
        ("keystrokes inside a shown suggestion", [str(s["inside_suggestion"]["keystrokes"]) for s in summaries]),
        ("… answered with no model call", [share(s["inside_suggestion"]["share"]) for s in summaries]),
        ("answers from disk (incl. type-through of disk entries)", [share(s["from_disk_share_of_answers"])
                                                                    for s in summaries]),
        ("states `on` answered, revisited: answered from disk", [
            f"{share(s['restart_overlap']['from_disk_share'])} ({s['restart_overlap']['from_disk']} of "
            f"{s['restart_overlap']['states']})" if s.get("restart_overlap") else "–" for s in summaries]),
        ("accepts (Tab)", [str(s["accepts"]) for s in summaries]),
        ("characters saved", [f"{s['chars_saved']} of {s['target_chars']} ({share(s['chars_saved_share'])})"
                              for s in summaries]),
    ]
    lines = [
        "# Replay benchmark: keystroke → suggestion",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}; load average at start "
        f"{meta['load_average']}). Model `{meta['model']}`, {meta['threads']} threads.",
        "",
        "Real source files are typed back into the real `flint serve` over stdio, as VS Code drives an "
        "inline-completion server: one `didChange` per keystroke, an automatic `textDocument/inlineCompletion` "
        "right after it (the previous one cancelled with `$/cancelRequest` if still open), Tab when the "
        "suggestion on screen is what the file says next and has been visible for the reaction time. "
        "Latency is didChange sent → non-empty response received, per keystroke; the source of each answer "
        "is what the server reports in `flint/status`. Before typing in each file the editor asks once at "
        "the cursor and typing starts once that first whole-prompt generation is done (listed apart below).",
        "",
        f"Corpus: {', '.join(f'`{s}`' for s in meta['segments'])}. Typist: {meta['typist']}.",
        "",
        "| | " + " | ".join(f"`{c}`" for c in cols) + " |",
        "|---|" + "---|" * len(cols),
        *[f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows],
        "",
        "- `off`: `speculation: false, cacheSizeMb: 0`: every request is its own model call (exact repeats "
        "still come from the worker's one-entry memory).",
        "- `on`: defaults, empty disk cache: generation starts on didChange, type-through of finished and "
        "streaming generations, futures after each shown suggestion, idle KV warming, disk cache.",
        "- `restart`: a new server process on the disk cache `on` filled; same keystroke script.",
        "- Latency percentiles are over keystrokes that got a suggestion; the CDF is over all keystrokes "
        "(keystrokes with none never arrive, so a curve's height is also its answer rate).",
        "",
        "## Reading the numbers",
        "",
        *reading(summaries),
        "",
        f"![latency histogram]({hist})",
        "",
        f"![latency CDF]({cdf})",
        "",
        "Raw numbers, per keystroke, are in `replay.json`.",
        "",
    ]
    return "\n".join(lines)


def reading(summaries: list[dict]) -> list[str]:
    """What the table says, in words (computed from this run's numbers)."""
    by = {s["config"]: s for s in summaries}
    out = []
    if "off" in by:
        off = by["off"]
        out.append(
            f"- Without speculation each keystroke waits for its own generation: {share(off['with_suggestion'] / max(1, off['keystrokes']))} "
            f"of keystrokes got a suggestion before the next keystroke replaced the request (p50 "
            f"{ms(off['latency_ms']['p50'])} for those). A typist at this speed leaves ~170 ms between keys; the first "
            f"generation in each file took {', '.join(f'{x:.0f}' for x in off['cold_first_generation_s'])} s "
            f"(whole prompt); a later keystroke adds its own token(s) to the KV cache (the typed line sits after "
            f"the FIM middle token, engine/prompt.py), then a line of ~10-20 tokens is generated at ~30 tok/s: "
            f"longer than the gap to the next key.")
    if "on" in by:
        on = by["on"]
        ins = on["inside_suggestion"]
        out.append(
            f"- With speculation, every answer came without a model call at request time "
            f"({share(on['no_model_call_share_of_answers'])}): p50 {ms(on['latency_ms']['p50'])}, p95 "
            f"{ms(on['latency_ms']['p95'])}. {ins['keystrokes']} keystrokes typed what the ghost text showed; "
            f"{share(ins['share'])} of them were answered without the model. The share of keystrokes answered at all "
            f"({share(on['with_suggestion'] / max(1, on['keystrokes']))}) is bounded by how often a generation that started "
            f"seconds earlier still agrees with what the user typed since.")
    if "restart" in by:
        rs = by["restart"]
        out.append(
            f"- After a restart on the same disk cache, {share(rs['from_disk_share_of_answers'])} of answers came from "
            f"disk entries (directly, or typed through), and {share(rs['with_suggestion'] / max(1, rs['keystrokes']))} of "
            f"keystrokes were answered.")
        ov = rs.get("restart_overlap")
        if ov and ov["states"]:
            out.append(
                f"- The editor states `on` answered and the restart reached again ({ov['states']}; accepts make the "
                f"two keystroke scripts differ a little): {share(ov['from_disk_share'])} of them were answered from "
                f"disk entries after the restart ({ov['from_disk']}), {ov['answered']} answered at all.")
        if "on" in by:
            n_disk = round(rs["from_disk_share_of_answers"] * rs["with_suggestion"])
            out.append(
                f"- {n_disk} keystrokes were answered from disk after the restart, against {by['on']['with_suggestion']} "
                f"answered at all in `on` (which filled that cache): the disk gives back what the first run had, and the "
                f"model, free meanwhile, answers some keystrokes `on` had to leave empty (the rest of the answers).")
    return out


# -------------------------------------------------------------------------------------------------- main


def render_only(out: Path) -> int:
    """Redraw replay.md and the PNGs from replay.json (no replay)."""
    data = json.loads((out / "replay.json").read_text())
    runs = []
    for name, keys in data["keystrokes"].items():
        run = Run(name)
        run.keys = [Key(**{**k, "sent": 0.0}) for k in keys]
        runs.append(run)
    if all("at" in k for keys in data["keystrokes"].values() for k in keys):  # older reports lack the states
        add_overlap(runs, data["summaries"])
    hist, cdf = plot(runs, out)
    (out / "replay.md").write_text(report(data["summaries"], data["meta"], hist, cdf))
    print(f"wrote {out / 'replay.md'}")
    return 0


async def amain(args) -> int:
    from engine.engine import resolve_model_dir
    from engine.manifest import load_manifest

    model_dir = resolve_model_dir(args.model)
    args.model_dir = str(model_dir)
    manifest = load_manifest(model_dir)
    corpus = default_corpus()[: args.files]
    per_segment = max(40, int(args.keys * 1.15 / len(corpus)))  # accepts skip characters: a little extra
    segments = [make_segment(p, lang, marker, per_segment) for p, lang, marker in corpus]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="flint-replay-"))
    logs = work / "logs"
    logs.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_HOME": str(work / "home"),
           "FLINT_CACHE_DIR": str(work / "cache")}
    configs = {
        "off": {"speculation": False, "cacheSizeMb": 0},
        "on": {"speculation": True, "cacheSizeMb": 256},
        "restart": {"speculation": True, "cacheSizeMb": 256},
    }
    wanted = [c.strip() for c in args.configs.split(",") if c.strip()]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    runs = []
    try:
        for name in wanted:
            print(f"[{name}] replaying {len(segments)} segments, up to {args.keys} keystrokes ...", flush=True)
            run = await run_config(name, configs[name], segments, args, env, logs)
            s = summarize(run)
            print(f"[{name}] {s['keystrokes']} keystrokes in {s['wall_s']} s: p50 {ms(s['latency_ms']['p50'])}, "
                  f"p95 {ms(s['latency_ms']['p95'])}, answered {s['with_suggestion']}, "
                  f"sources {s['share_of_keystrokes']}", flush=True)
            runs.append(run)
    finally:
        if args.keep_logs:
            print(f"server logs kept in {logs}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    summaries = [summarize(r) for r in runs]
    add_overlap(runs, summaries)
    typist = Typist(key_s=1 / args.cps, pause_p=args.pause_p)
    meta = {
        "command": "python scripts/bench_replay.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": " / ".join(f"{x:.2f}" for x in load),
        "model": manifest.model_id if manifest else str(model_dir),
        "threads": args.threads,
        "segments": [f"{s.name} ({s.language}, {len(s.typed)} chars)" for s in segments],
        "typist": f"{typist.describe()}; seed {args.seed}",
    }
    hist, cdf = plot(runs, out)
    (out / "replay.md").write_text(report(summaries, meta, hist, cdf))
    (out / "replay.json").write_text(json.dumps({
        "meta": meta, "summaries": summaries,
        "keystrokes": {r.config: [{k: v for k, v in asdict(key).items() if k != "sent"} for key in r.keys]
                       for r in runs}}, indent=1))
    print(f"wrote {out / 'replay.md'}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=300, help="keystrokes per configuration (default 300)")
    p.add_argument("--files", type=int, default=3, help="corpus files to draw segments from (1-5, default 3)")
    p.add_argument("--configs", default="off,on,restart", help="comma-separated: off, on, restart")
    p.add_argument("--cps", type=float, default=6.0, help="typing speed within a burst, characters per second")
    p.add_argument("--pause-p", type=float, default=0.15, help="chance of a 1.35 s pause at a word boundary")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default=None, help="preset or model directory (default: the default model)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--cold", action="store_true",
                   help="start typing at once after opening each file (the first keystroke pays the whole prompt)")
    p.add_argument("--keep-logs", action="store_true", help="keep the servers' stderr logs (verbose)")
    p.add_argument("--render-only", action="store_true", help="redraw the report from --out/replay.json")
    args = p.parse_args()
    if args.render_only:
        return render_only(Path(args.out))
    if "restart" in args.configs and "on" not in args.configs:
        p.error("restart replays on the cache that `on` fills: include `on` before it")
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
