#!/usr/bin/env python
"""Keystroke -> suggestion on replayed typing, through the real `flint serve` over stdio; old policy vs new.

An editor is simulated the way VS Code drives an inline-completion server: the file is open with a
region removed; the region is typed back one keystroke at a time (``didChange`` per keystroke, an
automatic ``textDocument/inlineCompletion`` right after it, ``$/cancelRequest`` for the previous one
if it is still open; a typed-through ghost stays until that answer comes, and goes when it holds nothing). When
the suggestion on screen is what the file says next, the simulated user
accepts it (Tab; or the first line of a block that only matches there) once every character Tab inserts has
been on screen, in that form, for a reaction time (a ghost a later answer grew is read anew from there on:
replay_typist.readable_prefix). Enter inserts the line break plus the next line's indentation (a perfect auto-indent),
so indentation is not typed. Keystroke timing is seeded per round and editor state (seed, segment, characters
typed): within a round every server sees the same script until an accept makes the two diverge, and round r draws
seed ``--seed`` + r, so rounds are samples of the typist rather than replicas of one script.

Code (scripts/replay_corpus.py; issue 32): 60 function bodies from 10 pinned PyPI packages no corpus of ours
holds (cachetools 5.5.0, jmespath 1.0.1, pathspec 0.12.1, pycodestyle 2.12.1, pyflakes 3.2.0, python-dateutil
2.9.0.post0, sortedcontainers 2.4.0, sqlparse 0.5.1, tabulate 0.9.0, toml 0.10.2; not the standard library the
trimmed LM head is built from, engine/model/lm_head.py; not pygls/lsprotocol, bench_quality; not
engine/data/eval_prompts.json; not Flint; not the packages other benchmarks or earlier replays typed). They are
fetched at run time with ``pip download --no-deps <pkg>==<version>`` into ``--pkg-cache``. A fixed rule picks
the functions (module-level functions and methods whose body after the docstring is 3-12 lines and 80-180
characters and defines nothing inside; per package the first 6 by sha256 of ``package:module:qualname``) and
splits them, alternately within each package, into a **tuning** half (30 functions, ~4,000 characters) and a
**validation** half (30, ~4,100): about 6-8 minutes of the ``steady`` typist each. Four validation functions of
the language corpus were read while debugging and moved to tuning (replay_corpus.READ_WHILE_DEBUGGING). The
validation half has been typed by 13 A/B runs since issue 32 and decisions were taken on it: it is a second
tuning set, not held-out code. Held-out figures come from the **test** split (scripts/replay_test_split.py, issue
47): 40 Python functions from 10 further pinned, sha256-checked wheels, and 8 functions each of JavaScript,
TypeScript, Go and Rust; ``--split test`` types it with exactly two arms (``main`` and a baseline), whole, over
at least 3 seeds, and every run that types validation or test appends a row to docs/benchmarks/ledger.md (date,
each arm's commit, the command, ``--purpose``, the CPU). Each segment is the whole body of one function, typed after its signature and docstring. The
long-file figures (first suggestion in a file of >= 2,000 lines) come from the corpus's own long modules
(pycodestyle.py, pyflakes/checker.py, sortedcontainers/sortedlist.py, tabulate/__init__.py: 2,200-2,700 lines),
in both halves; the earlier replays' spots in more_itertools/more.py (~5,000 lines) are no longer typed.

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
disk cache ``on`` left behind). ``--split``: ``validation``, ``tuning``, ``both`` (default: validation
first, then tuning; the report shows every headline figure for validation beside tuning) or ``test``. An arm's
commit is read from TREE/COMMIT (write ``git rev-parse HEAD > TREE/COMMIT`` beside a ``git archive``
snapshot) or git in TREE, and recorded with the CPU's model and SIMD flags and the load at start and end. Every (half,
typist, server, mode) gets a fresh FLINT_CACHE_DIR (restart: the one its ``on`` filled); one server at a
time; ``--rounds N`` repeats the whole set in the same order (A B A B), round r on seed ``--seed`` + r, and pools
the keystrokes (the report gives the per-round values, and their mean and spread over the seeds, beside the pooled
ones). ``--keys N`` (a quick look) types only the first functions whose whole bodies fit in N keystrokes: every
arm types each of them to its end (the report's "functions typed"), so arms are scored on the same code.

Per configuration: keystrokes answered before the next key; pauses (>= 0.5 s to the next key; not the
keystroke that types a region to its end, where the rest of the file follows) whose keystroke got a
suggestion within 150 ms; latency of answers (didChange sent -> non-empty response): median (the
ordinary one), mean, p95, p99, per round and across packages; where answers came from (flint/status);
characters saved (saved / (saved + typed): the glossary in replay_report.GLOSSARY), per round and per package;
what the user also pays:
keystrokes typed under a wrong ghost, suggestions of <= 3 characters, server CPU seconds per minute of
typing (/proc/<pid>/stat) and per accepted character, and when the CPU is idle after the last keystroke of
each segment; time to the first suggestion after opening (``open``: from the first keystroke; others: the
request at the cursor). Writes replay.md, replay.json and PNGs under ``--out``; the CPU model
(lscpu) is recorded.

``--reference [GGUF]`` first types the same code with the GGUF the model was built from asked directly
(llama-cpp-python, plain FIM over the engine's window, greedy, one line) at every keystroke with no
latency, for each typist's timing and a patient typist: the quality reference the served rows must not
lose to (scripts/replay_reference.py; ``--reference-only``: that alone, no servers).

    python scripts/bench_replay.py --split tuning --functions 2 --keys 60 --typists steady \\
        --out /tmp/replay                                                             # a quick look
    git -C /work/main archive HEAD | tar -x -C /tmp/arm-main && git -C /work/main rev-parse HEAD > /tmp/arm-main/COMMIT
    flock /tmp/flint-heavy.lock python scripts/bench_replay.py --split test \\
        --server base=/tmp/arm-base --server main=/tmp/arm-main --typists steady,think,open --rounds 3 \\
        --purpose "main at <commit> beside issue 32's baseline" --out /tmp/replay-test   # the held-out figures
    flock /tmp/flint-heavy.lock python scripts/bench_replay.py \\
        --server old=/work/wt/old --server new=/work/wt/snap-abc1234 --rounds 2       # old vs new, both halves
    python scripts/replay_corpus.py                                                   # the chosen functions
    python scripts/bench_replay.py --modes off,on,restart --typists klm               # the older report
    python scripts/bench_replay.py --render-only                                      # redraw from JSON
    python scripts/bench_replay.py --reference-only --typists steady,think            # the model asked directly
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

# the names below are bench_replay's API as tests and replay_reference use it
import replay_test_split  # noqa: E402
import replay_train_split  # noqa: E402
from bench_meta import append_ledger, arm_commit, cpu_info, cpu_line, ledger_row, load_average  # noqa: E402
from lsp_stdio import Server, proc_cpu_seconds, utf16_position  # noqa: E402,F401
from replay_corpus import (  # noqa: E402,F401
    PACKAGES,
    SPLITS,
    Segment,
    Spec,
    body_region,
    choose,
    describe,
    fetch_package,
    function_segment,
    pick,
    round_seeds,
    size_to_keys,
)
from replay_corpus import candidates as corpus_candidates  # noqa: E402
from replay_corpus import segments as corpus_segments  # noqa: E402
from replay_languages import LANGUAGES  # noqa: E402
from replay_quality import quality  # noqa: E402
from replay_records import RECORDS_ENV, gate_cost, keystroke_records, read_server_records  # noqa: E402
from replay_report import ms, plot, print_table, reference_lines, report, share  # noqa: E402,F401
from replay_stats import (  # noqa: E402,F401
    IDLE_STEP_S,
    IDLE_WINDOW_S,
    add_overlap,
    config_name,
    group,
    idle_settle_s,
    pause_misses,
    pause_shown,
    pct,
    summarize,
)
from replay_typist import (  # noqa: E402,F401
    TYPISTS,
    Ghost,
    Key,
    Run,
    SegmentStats,
    Typist,
    answered_empty,
    auto_indent,
    common_prefix,
    enter_text,
    readable_prefix,
    shown,
    state_rng,
    take,
    takeable,
    typed_through,
)
from replay_work import pooled, read_totals, work_between, work_lines  # noqa: E402

ANSWER_RE = re.compile(r"^(model|memory|disk|type-through)( \((\w+) entry\))? in ")
CORPUS_NOTE = ("function bodies typed after their signature and docstring, from wheels fetched with `pip download "
               "--no-deps`, chosen and split into a tuning and a validation half by a fixed rule "
               "(scripts/replay_corpus.py); none of these packages is in the trimmed-head corpus (standard library, "
               "/usr/include, global node_modules, /usr/share/doc; engine/model/lm_head.py), bench_quality's "
               "pygls/lsprotocol, engine/data/eval_prompts.json, Flint, or the code other benchmarks type.")


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
    st = SegmentStats(seg.name, seg.file_lines, typed_chars=len(seg.typed))
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
    await asyncio.sleep(typist.open_then_type_s or 1.0)  # the file is open; the user starts a moment later
    if typist.open_then_type_s is None:
        await warm_start(server, uri, doc, cursor, st)
    typed = 0  # characters of seg.typed in the document
    ghost: Ghost | None = None  # the suggestion on screen and the forms it has had
    last_req: tuple[int, asyncio.Future, Key] | None = None
    again: tuple[int, asyncio.Future, Key] | None = None  # the editor asking again after flint/refresh
    n_refresh = len(server.refreshes)
    seg_keys: list[Key] = []
    first_answer: float | None = None
    ghost_ref: dict | None = None  # the shown item's accept-command arguments (id, index)
    next_at = time.perf_counter()
    cpu0 = server.cpu_s()

    def show(key: Key, t: float, msg: dict, now_version: int) -> bool:
        """Take a non-empty answer for ``key``'s state; the latest one for the current version is on
        screen. False when the answer held no suggestion."""
        nonlocal ghost, first_answer, ghost_ref
        items = (msg.get("result") or {}).get("items") or []
        if not items or not items[0].get("insertText"):
            return False
        args = ((items[0].get("command") or {}).get("arguments") or [None])[0]
        ghost_ref = args if isinstance(args, dict) and "id" in args else None
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
        before = ghost.text if ghost is not None and ghost.version == now_version else ""
        ghost, new = shown(ghost, text, t, now_version)
        if new:
            run.ghost_chars.append(len(ghost.text))
        elif len(ghost.text) > len(before) and run.ghost_chars:
            run.ghost_chars[-1] += len(ghost.text) - len(before)  # the same suggestion, grown
        return True

    def harvest(now_version: int) -> None:
        """Record answers that arrived; ask again (as VS Code's extension does) on a flint/refresh for
        this document's current version once the keystroke's own request is answered."""
        nonlocal again, n_refresh, ghost
        if last_req is not None and last_req[2].outcome == "pending" and last_req[1].done():
            key = last_req[2]
            t, msg = last_req[1].result()
            if "error" in msg:
                key.outcome = "superseded" if msg["error"].get("code") in (-32800, -32801, -32802) else "error"
            elif not show(key, t, msg, now_version):
                key.outcome = "empty"
                ghost = answered_empty(ghost, now_version)
        if again is not None and again[1].done():
            t, msg = again[1].result()
            if "error" not in msg and not show(again[2], t, msg, now_version):
                ghost = answered_empty(ghost, now_version)
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
        on_screen = ghost if ghost is not None and ghost.version == version and ghost.text else None
        if on_screen is not None:
            got = take(on_screen, time.perf_counter(), typist.reaction_s, rest)
            if got is not None:
                action, text = got
        if action is None:
            ch = rest[0]
            if ch == "\n":
                action, text = "enter", enter_text(rest)
            else:
                action, text = "char", ch
        in_ghost = action in ("char", "enter") and on_screen is not None and on_screen.text.startswith(text)
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
        if action in ("tab", "tab-line") and ghost_ref is not None:  # as VS Code reports an accept
            ref = {"id": ghost_ref["id"], "index": ghost_ref.get("index", 0)}
            server.notify("flint/didAccept" if action == "tab" else "flint/didPartiallyAccept",
                          ref if action == "tab" else {**ref, "acceptedLength": len(text)})
        sent = time.perf_counter()
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": pos, "end": pos}, "text": text}]})
        key = Key(seg.name, action, text, sent, in_ghost=in_ghost,
                  saved=len(text) - 1 if action in ("tab", "tab-line") else 0, at=typed,
                  finished=typed >= len(seg.typed))
        if on_screen is not None:
            key.ghost, key.ghost_age_s = on_screen.text[:160], round(sent - on_screen.since, 3)
            key.ghost_right = takeable(on_screen.text, rest) is not None
            key.ghost_id = ghost_ref["id"] if ghost_ref is not None else None
            key.ghost_match = common_prefix(on_screen.text, rest)
        if seg_keys:
            seg_keys[-1].gap_s = round(sent - seg_keys[-1].sent, 3)
        seg_keys.append(key)
        run.keys.append(key)
        msg_id, fut = server.request("textDocument/inlineCompletion", {
            "context": {"triggerKind": 2}, "textDocument": {"uri": uri},
            "position": utf16_position(doc, cursor)})
        last_req = (msg_id, fut, key)
        ghost = typed_through(on_screen, text, version) if in_ghost and on_screen is not None else None
        next_at = sent + typist.interval(state_rng(seed, seg_no, typed), text)
    # the target is the text this run put in the file: a function left half-typed counts its typed part only
    run.target_chars += typed
    run.target_keys += typed - auto_indent(seg.typed[:typed])
    st.finished = typed >= len(seg.typed)
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
    """The arm's commit: TREE/COMMIT (a `git archive` snapshot), else git in TREE, else "?" (bench_meta)."""
    return arm_commit(tree)


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
    await replay(server, segments, typist, run.seed, run, 10**9)  # no keystroke cap: each function typed whole
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


# -------------------------------------------------------------------------------------------------- main


def cpu_model() -> str:
    """The CPU as benchmarks record it: model name, family/model, the SIMD flags the kernels' speed depends on (ORT's
    int8 kernels are several times faster with AVX-512 VNNI than with AVX2 alone), and the core count."""
    return cpu_line(cpu_info())


def runs_from_json(data: dict) -> list[Run]:
    runs = []
    for r in data["runs"]:
        run = Run(r["config"], r["server"], r["typist"], r["mode"], r["round"],
                  keys=[Key(**{**k, "sent": 0.0}) for k in r["keys"]],
                  segments=[SegmentStats(**s) for s in r["segments"]], split=r.get("split", ""),
                  target_chars=r.get("target_chars", 0), target_keys=r.get("target_keys", 0),
                  ghost_chars=r.get("ghost_chars", []), work=r.get("work", {}))
        runs.append(run)
    return runs


def plotted(groups: dict[str, list[Run]]) -> dict[str, list[Run]]:
    """The plots show one split: test's when it was typed (the figures to quote), else validation's."""
    splits = {rs[0].split for rs in groups.values()}
    keep = next((sp for sp in ("test", "validation") if sp in splits), next(iter(splits), ""))
    return {k: rs for k, rs in groups.items() if rs[0].split == keep}


def render_only(out: Path) -> int:
    """Redraw replay.md and the PNGs from replay.json (no replay)."""
    data = json.loads((out / "replay.json").read_text())
    groups = group(runs_from_json(data))
    plots = plot(plotted(groups), out)
    (out / "replay.md").write_text(report(data["summaries"], data["meta"], plots))
    print(f"wrote {out / 'replay.md'}")
    return 0


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
    lang_cache = Path(args.pkg_cache) if args.pkg_cache else None
    commits = {k: git_commit(v) for k, v in servers.items()}
    if args.split == "test":
        replay_test_split.check_arms(servers, commits, args.rounds)
    if args.source:
        specs, packages, corpus_note = source_corpus(args.language, Path(args.source))
        args.split = "source"
    else:
        specs, packages, corpus_note = corpus_for(args.language, lang_cache, args.split)
    splits = list(SPLITS) if args.split == "both" else [args.split]
    chosen = {sp: pick(specs, sp, args.functions, args.only) for sp in splits}
    splits = [sp for sp in splits if chosen[sp]]  # --only may name functions of one half only
    if not splits:
        raise SystemExit(f"--only {','.join(args.only)}: no such function in the chosen corpus")
    segs: dict[str, list[Segment]] = {}
    for sp in splits:
        segs[sp] = source_segments(args.language, chosen[sp], Path(args.source)) if args.source else \
            segments_for(args.language, chosen[sp], lang_cache, sp)
        if args.keys:  # a quick look: the first whole functions that fit, typed to the end by every arm
            segs[sp] = size_to_keys(segs[sp], args.keys)
    seeds = round_seeds(args.seed, args.rounds)
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
    order = [(sp, t, s, m) for sp in splits for t in typists for s in servers for m in modes]
    cpu = cpu_info()
    meta = {
        "command": "python scripts/bench_replay.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "cpu": cpu_line(cpu),
        "cpu_flags": cpu["flags"],
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "load_average": load_average(),
        "purpose": args.purpose,
        "model": manifest.model_id if manifest else str(model_dir),
        "threads": args.threads,
        "rounds": args.rounds,
        "order": [f"{config_name(s, t, m)} ({sp})" for sp, t, s, m in order],
        "servers": {k: {"tree": v, "commit": commits[k], **({"model": models[k]} if k in models else {}),
                        **({"options": server_opts[k]} if k in server_opts else {})}
                    for k, v in servers.items()},
        "corpus_note": corpus_note,
        "language": args.language,
        "packages": packages,
        "splits": splits,
        "corpus": describe(specs),
        # every function typed whole by every arm (issue 47); --keys only chooses how many
        "sizing": "whole functions",
        "segments": {sp: [f"{s.name} (line {s.before.count(chr(10)) + 1} of {s.file_lines}, {len(s.typed)} chars)"
                          for s in segs[sp]] for sp in splits},
        "typists": {t: TYPISTS[t].describe() for t in typists},
        "seed": args.seed,
        "seeds": seeds,
    }
    ledgered = [sp for sp in splits if sp in ("validation", "test")]
    if ledgered:  # before typing: an interrupted run has looked at the code too
        append_ledger(ledger_row(meta["date"], "+".join(ledgered), commits if not args.reference_only else
                                 {"reference": "GGUF"}, meta["command"], args.purpose, meta["cpu"]))
    if args.reference is not None:  # before any server: never two engines at once
        gguf = args.reference or str((manifest.source if manifest else {}).get("gguf", ""))
        meta["reference"] = {sp: reference(segs[sp], gguf, typists, args.seed, args.threads) for sp in splits}
    if args.reference_only:
        (out / "replay.json").write_text(json.dumps({"meta": meta, "summaries": [], "runs": []}))
        (out / "replay.md").write_text("\n".join([
            "# Replay benchmark: the model asked directly", "",
            f"Generated by `{meta['command']}` on {meta['date']} UTC ({meta['cpu']}; {meta['machine']}). "
            f"{meta['threads']} threads. Code: {meta['corpus_note']}", "",
            "Typists: " + "; ".join(f"`{k}`: {v}" for k, v in meta["typists"].items()) + ".", "",
            *[x for sp in splits for x in reference_lines(meta["reference"][sp], sp)]]))
        print(f"wrote {out / 'replay.md'}")
        return 0
    runs: list[Run] = []
    costs: dict[str, list[dict]] = {}  # (--records) each configuration's gated answers, every round
    by_name = {x.name: x for sp in splits for x in segs[sp]}
    try:
        for rnd in range(args.rounds):
            for sp, t, s, m in order:
                name = config_name(s, t, m)
                segments = segs[sp]
                cache = work / f"{s}-{t}-{sp}-r{rnd}"  # restart reuses the cache its `on` filled this round
                env = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_HOME": str(cache / "home"),
                       "FLINT_CACHE_DIR": str(cache / ("cache" if m != "off" else "cache-off"))}
                if args.records:  # the server writes each gated answer's features; joined below
                    env[RECORDS_ENV] = str(cache / f"gate-records-{m}.jsonl")
                if m == "on":
                    shutil.rmtree(cache, ignore_errors=True)
                print(f"[{name} {sp} r{rnd}] {len(segments)} functions, {sum(len(x.typed) for x in segments)} "
                      f"characters{f', up to {args.keys} keystrokes' if args.keys else ''} ...", flush=True)
                run = Run(name, s, t, m, rnd, seed=seeds[rnd], split=sp)
                totals = read_totals(cache / "home")  # (restart: the home its `on` left)
                try:
                    await run_config(run, servers[s], {**mode_opts[m], **server_opts.get(s, {})}, segments, TYPISTS[t],
                                     args, env, logs, models.get(s))
                except Exception as e:  # one broken server must not lose the other configurations
                    print(f"[{name} {sp} r{rnd}] failed: {type(e).__name__}: {e}", flush=True)
                    continue
                run.work = work_between(totals, read_totals(cache / "home"))
                if args.records:
                    server_records = read_server_records(Path(env[RECORDS_ENV]))
                    with open(args.records, "a") as f:
                        for rec in keystroke_records(run, server_records):
                            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
                    costs.setdefault(name, []).extend(server_records.values())
                    meta["gate_cost"] = {k: gate_cost(v) for k, v in costs.items()}
                sm = summarize([run])
                print(f"[{name} {sp} r{rnd}] {sm['keystrokes']} keys in {sm['wall_s']} s: answered "
                      f"{share(sm['with_suggestion'] / max(1, sm['keystrokes']))}, pauses {share(sm['pauses']['share'])}, "
                      f"p50 {ms(sm['latency_ms']['p50'])}, p95 {ms(sm['latency_ms']['p95'])}, saved "
                      f"{share(sm['chars_saved_share'])}, cpu/min {sm['cpu_s_per_typing_min']}", flush=True)
                runs.append(run)
                write_outputs(runs, meta, out, final=False, segs=by_name)  # a partial replay.json survives an interruption
    finally:
        meta["load_average_end"] = load_average()
        if args.keep_logs:
            print(f"server logs kept in {logs}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    write_outputs(runs, meta, out, final=True, segs=by_name)
    return 0


def corpus_for(language: str, cache: Path | None, split: str = "both") -> tuple[list, list[str], str]:
    """(specs, pinned packages, note) of the corpus a language types: replay_corpus.py's PyPI wheels for Python,
    replay_languages.py's npm and Debian packages for the others (tuning, validation); ``test``:
    replay_test_split.py's test split; ``train``: replay_train_split.py's."""
    if split == "test":
        return (replay_test_split.choose(language, cache or TEST_CACHE), replay_test_split.pinned(language),
                replay_test_split.__doc__.split("\n\n")[0])
    if split == "train":
        return (replay_train_split.choose(language, cache or replay_train_split.CACHE),
                replay_train_split.pinned(language), replay_train_split.__doc__.split("\n\n")[0])
    if language == "python":
        return choose(cache or Path.home() / ".cache" / "flint-bench" / "pypi"), [f"{p}=={v}" for p, v in PACKAGES], \
            CORPUS_NOTE
    import replay_languages as rl
    specs = rl.choose(language, cache or LANG_CACHE)
    return specs, [f"{p.source}:{p.name}=={p.version}" for p in rl.PACKAGES[language]], rl.__doc__.split("\n\n")[0]


def source_corpus(language: str, root: Path) -> tuple[list, list[str], str]:
    """--source: the functions of a directory of code in no split (a debugging look, e.g. another package of a
    held-out split's kind), chosen by the splits' own rules and order; never ledgered, never a headline."""
    import replay_languages as rl
    if not root.is_dir():
        raise SystemExit(f"--source {root}: not a directory")
    specs = []
    # the language corpus's own file rule (no tests, benches, examples, .d.ts), and no Python test module
    for path in rl.source_files(root, rl.Package("dir", root.name, "local", "", rl.EXT[language])):
        if "test" in path.name:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            found = corpus_candidates(text) if language == "python" else rl.candidates(text, language)
        except SyntaxError:
            continue
        specs += [Spec(root.name, "local", path.relative_to(root).as_posix(), q, split="source", chars=n)
                  for q, n in found]
    if not specs:
        raise SystemExit(f"--source {root}: no {language} function of the splits' size in it")
    return sorted(specs, key=lambda s: rl.rank(s.key)), [f"dir:{root}"], f"functions of {root} (in no split)"


def source_segments(language: str, specs: list, root: Path) -> list[Segment]:
    import replay_languages as rl
    if language == "python":
        return [function_segment(root / s.module, s.qualname, s.module, None, "source") for s in specs]
    return [rl.function_segment(root / s.module, s.qualname, language, s.module, None, "source") for s in specs]


def segments_for(language: str, specs: list, cache: Path | None, split: str = "") -> list[Segment]:
    """Each chosen function's whole body."""
    if split == "test":
        return replay_test_split.segments(language, specs, cache or TEST_CACHE)
    if split == "train":
        return replay_train_split.segments(language, specs, cache or replay_train_split.CACHE)
    if language == "python":
        return corpus_segments(specs, cache or Path.home() / ".cache" / "flint-bench" / "pypi")
    import replay_languages as rl
    return rl.segments(language, specs, cache or LANG_CACHE)


LANG_CACHE = Path.home() / ".cache" / "flint-bench" / "langs"
TEST_CACHE = Path.home() / ".cache" / "flint-bench" / "test"


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


def write_outputs(runs: list[Run], meta: dict, out: Path, final: bool, segs: dict | None = None) -> None:
    """replay.json and replay.md (+ PNGs when ``final``) from the runs so far; with the typed segments by name,
    each summary's ``syntax_quality`` (replay_quality.py: ghosts ending mid-statement, repeating the code below)."""
    groups = group(runs)
    summaries = [summarize(rs) for rs in groups.values()]
    for sm, rs in zip(summaries, groups.values(), strict=True):
        sm["work"] = pooled([r.work for r in rs])
        if segs:
            sm["syntax_quality"] = quality([k for r in rs for k in r.keys], segs)
    add_overlap(groups, summaries)
    meta = {**meta, "complete": final}
    (out / "replay.json").write_text(json.dumps({
        "meta": meta, "summaries": summaries,
        "runs": [{"config": r.config, "server": r.server, "typist": r.typist, "mode": r.mode, "round": r.round,
                  "split": r.split, "target_chars": r.target_chars, "target_keys": r.target_keys,
                  "ghost_chars": r.ghost_chars, "wall_s": round(r.wall_s, 1), "work": r.work,
                  "segments": [asdict(s) for s in r.segments],
                  "keys": [{k: v for k, v in asdict(key).items() if k != "sent"} for key in r.keys]}
                 for r in runs]}, indent=None, separators=(",", ":")))
    if final:
        print_table(summaries)
        plots = plot(plotted(groups), out)
        (out / "replay.md").write_text(report(summaries, meta, plots) + "\n" + "\n".join(work_lines(summaries)))
        print(f"wrote {out / 'replay.md'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("    python "):],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", metavar="NAME=TREE[@MODEL]",
                   help="a server to test: run `python -m lsp_server` with PYTHONPATH=TREE, on MODEL if given "
                        "(repeat; default: this tree)")
    p.add_argument("--options", action="append", metavar="NAME=JSON",
                   help='settings (initializationOptions) for the server NAME, e.g. cut=\'{"confidenceCut": 0.5}\' '
                        "(repeat; the same tree may run as two servers with different settings)")
    p.add_argument("--typists", default="steady,think,open", help=f"comma-separated: {', '.join(TYPISTS)}")
    p.add_argument("--modes", default="on", help="comma-separated: off, on, restart (default on)")
    p.add_argument("--rounds", type=int, default=None,
                   help="repeat every configuration, A B A B, round r with timing seed SEED+r: each round a sample "
                        "(default 1; --split test: 3, the least it takes)")
    p.add_argument("--split", default="both", choices=("both", *SPLITS, "train", "test"),
                   help="the code to type: tuning (policies may be tuned on it), validation (typed by many A/B runs "
                        "since issue 32: a second tuning set, not held out), both (validation first; default), train "
                        "(replay_train_split.py: further pinned packages to learn from and debug on, as tuning), or "
                        "test: replay_test_split.py's held-out split (40 Python functions from 10 further pinned "
                        "wheels; --language for its JavaScript/TypeScript/Go/Rust functions), typed only by exactly "
                        "two arms, `main` and a baseline (--server main=TREE --server base=TREE, each with a known "
                        "commit: TREE/COMMIT or git), whole, over >= 3 seeds. Typing validation or test appends a "
                        "row to docs/benchmarks/ledger.md (needs --purpose)")
    p.add_argument("--purpose", default="",
                   help="why this run types the validation or test split: one line for the ledger (required then)")
    p.add_argument("--keys", type=int, default=0,
                   help="a quick look: type only the first functions (round-robin over the packages) whose whole "
                        "bodies fit in this many keystrokes; every arm types each of them to its end, so arms are "
                        "scored on the same code (default 0: every chosen function; not with --split test)")
    p.add_argument("--functions", type=int, default=None,
                   help="a quick look: the first N functions of each half, round-robin over the packages (default all)")
    p.add_argument("--only", default="", help="a quick look: comma-separated function names (`name`, `Class.name` or "
                   "`package:module:Class.name`; python scripts/replay_corpus.py lists them) typed instead")
    p.add_argument("--source", default="", metavar="DIR",
                   help="a debugging look: type the functions of DIR (code in no split; never ledgered)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default=None, help="preset or model directory (default: the default model)")
    p.add_argument("--pkg-cache", default="",
                   help="where the pinned packages are downloaded and unpacked (default ~/.cache/flint-bench/pypi "
                        "for Python, ~/.cache/flint-bench/langs for the others)")
    p.add_argument("--language", default="python", choices=("python", *LANGUAGES),
                   help="the corpus's language: Python's PyPI wheels (replay_corpus.py) or pinned npm / Debian "
                        "packages (replay_languages.py); the document's languageId is this")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--reference", nargs="?", const="", default=None, metavar="GGUF",
                   help="first type the code with the GGUF asked directly at every keystroke, no latency (the "
                        "quality reference; llama-cpp-python; default GGUF: the one the model was built from)")
    p.add_argument("--reference-only", action="store_true", help="only the reference (no server runs)")
    p.add_argument("--records", default="", metavar="PATH",
                   help="append one JSON line per keystroke to PATH: the learned gate's features of the ghost on "
                        "screen (the server's FLINT_GATE_RECORDS) and what the typist did with it "
                        "(scripts/replay_records.py; scripts/train_gate.py learns from them: tuning and train splits only)")
    p.add_argument("--keep-logs", action="store_true", help="keep the servers' stderr logs (verbose)")
    p.add_argument("--render-only", action="store_true", help="redraw the report from --out/replay.json")
    args = p.parse_args()
    if args.rounds is None:
        args.rounds = replay_test_split.MIN_ROUNDS if args.split == "test" else 1
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.split == "test" and (args.keys or args.functions or args.only or args.language not in (
            "python", *replay_test_split.other_packages())):
        p.error("--split test types the whole split: no --keys, --functions or --only")
    if not args.render_only and not args.source and args.split in ("both", "validation", "test") and \
            not args.purpose.strip():
        p.error(f"--split {args.split} types held-out code: say why with --purpose (it goes to the ledger)")
    if args.source and args.split not in ("both", "tuning"):
        p.error("--source types its own directory, not a split")
    if args.records and args.split not in replay_train_split.LEARNS_FROM:
        p.error("--records learns from the tuning and train splits only: --split tuning or train")
    if args.reference_only and args.reference is None:
        args.reference = ""
    if args.render_only:
        return render_only(Path(args.out))
    if args.functions is not None and args.functions < 1:
        p.error("--functions must be at least 1")
    args.only = tuple(x for x in args.only.split(",") if x)
    modes = args.modes.split(",")
    if "restart" in modes and ("on" not in modes or modes.index("on") > modes.index("restart")):
        p.error("restart replays on the cache that `on` fills: list `on` before it")
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())

