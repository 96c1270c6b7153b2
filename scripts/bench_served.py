#!/usr/bin/env python3
"""What Tab inserts: suggestions served by `flint serve` against the same GGUF asked directly, one run.

    flock /tmp/flint-heavy.lock python scripts/bench_served.py [--lines 20] [--blocks 10] \\
        [--trees base=/work/wt/served-base,new=.]

Held-out code: pinned PyPI packages fetched at bench time with `pip download --no-deps` (PACKAGES below;
none of them is in the eval prompts, pygls/lsprotocol, the standard library or Flint). From their
functions, spots are drawn with a fixed seed:

- ``line``:  one simple statement inside a function body emptied to its indentation (the cursor after it);
- ``block``: a function's body after its docstring emptied, the cursor on an empty line at the body's
  indentation.

Each server configuration (a source tree run as ``PYTHONPATH=<tree> python -m lsp_server serve``, fresh
FLINT_HOME / FLINT_CACHE_DIR) gets every spot in its own newly opened document, asked as an editor asks:
``textDocument/inlineCompletion`` automatic and invoked (order alternating per spot, so half of each kind is
asked at a freshly opened spot and half at a warm one). Tab is applied as the editor applies it: item 1's
insertText over its range. On blocks, automatic requests go on as a user pressing Tab would: up to
``--tab-rounds`` times, ask again at the end of what was inserted while the body is not done. The direct
model is llama-cpp-python on the GGUF the build used, asked with the server's window, stop and
post-processing rules for each request kind (rows ``direct automatic`` / ``direct invoked``; see "direct
model" below for what it shares with the served arm and what not), and raw (``direct raw``: the line to its
first line break, a block to EOS or 256 tokens, no post-processing).

Scores per (configuration, request kind, spot kind): exact match (the completed document equals the
original), edit similarity (1 - Levenshtein / longer length, inserted text against the emptied text),
duplicates (an inserted line repeats one of the next three lines below the gap that the emptied text did
not have), mid-statement (the inserted text ends mid-statement, judged by engine.postprocess with the
Python parser), comment-only (engine.rank.kind), file parses (the completed file parses), and latency
(response time: the server returns all items in one response today, so first item = all items).

Writes docs/benchmarks/served.json and docs/benchmarks/served.md.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
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
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchstats import percentile  # noqa: E402
from lsp_stdio import Server, utf16_position  # noqa: E402

from engine.text.rank import kind  # noqa: E402
from engine.text.statements import ends_mid_statement, split_cursor  # noqa: E402

PACKAGES = [("boltons", "24.0.0"), ("toolz", "0.12.1"), ("humanize", "4.9.0")]
# an empty answer that took less than this did not wait for its deadline (automatic 2.5 s, invoked 6 s in
# lsp_server/session.py): nothing more will come at that spot
DEADLINE_FLOOR_MS = {False: 2000.0, True: 5000.0}


# ------------------------------------------------------------------------------------------------ spots


@dataclass
class Spot:
    name: str
    kind: str  # "line" | "block"
    prefix: str  # document text before the cursor
    suffix: str  # after it
    expected: str  # the emptied text (inserted at the cursor, it restores the original file)


def fetch_sources(work: Path) -> list[tuple[str, str]]:
    """(name, source) of every .py file of the pinned packages, downloaded now."""
    dl = work / "wheels"
    dl.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--disable-pip-version-check",
                    "-d", str(dl), *[f"{n}=={v}" for n, v in PACKAGES]], check=True)
    out = []
    for whl in sorted(dl.glob("*.whl")):
        with zipfile.ZipFile(whl) as z:
            for member in sorted(z.namelist()):
                if member.endswith(".py") and "/tests/" not in member and not member.endswith("__init__.py"):
                    src = z.read(member).decode("utf-8", "replace")
                    if len(src) > 2000:
                        out.append((member, src))
    return out


def _offset(lines: list[str], i: int) -> int:
    return sum(len(x) + 1 for x in lines[:i])


def draw_spots(sources: list[tuple[str, str]], n_lines: int, n_blocks: int, seed: int) -> list[Spot]:
    rng = random.Random(seed)
    line_cands: list[Spot] = []
    block_cands: list[Spot] = []
    for name, src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        lines = src.split("\n")
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = list(fn.body)
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]  # the docstring stays: it says what the body should do
            if not body or body[0].lineno == fn.lineno:
                continue
            start, end = body[0].lineno - 1, (body[-1].end_lineno or body[-1].lineno)  # 0-based [start, end)
            indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            if 3 <= end - start <= 12 and not any(isinstance(s, ast.FunctionDef | ast.ClassDef) for s in body):
                off = _offset(lines, start)
                expected = "\n".join(lines[start:end])[len(indent):]
                block_cands.append(Spot(f"{name}:{start + 1}", "block", src[:off] + indent,
                                        src[_offset(lines, end) - 1:], expected))
            for st in ast.walk(fn):
                if isinstance(st, ast.Assign | ast.AugAssign | ast.Return | ast.Expr | ast.If | ast.For) and \
                        st.lineno > fn.lineno and st.lineno == (st.end_lineno or st.lineno) or \
                        isinstance(st, ast.If | ast.For | ast.While | ast.With) and st.lineno > fn.lineno:
                    i = st.lineno - 1
                    ln = lines[i]
                    code = ln.strip()
                    if not 8 <= len(code) <= 100 or code.startswith(("#", '"', "'")) or not ln.startswith(" "):
                        continue
                    ind = ln[: len(ln) - len(ln.lstrip())]
                    off = _offset(lines, i) + len(ind)
                    line_cands.append(Spot(f"{name}:{i + 1}", "line", src[:off], src[off + len(code):], code))
    rng.shuffle(line_cands)
    rng.shuffle(block_cands)

    def spread(cands: list[Spot], n: int) -> list[Spot]:
        """At most a few spots per file, so one big module does not dominate."""
        per: dict[str, int] = {}
        out = []
        for c in cands:
            f = c.name.rsplit(":", 1)[0]
            if per.get(f, 0) < max(2, n // 6):
                per[f] = per.get(f, 0) + 1
                out.append(c)
            if len(out) == n:
                break
        return out

    return spread(line_cands, n_lines) + spread(block_cands, n_blocks)


# ------------------------------------------------------------------------------------------------ scoring


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def edit_similarity(got: str, want: str) -> float:
    got, want = got.rstrip(), want.rstrip()
    if not got and not want:
        return 1.0
    return 1.0 - levenshtein(got, want) / max(len(got), len(want))


def _nontrivial(s: str) -> bool:
    s = s.strip()
    return len(s) >= 4 and any(c.isalnum() for c in s)


def duplicates_below(inserted: str, spot: Spot) -> bool:
    below = [ln.strip() for ln in spot.suffix.split("\n")[1:] if ln.strip()][:3]
    wanted = {ln.strip() for ln in spot.expected.split("\n")}
    return any(_nontrivial(ln) and ln.strip() in below and ln.strip() not in wanted
               for ln in inserted.split("\n"))


@dataclass
class Outcome:
    spot: str
    spot_kind: str
    config: str
    request: str  # "automatic" | "invoked" | "direct"
    fresh: bool
    inserted: str
    exact: bool
    edit_sim: float
    duplicate: bool
    mid_statement: bool
    comment_only: bool
    parses: bool
    latency_ms: float
    items: int = 1
    rounds: int = 1
    asks: int = 1  # requests until the first non-empty answer
    alt_inserted: str = ""  # invoked: what the items reordered by engine.rank would insert
    tests_pass: bool | None = None  # the package's own tests with the completed file (None: no tests)
    all_ms: float | None = None  # invoked: to an answer with more than one variant (after flint/refresh)


def score(spot: Spot, inserted: str, config: str, request: str, fresh: bool, latency_ms: float,
          items: int = 1, rounds: int = 1) -> Outcome:
    doc = spot.prefix + inserted + spot.suffix
    original = spot.prefix + spot.expected + spot.suffix
    _, line_suffix = split_cursor(spot.prefix, spot.suffix)
    try:
        ast.parse(doc)
        parses = True
    except SyntaxError:
        parses = False
    return Outcome(spot.name, spot.kind, config, request, fresh, inserted, doc == original,
                   round(edit_similarity(inserted, spot.expected), 4), duplicates_below(inserted, spot),
                   bool(inserted.strip()) and ends_mid_statement(inserted, spot.prefix, line_suffix, "python"),
                   bool(inserted.strip()) and kind(inserted) == "comment", parses, round(latency_ms, 1), items,
                   rounds)


# ------------------------------------------------------------------------------------------ LSP over stdio


def lsp_offset(text: str, pos: dict) -> int:
    lines = text.split("\n")
    off = _offset(lines, pos["line"])
    ln = lines[pos["line"]] if pos["line"] < len(lines) else ""
    units, i = 0, 0
    while i < len(ln) and units < pos["character"]:
        units += 2 if ord(ln[i]) > 0xFFFF else 1
        i += 1
    return off + i


def apply_tab(text: str, item: dict) -> tuple[str, int]:
    """The document after accepting ``item`` (insertText over its range) and the cursor after it."""
    start = lsp_offset(text, item["range"]["start"])
    end = lsp_offset(text, item["range"]["end"])
    return text[:start] + item["insertText"] + text[end:], start + len(item["insertText"])


async def ask(server: Server, uri: str, text: str, offset: int, invoked: bool, patience_s: float,
              refresh_wait_s: float = 0.0) -> tuple[float, list[dict], int]:
    """Ask as the editor does; while the answer is empty (the deadline passed before the model had
    anything), ask again at once, as a user who waits at the spot would make the editor do, for up to
    ``patience_s``. An empty answer before the deadline is the server's say, unless it sends flint/refresh
    within ``refresh_wait_s`` (it went on working there): then the editor asks again, as VS Code does.
    Returns (ms to the first non-empty answer or to giving up, items, asks)."""
    t0 = time.perf_counter()
    asks = 0
    while True:
        t_ask = time.perf_counter()
        one_ms, msg = await server.ask("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": utf16_position(text, offset),
            "context": {"triggerKind": 1 if invoked else 2}})
        asks += 1
        res = msg.get("result") or {}
        items = res.get("items", []) if isinstance(res, dict) else res
        ms = (time.perf_counter() - t0) * 1000
        if items or ms >= patience_s * 1000:
            return ms, items, asks
        if one_ms < DEADLINE_FLOOR_MS[invoked]:
            def refreshed(since: float = t_ask) -> bool:
                return any(t > since and (p.get("textDocument") or {}).get("uri", uri) == uri
                           for t, p in server.refreshes)
            end = min(t0 + patience_s, time.perf_counter() + refresh_wait_s)
            while time.perf_counter() < end and not refreshed():
                await asyncio.sleep(0.05)
            if not refreshed():
                return ms, items, asks  # the model had its say and it shows nothing: done


async def all_items(server: Server, uri: str, text: str, offset: int, t0: float, first_ms: float,
                    items: list[dict], wait_s: float = 30.0) -> tuple[float | None, list[dict]]:
    """An invoked request answered with item 1 alone: the server sends flint/refresh when the other
    variants are there, and the editor asks again. Milliseconds from the first ask to an answer with more
    than one variant, the user can cycle them (None: not within ``wait_s``, or nothing shown), and that
    answer's items."""
    if len(items) > 1:
        return first_ms, items
    if not items:
        return None, items
    seen = t0 + first_ms / 1000  # refreshes after the answer with item 1
    end = time.perf_counter() + wait_s
    while time.perf_counter() < end:
        if any(t > seen for t, _ in server.refreshes):
            seen = time.perf_counter()
            _, msg = await server.ask("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": utf16_position(text, offset), "context": {"triggerKind": 1}})
            res = msg.get("result") or {}
            got = res.get("items", []) if isinstance(res, dict) else res
            if len(got) > 1:
                return (time.perf_counter() - t0) * 1000, got
        await asyncio.sleep(0.05)
    return None, items


def _inserted(spot: Spot, doc: str) -> str:
    """What now stands between the spot's prefix and suffix (the suffix is never edited by a Tab here)."""
    if doc.startswith(spot.prefix) and doc.endswith(spot.suffix) and \
            len(doc) >= len(spot.prefix) + len(spot.suffix):
        return doc[len(spot.prefix): len(doc) - len(spot.suffix)]
    return "\x00replaced-outside-the-gap"


async def run_config(name: str, tree: str, spots: list[Spot], args, work: Path) -> list[Outcome]:
    from engine.text.rank import rank

    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "PYTHONUNBUFFERED": "1",
           "FLINT_HOME": str(work / f"home-{name}"), "FLINT_CACHE_DIR": tempfile.mkdtemp(prefix="flint-cache-")}
    # the built model stays where it is; only caches and stats are fresh
    server = Server()
    cmd = [sys.executable, "-m", "lsp_server.cli", "serve", "--model", args.model_dir, "--threads", str(args.threads)]
    # ``python -m`` puts the working directory before PYTHONPATH: the server runs from its own tree
    await server.start(cmd, env, work / f"server-{name}.log", cwd=str(Path(tree).resolve()))
    await server.ask("initialize", {
        "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "bench-served", "version": "1"},
        "capabilities": {"textDocument": {"synchronization": {"dynamicRegistration": False},
                                          "inlineCompletion": {}}},
        "initializationOptions": {}}, timeout=300)
    server.notify("initialized", {})
    await asyncio.wait_for(server.ready.wait(), 600)
    out: list[Outcome] = []
    for k, spot in enumerate(spots):
        uri = f"file:///bench/{name}/{k}_{re.sub(r'[^A-Za-z0-9_.]', '_', spot.name)}"
        text = spot.prefix + spot.suffix
        server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": text}})
        order = ["invoked", "automatic"] if k % 2 == 0 else ["automatic", "invoked"]
        for j, req in enumerate(order):
            t_ask = time.perf_counter()
            ms, items, asks = await ask(server, uri, text, len(spot.prefix), req == "invoked", args.patience,
                                        args.refresh_wait)
            all_ms, variants = await all_items(server, uri, text, len(spot.prefix), t_ask, ms, items) \
                if req == "invoked" else (None, items)
            doc, cursor = (apply_tab(text, items[0]) if items else (text, len(spot.prefix)))
            rounds, total_ms = 1, ms
            version = 1
            # blocks, automatic: the user keeps pressing Tab while the body is not done
            while req == "automatic" and items and wants_another_tab(spot, text, doc, rounds, args.tab_rounds):
                version += 1
                server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                         "contentChanges": [{"text": doc}]})
                ms2, items, _ = await ask(server, uri, doc, cursor, False, args.patience / 2, args.refresh_wait)
                total_ms += ms2
                rounds += 1
                if items:
                    doc, cursor = apply_tab(doc, items[0])
            o = score(spot, _inserted(spot, doc), name, req, j == 0, ms, len(items), rounds)
            o.asks, o.all_ms = asks, all_ms
            if req == "invoked" and len(variants) > 1:
                order_ = rank([it["insertText"] for it in variants])
                o.alt_inserted = _inserted(spot, apply_tab(text, variants[order_[0]])[0])
            out.append(o)
            if version > 1 or j == 0:  # back to the emptied spot for the other request
                version += 1
                server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                         "contentChanges": [{"text": text}]})
            if j == 0:
                await asyncio.sleep(args.gap)  # the user reads the first suggestion before asking again
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        print(f"  [{name}] {k + 1}/{len(spots)} {spot.name}: " + " | ".join(
            f"{o.request} {o.latency_ms:.0f} ms {'EXACT' if o.exact else f'es {o.edit_sim:.2f}'}" for o in out[-2:]),
            flush=True)
    await server.stop()
    return out


# ------------------------------------------------------------------------------------------ direct model
# The direct arm asks llama.cpp what the server asks its engine, with the server's rules (issue 32):
#
# - window: the state's text as lsp_server.completion.policy.planner.window cuts it for a freshly opened document
#   (engine.text.window.window_start: at most max_prefix_chars before the cursor, from a line start on
#   the quantum grid; the suffix up to knobs.WINDOW_SUFFIX_CHARS), and the prompt's text as the engine
#   clips that (engine.decoding.prompt.clip_window to EngineConfig's max_prefix_chars / max_suffix_chars);
# - stop: the request kind's GenParams (planner.state_at: automatic or invoked, with the server's default
#   settings), sized by the engine's budget (engine.decoding.stops.budgeted) and stopped by its rule
#   (stops.stop_rule: stop strings, max_lines, a settled block; max_tokens; an end token);
# - post-processing: lsp_server.items.build_items, as the session calls it for that request kind
#   (engine.text.postprocess.postprocess with the state's mode and max_lines; automatic requests also
#   cut where the model doubted, settings.confidence_cut, from llama.cpp's own token probabilities);
# - automatic requests on blocks go on for up to --tab-rounds Tabs, as the served arm's do.
#
# It differs from the served arm in what the engine alone does: llama.cpp gets the PSM layout
# (prefix, suffix, middle token) without token healing, one greedy variant (an invoked request's item 1 is
# the greedy one), no deadline, and never the quick first window. The raw rule (request "raw": the line to
# its first line break, a block to an end token or 256 tokens, no post-processing) is reported beside it.

DIRECT_REQUESTS = ("raw", "automatic", "invoked")
RAW_LINE_TOKENS, RAW_BLOCK_TOKENS = 48, 256


def engine_windows() -> tuple[int, int]:
    """The engine's prompt windows (EngineConfig's defaults: what `flint serve` runs with here)."""
    from engine.config import EngineConfig

    cfg = EngineConfig()
    return cfg.max_prefix_chars, cfg.max_suffix_chars


def server_window(text: str, offset: int, max_prefix: int, max_suffix: int,
                  previous: int | None = None) -> tuple[int, str, str, str, str]:
    """(window start, the state's prefix and suffix: what budgets and post-processing see, the prompt's
    prefix and suffix: what the model sees) for a cursor at ``offset``, as the server cuts them."""
    from engine.text.window import clip_window
    from lsp_server.completion.policy import planner

    start, prefix, suffix = planner.window(text, offset, max_prefix, previous)
    p, s = clip_window(prefix, suffix, max_prefix, max_suffix)
    return start, prefix, suffix, p, s


@dataclass
class DirectRule:
    """One request kind's stop and post-processing rule at a cursor."""

    request: str  # "raw" | "automatic" | "invoked"
    params: object  # engine.types.GenParams, after the engine's budget
    settle: object  # engine.decoding.stops.Settle | None
    state: object = None  # planner.State (None: raw)
    skip: str | None = None  # why the server does no work here (an automatic request gets nothing)


def direct_rules(text: str, offset: int, prefix: str, suffix: str, spot_kind: str,
                 requests: tuple[str, ...] = DIRECT_REQUESTS) -> dict[str, DirectRule]:
    """The rules for a cursor whose state text (server_window) is ``prefix`` / ``suffix``."""
    from engine.decoding.stops import budgeted
    from engine.types import GenParams
    from lsp_server.completion.policy import planner
    from lsp_server.settings import Settings

    settings = Settings()
    rules: dict[str, DirectRule] = {}
    for req in requests:
        if req == "raw":
            line = spot_kind == "line"
            params = GenParams(max_tokens=RAW_LINE_TOKENS if line else RAW_BLOCK_TOKENS, max_lines=1 if line else None)
            rules[req] = DirectRule(req, params, None)
            continue
        state = planner.state_at(settings, "file:///direct", 0, offset, prefix, suffix, invoked=req == "invoked",
                                 remote_ready=False, language="python")
        params, settle = budgeted(prefix, suffix, state.params)
        rules[req] = DirectRule(req, params, settle, state, state.skip)
    return rules


def stop_point(texts: list[str], params, settle, ended: bool, start: int = 0) -> tuple[int, str, str] | None:
    """Where the engine's greedy loop (decoding.greedy) stops a generation whose text after i + 1
    tokens is ``texts[i]``: (tokens used, text, finish reason), or None while it goes on. ``ended``: the
    model's next token is an end token. ``start``: the texts before it were checked already."""
    from engine.decoding.stops import stop_rule

    for i in range(start, len(texts)):
        reason, cut = stop_rule(texts[i], params, settle)
        if reason is not None:
            return i + 1, cut, reason
        if i + 1 >= params.max_tokens:
            return i + 1, texts[i], "length"
    if ended:
        return len(texts), texts[-1] if texts else "", "eos"
    return None


def doubts_in(starts: list[int], probs: list[float], shown: int) -> tuple[tuple[int, float], ...]:
    """(offset, probability) of the tokens chosen with probability below engine.types.DOUBT_KEEP, as
    decode.doubts_of gives them: ``starts[i]`` is where token i starts in the text, up to ``shown``."""
    from engine.types import DOUBT_KEEP

    found: list[tuple[int, float]] = []
    for at, p in zip(starts, probs, strict=True):
        if p >= DOUBT_KEEP:
            continue
        if at >= shown:
            break
        if not found or found[-1][0] != at:
            found.append((at, round(p, 4)))
    return tuple(found)


def served_insert(rule: DirectRule, text: str, offset: int, raw: str, reason: str,
                  doubts: tuple[tuple[int, float], ...] = ()) -> tuple[str, int]:
    """(inserted text, code points right of the cursor it replaces): item 1 of what the session sends for
    this raw text (lsp_server.items.build_items with the request kind's settings), or the raw
    text right-stripped for the raw rule; ("", 0) when nothing is shown."""
    if rule.state is None:
        return raw.rstrip(), 0
    if rule.skip:
        return "", 0
    from engine.types import Completion
    from lsp_server import convert
    from lsp_server.items import build_items
    from lsp_server.settings import Settings

    settings = Settings()
    st = rule.state
    starts = convert.line_starts(text)
    cursor = convert.offset_to_position(text, offset, "utf-16", starts=starts)
    comp = Completion(text=raw, token_ids=[], finish_reason=reason, doubts=doubts)
    items = build_items([comp], st.mode, st.prefix, st.suffix, text=text, offset=offset, cursor=cursor, eol="\n",
                        starts=starts, encoding="utf-16", max_lines=settings.max_lines, backend="direct",
                        language="python", cut_below=0.0 if rule.request == "invoked" else settings.confidence_cut)
    if not items:
        return "", 0
    it = items[0]
    end = lsp_offset(text, {"line": it.end[0], "character": it.end[1]})
    return it.text, end - offset


def wants_another_tab(spot: Spot, text: str, doc: str, rounds: int, tab_rounds: int) -> bool:
    """Blocks, automatic: the user presses Tab again while the body is not done (both arms)."""
    return spot.kind == "block" and rounds < tab_rounds and \
        doc.count("\n") - text.count("\n") < spot.expected.count("\n") + 1 and \
        _inserted(spot, doc).strip() != spot.expected.strip()


def prompt_limit(rules: dict[str, DirectRule]) -> int:
    """The engine's longest prompt (Engine.build: the KV capacity less the generation's max_tokens, asked
    before the budget, and 16): the stricter of the served rules' (the raw rule follows), so one prompt
    serves them all."""
    from engine.config import EngineConfig

    served = [r.state.params.max_tokens for r in rules.values() if r.state is not None]
    return EngineConfig().capacity - max(served or [r.params.max_tokens for r in rules.values()]) - 16


def trim_prompt(ids: list[int], limit: int, head: int = 1) -> list[int]:
    """The prompt without its oldest tokens after the first ``head`` (the FIM prefix token) when it is
    longer than ``limit``, as Engine.build cuts it."""
    if len(ids) <= limit:
        return ids
    return ids[:head] + ids[head + len(ids) - limit:]


class DirectLlama:
    """llama-cpp-python on the GGUF, greedy, with the probability of each token it picks (for the doubt cut)."""

    def __init__(self, gguf: str, threads: int) -> None:
        from replay_reference import DirectModel

        self.model = DirectModel(gguf, threads)
        self.llm = self.model.llm

    def stream(self, prefix: str, suffix: str, limit: int):
        """Yields (token, probability, seconds since the call) per token; (None, 1.0, s) at an end token.
        A prompt longer than ``limit`` tokens loses its oldest prefix tokens, as the engine's does."""
        import numpy as np

        llm = self.llm
        ids = trim_prompt(llm.tokenize(f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>".encode(),
                                       add_bos=False, special=True), limit)
        n_vocab = llm.n_vocab()
        t0 = time.perf_counter()
        for tok in llm.generate(ids, top_k=1, temp=0.0, repeat_penalty=1.0):
            s = time.perf_counter() - t0
            if tok in self.model.stops:
                yield None, 1.0, s
                return
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))  # the row it was picked from
            yield tok, float(1.0 / np.exp(logits - logits[tok]).sum()), s

    def run(self, spot: Spot, rules: dict[str, DirectRule], prompt: tuple[str, str], text: str, offset: int
            ) -> dict[str, tuple[str, int, float, int]]:
        """Each rule's (inserted text, replaced code points, seconds to its stop, tokens) from one greedy
        generation (greedy is deterministic: each rule stops the same stream where the engine would)."""
        todo = {k: r for k, r in rules.items() if not r.skip}
        res: dict[str, tuple[str, int, float, int]] = {k: ("", 0, 0.0, 0) for k, r in rules.items() if r.skip}
        gen: list[int] = []
        texts: list[str] = []
        starts: list[int] = []
        probs: list[float] = []
        for tok, p, s in self.stream(*prompt, prompt_limit(rules)):
            ended = tok is None
            if not ended:
                starts.append(len(texts[-1]) if texts else 0)
                gen.append(tok)
                probs.append(p)
                texts.append(self.llm.detokenize(gen).decode("utf-8", "replace"))
            for k, rule in list(todo.items()):
                hit = stop_point(texts, rule.params, rule.settle, ended, start=max(0, len(texts) - 1))
                if hit is not None:
                    n, raw, reason = hit
                    ins, rep = served_insert(rule, text, offset, raw, reason, doubts_in(starts[:n], probs[:n], len(raw)))
                    res[k] = (ins, rep, s, n)
                    del todo[k]
            if not todo or ended:
                break
        for k, rule in todo.items():  # the stream ran out (the context is full): what there is
            ins, rep = served_insert(rule, text, offset, texts[-1] if texts else "", "length",
                                     doubts_in(starts, probs, len(texts[-1]) if texts else 0))
            res[k] = (ins, rep, 0.0, len(texts))
        return res


def run_direct(gguf: str, spots: list[Spot], threads: int, windows: tuple[int, int] | None = None,
               tab_rounds: int = 3) -> list[Outcome]:
    """The direct arm on every spot: one Outcome per request kind (DIRECT_REQUESTS), config "direct"."""
    max_prefix, max_suffix = windows or engine_windows()
    model = DirectLlama(gguf, threads)
    out = []
    for spot in spots:
        model.llm.reset()  # each spot timed from an empty cache
        text, offset = spot.prefix + spot.suffix, len(spot.prefix)
        start, pre, suf, p, s = server_window(text, offset, max_prefix, max_suffix)
        rules = direct_rules(text, offset, pre, suf, spot.kind)
        got = model.run(spot, rules, (p, s), text, offset)
        for req in DIRECT_REQUESTS:
            ins, rep, secs, _ = got[req]
            doc = text[:offset] + ins + text[offset + rep:]
            rounds = 1
            cursor = offset + len(ins)
            # blocks, automatic: Tab again at the end of what was inserted, as the served arm does
            while req == "automatic" and ins and wants_another_tab(spot, text, doc, rounds, tab_rounds):
                start, pre, suf, p, s = server_window(doc, cursor, max_prefix, max_suffix, previous=start)
                r2 = direct_rules(doc, cursor, pre, suf, spot.kind, ("automatic",))
                ins, rep, _, _ = model.run(spot, r2, (p, s), doc, cursor)["automatic"]
                rounds += 1
                if ins:
                    doc, cursor = doc[:cursor] + ins + doc[cursor + rep:], cursor + len(ins)
            out.append(score(spot, _inserted(spot, doc), "direct", req, True, secs * 1000, rounds=rounds))
        print(f"  [direct] {len(out) // len(DIRECT_REQUESTS)}/{len(spots)} {spot.name}: " + " | ".join(
            f"{o.request} {o.latency_ms:.0f} ms {'EXACT' if o.exact else f'es {o.edit_sim:.2f}'}"
            for o in out[-len(DIRECT_REQUESTS):]), flush=True)
    del model
    return out


def direct_windows(gguf: str, spots: list[Spot], threads: int, windows: str, out: Path) -> None:
    """The direct model on the line spots with other prompt windows (``P/S,...``: prefix/suffix characters):
    how much of a gap between served and direct lines the window alone makes. Writes served.windows.json."""
    lines = [s for s in spots if s.kind == "line"]
    res = {}
    for w in windows.split(","):
        pw, sw = (int(x) for x in w.split("/"))
        outs = run_direct(gguf, lines, threads, (pw, sw))
        res[w] = [(o.spot, o.request, o.inserted, o.edit_sim, o.exact, o.latency_ms) for o in outs]
        for req in DIRECT_REQUESTS:
            g = [o for o in outs if o.request == req]
            print(f"window {w}, {req}: exact {sum(o.exact for o in g) / len(g):.3f}, edit sim "
                  f"{sum(o.edit_sim for o in g) / len(g):.3f}, p50 {pct([o.latency_ms for o in g], 50):.0f} ms",
                  flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "served.windows.json").write_text(json.dumps(res, indent=1))


# ------------------------------------------------------------------------------------- the package's tests


def package_tests(outs: list[Outcome], spots: dict[str, Spot], work: Path, timeout_s: float = 300) -> None:
    """Where a pinned wheel ships its tests (toolz does), run them with each completed file: the file
    replaces the original in an unpacked copy of the wheel, ``pytest -x -q`` runs the wheel's test
    folders, and ``Outcome.tests_pass`` says whether they passed (None elsewhere, and where the original
    file itself fails them here)."""
    for whl in sorted((work / "wheels").glob("*.whl")):
        with zipfile.ZipFile(whl) as z:
            names = z.namelist()
            test_dirs = sorted({n.split("/tests/")[0] + "/tests" for n in names if "/tests/" in n})
            if not test_dirs:
                continue
            root = work / "tests" / whl.stem
            z.extractall(root)
        mine = [o for o in outs if o.spot.rsplit(":", 1)[0] in names]
        if not mine:
            continue

        def run(root: Path = root, test_dirs: list[str] = test_dirs) -> bool:
            r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *test_dirs],
                               cwd=root, capture_output=True, timeout=timeout_s,
                               env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            return r.returncode == 0

        if not run():
            print(f"  [tests] {whl.name}: the original files fail their own tests here; not used", flush=True)
            continue
        results: dict[str, bool] = {}
        for o in mine:
            spot = spots[o.spot]
            path = root / o.spot.rsplit(":", 1)[0]
            doc = spot.prefix + o.inserted + spot.suffix if not o.inserted.startswith("\x00") else None
            original = path.read_text()
            if doc is None:
                o.tests_pass = False
            elif doc == original:
                o.tests_pass = True
            elif doc in results:
                o.tests_pass = results[doc]
            else:
                path.write_text(doc)
                try:
                    o.tests_pass = results[doc] = run()
                except subprocess.TimeoutExpired:
                    o.tests_pass = results[doc] = False
                finally:
                    path.write_text(original)
        print(f"  [tests] {whl.name}: {len(mine)} completions, {len(results)} distinct runs", flush=True)


# ------------------------------------------------------------------------------------------------ report


def pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) by benchstats: pct(v, 50) is the ordinary median (not a rounded index)."""
    return percentile(values, q)


def summarize(outs: list[Outcome]) -> list[dict]:
    rows = []
    keys = sorted({(o.config, o.request, o.spot_kind) for o in outs}, key=lambda k: (k[2], k[0] != "direct", k))
    for cfg, req, sk in keys:
        g = [o for o in outs if (o.config, o.request, o.spot_kind) == (cfg, req, sk)]
        shown = [o for o in g if o.inserted.strip()]
        n = len(g)
        row = {
            "spots": sk, "config": cfg, "request": req, "n": n,
            "exact": round(sum(o.exact for o in g) / n, 3),
            "edit_sim": round(statistics.mean(o.edit_sim for o in g), 3),
            "shown": round(len(shown) / n, 3),
            "duplicate": round(sum(o.duplicate for o in shown) / max(1, len(shown)), 3),
            "mid_statement": round(sum(o.mid_statement for o in shown) / max(1, len(shown)), 3),
            "comment_only": round(sum(o.comment_only for o in shown) / max(1, len(shown)), 3),
            "parses": round(sum(o.parses for o in g) / n, 3),
            "tests": _share([o.tests_pass for o in g if o.tests_pass is not None]),
            "latency_p50_ms": pct([o.latency_ms for o in g], 50),
            "latency_p95_ms": pct([o.latency_ms for o in g], 95),
            "fresh_p50_ms": pct([o.latency_ms for o in g if o.fresh], 50),
            "warm_p50_ms": pct([o.latency_ms for o in g if not o.fresh], 50),
            "all_items_p50_ms": pct([o.all_ms for o in g if o.all_ms is not None], 50),
            "asks_p50": pct([float(o.asks) for o in g], 50),
        }
        rows.append(row)
    return rows


def _share(flags: list[bool]) -> str | None:
    return f"{sum(flags)}/{len(flags)}" if flags else None


def ranked_rows(outs: list[Outcome], spots: dict[str, Spot]) -> list[dict]:
    """Invoked requests with item 1 chosen by engine.rank among the served items (what the session would
    serve once it ranks): exact match and comment-only share."""
    rows = []
    for cfg in sorted({o.config for o in outs if o.request == "invoked" and o.config != "direct"}):
        for sk in ("line", "block"):
            g = [o for o in outs if o.config == cfg and o.request == "invoked" and o.spot_kind == sk]
            if not g:
                continue
            ins = [o.alt_inserted or o.inserted for o in g]
            sc = [score(spots[o.spot], t, cfg, "invoked+rank", o.fresh, o.latency_ms) for o, t in zip(g, ins, strict=True)]
            rows.append({"spots": sk, "config": cfg, "request": "invoked, ranked", "n": len(sc),
                         "exact": round(sum(s.exact for s in sc) / len(sc), 3),
                         "edit_sim": round(statistics.mean(s.edit_sim for s in sc), 3),
                         "comment_only": round(sum(s.comment_only for s in sc if s.inserted.strip())
                                               / max(1, sum(1 for s in sc if s.inserted.strip())), 3),
                         "reordered": sum(1 for o in g if o.alt_inserted and o.alt_inserted != o.inserted)})
    return rows


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v <= 1.0 else f"{v:.0f}"
    return str(v)


# What each arm gets (the report says it above the table, and each row's ``gets`` column in short).
ARMS_TEXT = (
    "What each arm gets. Both arms are given the server's window (a freshly opened document: "
    "window.window_start, at most 6,000 characters before the cursor from a line start, the prompt's suffix "
    "clipped to 600 at a line end: engine.decoding.prompt.clip_window with EngineConfig's windows); only the "
    "served engine may answer a cold spot from its quick first window instead (below).",
    "- **served** (`flint serve`, onnxruntime): Flint's anchored FIM layout with token healing; a cold spot may be "
    "answered from the quick first window (768/256 characters) while the whole one warms; stopped by the request "
    "kind's rule (automatic: one line and its look-ahead line, or a block of up to maxLines; invoked: the "
    "context's budget, engine.text.budget.budget_for) and its deadline (automatic 2.5 s, invoked 6 s); "
    "post-processed by the session (items.build_items: engine.text.postprocess with the state's mode; "
    "automatic requests cut where the model doubted, confidenceCut at the server's default); invoked: item 1 of 3 variants.",
    "- **direct automatic / direct invoked** (llama-cpp-python on the GGUF): the PSM layout (prefix, suffix, "
    "middle token) without token healing, greedy, one variant, no deadline, never the quick window; the same "
    "GenParams, budget and stop rule as the served request kind (planner.state_at, stops.budgeted, "
    "stops.stop_rule) and the same post-processing (items.build_items with the same settings; the doubt cut from "
    "llama.cpp's own token probabilities); automatic blocks get the same Tab rounds. Latency: the prompt pass "
    "and decode to that rule's stop, from a reset state.",
    "- **direct raw**: the same window and layout, the line to its first line break (48 tokens at most), a "
    "block to an end token or 256 tokens; no post-processing (right-stripped); latency to that stop.",
)

ROW_GETS = {
    ("served", "automatic"): "anchored FIM, auto stop, 2.5 s, post-processed + doubt cut",
    ("served", "invoked"): "anchored FIM, budget stop, 6 s, post-processed, item 1 of 3",
    ("direct", "automatic"): "PSM, auto stop, post-processed + doubt cut",
    ("direct", "invoked"): "PSM, budget stop, post-processed, greedy",
    ("direct", "raw"): "PSM, line / EOS / 256 tokens, raw",
}


def row_gets(config: str, request: str) -> str:
    """A row's arm in short (ARMS_TEXT says it in full): every configuration but "direct" is served."""
    return ROW_GETS.get(("direct" if config == "direct" else "served", request), "")


def markdown(rows: list[dict], ranked: list[dict], meta: dict) -> str:
    cols = ["spots", "config", "request", "gets", "n", "exact", "edit_sim", "shown", "duplicate", "mid_statement",
            "comment_only", "parses", "tests", "latency_p50_ms", "latency_p95_ms", "fresh_p50_ms", "warm_p50_ms", "all_items_p50_ms", "asks_p50"]
    out = ["# Served suggestions against the model asked directly (bench_served.py)", "",
           f"Command: `{meta['command']}`  ", f"Date: {meta['date']}; CPU: {meta['cpu']}; {meta['machine']}; "
           f"load average at start {meta['load']}  ",
           f"Model: {meta['model']} (served, onnxruntime) and {meta['gguf']} (direct, llama-cpp-python "
           f"{meta['llama_cpp']}); threads {meta['threads']}  ",
           f"Held-out code: {', '.join(meta['packages'])} (pip download --no-deps at bench time)  ",
           f"Configurations: {meta['trees']}"
           + (" (commits: " + ", ".join(f"{k} {v}" for k, v in meta["commits"].items()) + ")" if meta.get("commits")
              else "") + "  ",
           *([f"llama.cpp build (direct arm): {meta['llama_cpp_build_text']}  "] if meta.get("llama_cpp_build_text")
             else []), "",
           "Shares of duplicate / mid_statement / comment_only are of the spots where something was inserted; "
           "exact and edit_sim count an empty insertion as a miss. Latency: from the first request at the spot "
           "to the first non-empty answer (an empty answer at the deadline is asked again at once, as a user "
           f"waiting there would make the editor do, up to {meta['patience']} s; asks_p50 = requests it "
           "took); blocks, automatic: the first of up to "
           f"{meta['tab_rounds']} Tab rounds. fresh = the first request in a newly opened document, warm = "
           f"the second one at the same spot, {meta.get('gap', 0.0)} s after the first one's answer (and Tabs). An invoked request is answered with item 1 first; "
           "all_items = to an answer with more than one variant (the editor asks again on flint/refresh; "
           "within 30 s). tests: the package's own tests (pytest) pass with "
           "the completed file, of the completions in a package that ships them.", "",
           *ARMS_TEXT, "",
           "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(c)) if c != "gets" else row_gets(r["config"], r["request"])
                                     for c in cols) + " |")
    if ranked:
        out += ["", "## Invoked requests with item 1 chosen by engine.rank among the served items", "",
                "What the session would serve once it orders items with `engine.rank.rank` (the served items "
                "reordered here, offline).", "",
                "| spots | config | n | exact | edit_sim | comment_only | reordered |", "|---|---|---|---|---|---|---|"]
        for r in ranked:
            out.append(f"| {r['spots']} | {r['config']} | {r['n']} | {fmt(r['exact'])} | {fmt(r['edit_sim'])} | "
                       f"{fmt(r['comment_only'])} | {r['reordered']} |")
    out += ["", "Spots: " + ", ".join(meta["spots"]), ""]
    return "\n".join(out)


def write_partial(args, outs: list[Outcome]) -> None:
    """Outcomes so far (a long run that is stopped still leaves its finished configurations)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "served.partial.json").write_text(json.dumps([asdict(o) for o in outs], indent=1))
    print(markdown(summarize(outs), [], {"command": "(partial)", "date": "", "cpu": "", "machine": "", "load": "",
                                         "model": "", "gguf": "", "llama_cpp": "", "threads": args.threads,
                                         "packages": [], "trees": args.trees, "tab_rounds": args.tab_rounds,
                                         "patience": args.patience, "gap": args.gap, "spots": []}), flush=True)


def rescore(args) -> int:
    """Run the package tests on the outcomes of an earlier run (``--rescore served.json``; the same
    --lines/--blocks/--seed draw the same spots) and rewrite its JSON and report."""
    data = json.loads(Path(args.rescore).read_text())
    work = Path(tempfile.mkdtemp(prefix="flint-served-"))
    try:
        spots = draw_spots(fetch_sources(work), args.lines, args.blocks, args.seed)
        assert [s.name for s in spots] == data["meta"]["spots"], "not the run's spots: pass its --lines/--blocks/--seed"
        outs = [Outcome(**o) for o in data["outcomes"]]
        package_tests(outs, {s.name: s for s in spots}, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data["rows"], data["outcomes"] = summarize(outs), [asdict(o) for o in outs]
    out = Path(args.out)
    (out / "served.json").write_text(json.dumps(data, indent=1))
    (out / "served.md").write_text(markdown(data["rows"], data["ranked"], data["meta"]))
    print(markdown(data["rows"], data["ranked"], data["meta"]))
    return 0


async def amain(args) -> int:
    from engine.config import resolve_model_dir
    from engine.model.manifest import load_manifest

    model_dir = resolve_model_dir(args.model)
    args.model_dir = str(model_dir)
    manifest = load_manifest(model_dir)
    gguf = args.gguf or (str(manifest.source.get("gguf", "")) if manifest else "")
    work = Path(tempfile.mkdtemp(prefix="flint-served-"))
    try:
        spots = draw_spots(fetch_sources(work), args.lines, args.blocks, args.seed)
        print(f"{len(spots)} spots: {sum(s.kind == 'line' for s in spots)} lines, "
              f"{sum(s.kind == 'block' for s in spots)} blocks", flush=True)
        if args.direct_windows:
            direct_windows(gguf, spots, args.threads, args.direct_windows, Path(args.out))
            return 0
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
        outs: list[Outcome] = []
        from bench_engine import _commit

        commits = {}
        for spec in filter(None, args.trees.split(",")):  # --trees "": the direct arm alone
            name, tree = spec.split("=", 1)
            commits[name] = _commit(Path(tree))  # before its server loads it
            print(f"[{name}] flint serve from {tree} ...", flush=True)
            outs += await run_config(name, tree, spots, args, work)
            write_partial(args, outs)
        if gguf and not args.no_direct:
            print("[direct] llama-cpp-python ...", flush=True)
            outs += run_direct(gguf, spots, args.threads, tab_rounds=args.tab_rounds)
        if not args.no_package_tests:
            package_tests(outs, {s.name: s for s in spots}, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    rows = summarize(outs)
    ranked = ranked_rows(outs, {s.name: s for s in spots})
    from bench_replay import cpu_model  # one description of the CPU for every benchmark (family, int8 ISA)

    cpu = cpu_model()
    from llama_build import build_info, describe

    build = build_info()
    llama_version = build["version"] or "-"
    meta = {"command": "python scripts/bench_served.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "load": load, "model": manifest.model_id if manifest else str(model_dir), "gguf": Path(gguf).name,
            "llama_cpp": llama_version, "llama_cpp_build": build, "llama_cpp_build_text": describe(build),
            "commits": commits, "threads": args.threads,
            "packages": [f"{n}=={v}" for n, v in PACKAGES], "trees": args.trees, "tab_rounds": args.tab_rounds,
            "patience": args.patience, "gap": args.gap,
            "spots": [s.name for s in spots]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "served.json").write_text(json.dumps({"meta": meta, "rows": rows, "ranked": ranked,
                                                 "outcomes": [asdict(o) for o in outs]}, indent=1))
    (out / "served.md").write_text(markdown(rows, ranked, meta))
    print(markdown(rows, ranked, meta))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=20)
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--trees", default=f"new={ROOT}",
                   help='NAME=SOURCE_TREE,... (each runs its own server; "": the direct arm alone)')
    p.add_argument("--model", default=None)
    p.add_argument("--gguf", default=None, help="default: the GGUF the model was built from (its manifest)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tab-rounds", type=int, default=3)
    p.add_argument("--patience", type=float, default=40.0,
                   help="seconds a user waits at a spot, asking again while the answer is empty")
    p.add_argument("--refresh-wait", type=float, default=15.0,
                   help="seconds a user at a spot that showed nothing waits for the server's flint/refresh")
    p.add_argument("--gap", type=float, default=1.0,
                   help="seconds between the first request's answer at a spot and the second request there")
    p.add_argument("--direct-windows", default=None,
                   help="only the direct model on the line spots at these windows, e.g. 768/256,2000/400")
    p.add_argument("--no-direct", action="store_true")
    p.add_argument("--no-package-tests", action="store_true", help="skip the package tests (smoke runs)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (server logs)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--rescore", default=None, help="a served.json: run the package tests on its outcomes")
    args = p.parse_args()
    return rescore(args) if args.rescore else asyncio.run(amain(args))


if __name__ == "__main__":
    raise SystemExit(main())
