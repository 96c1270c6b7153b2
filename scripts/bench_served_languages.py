#!/usr/bin/env python3
"""What Tab inserts, per language (issue 36): bench_served's served arm on held-out JavaScript, TypeScript, Go,
Rust and Python (the reference), with the document's ``languageId`` set to the language.

    flock /tmp/flint-heavy.lock python scripts/bench_served_languages.py [--lines 12] [--blocks 6] \\
        [--languages python,javascript,typescript,go,rust]

Held-out code: the VALIDATION half of the functions scripts/replay_languages.py chooses (npm packs and Debian
``-dev`` packages, pinned there; Python: scripts/replay_corpus.py's PyPI wheels), cached under
``~/.cache/flint-bench/{langs,pypi}`` as those scripts cache them. No tuning decision has looked at it.

Spots (``draw``; a fixed rule with one seeded generator per language, ``random.Random(f"{seed}:{language}")``):

- **line**: every line of a validation function's body that is code (8-100 characters once stripped, not a
  comment, not closers alone) and a whole statement's line (``whole_statement_line``: not inside a statement
  running over lines, where the truth would itself end mid-statement; ``starts_and_ends_a_statement``: a statement
  starts at its first token and ends on it, or it is a block header) is a candidate. For each, in (function, line) order, the generator picks the
  cursor: after the indentation (``line start``) or, half the time, at the start of a later token of the line
  outside a string, with at least 4 characters left (``mid-line``). The rest of the line is emptied; the truth is
  that rest. The functions are shuffled and the candidates of each shuffled; line spots are taken round-robin
  over the functions (one per function per round) until ``--lines``.
- **block**: per function, half the time (the generator says) the whole body emptied (``whole body``: the cursor
  on an empty line at the body's indentation), else the body kept up to a line of the body's own level chosen
  by the generator, where no bracket but the function's is open and at least 2 lines are left, and the rest
  emptied (``rest of body``); the truth is the emptied text. The first ``--blocks`` functions of a second
  shuffle.

Each spot is opened as its own document in ONE ``flint serve`` process (fresh FLINT_HOME and FLINT_CACHE_DIR;
the languages interleaved, so the machine's load falls on all of them alike) and asked as bench_served asks
(its ``ask``, ``all_items``, ``apply_tab``, ``wants_another_tab`` imported): ``textDocument/inlineCompletion``
automatic and invoked, the order alternating per spot; item 1's insertText applied over its range; automatic
blocks Tab again up to ``--tab-rounds`` times. Served arm only: no direct llama.cpp arm.

Scores (``judge``; tree-sitter, engine/syntax, for every language, Python too):

- exact: the completed document equals the original; edit similarity: bench_served's ``edit_similarity``;
- shown: something was inserted;
- duplicate: bench_served's ``duplicates_below`` (a line repeats one of the next three below) or
  replay_quality's ``repeats_below`` (the next line below re-written, the next statement copied token by token,
  or a closer already below closed again); never for an exact insertion;
- mid-statement end (never for an exact insertion): what was inserted leaves its statement unfinished (``is_complete``, replay_quality's judge
  of a ghost: a block it opened may stay open), the rest of a word being typed excepted;
- left open (blocks): it ends inside a block or bracket it opened (``block_is_complete``);
- parses: the completed file parses without an ERROR or MISSING node (every original file does);
- latency: from the first request at the spot to the first non-empty answer (bench_served's ``ask``).

Writes docs/benchmarks/served_languages.json and served_languages.md.
"""

from __future__ import annotations

import argparse
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
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_served import (  # noqa: E402
    Spot,
    _inserted,
    all_items,
    apply_tab,
    ask,
    duplicates_below,
    edit_similarity,
    wants_another_tab,
)
from lsp_stdio import Server  # noqa: E402
from replay_languages import EXT  # noqa: E402
from replay_quality import repeats_below  # noqa: E402

from engine.syntax import block_is_complete, is_complete, open_brackets, parse  # noqa: E402

LANGUAGES = ("python", "javascript", "typescript", "go", "rust")
CACHE = Path.home() / ".cache" / "flint-bench"
LINE_CHARS = (8, 100)  # a candidate line's code, stripped
MIN_REST = 4  # characters a mid-line cursor leaves on its line
MIN_BLOCK_LINES = 2  # lines a "rest of body" spot leaves to write
_CLOSERS = frozenset(")]};, ")
_COMMENT = re.compile(r"^(#|//|/\*|\*|\"\"\"|''')")
_TOKEN = re.compile(r"\w+|\S")
NOTES = "<!-- notes: written by hand, kept when the report is written again -->"


# ------------------------------------------------------------------------------------------------ spots


@dataclass
class LangSpot(Spot):
    """bench_served's Spot (name, kind, prefix, suffix, expected) with its language and where the cursor is."""

    language: str = "python"
    where: str = ""  # "line start" | "mid-line" | "whole body" | "rest of body"


def validation_segments(language: str, cache: Path = CACHE) -> list:
    """The validation half's functions (replay_corpus.Segment: before, typed = the body, after), whole."""
    from replay_corpus import pick

    if language == "python":
        import replay_corpus as rc

        specs = rc.choose(cache / "pypi")
        return rc.segments(pick(specs, "validation"), cache / "pypi")
    import replay_languages as rl

    specs = rl.choose(language, cache / "langs")
    return rl.segments(language, pick(specs, "validation"), cache / "langs")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _code_line(code: str) -> bool:
    return LINE_CHARS[0] <= len(code) <= LINE_CHARS[1] and not _COMMENT.match(code) and not set(code) <= _CLOSERS


def mid_cuts(code: str) -> list[int]:
    """Offsets in a stripped line where a mid-line cursor may stand: the start of a token after the first, outside
    a string (an even count of each quote before it), leaving at least MIN_REST characters."""
    out = []
    for m in _TOKEN.finditer(code):
        k = m.start()
        if k == 0 or len(code) - k < MIN_REST:
            continue
        head = code[:k]
        if any(head.count(q) % 2 for q in "\"'`"):
            continue
        out.append(k)
    return out


def whole_statement_line(language: str, before_line: str, through_line: str) -> bool:
    """The line neither starts nor ends inside a bracket of a statement running over lines: only block braces are
    open at its start (Python: nothing), and at its end the same, or one more ``{`` it opens (a block header, an
    object literal; not in Python). Inside such a statement the truth itself would end mid-statement."""
    a, b = open_brackets(language, before_line), open_brackets(language, through_line)
    if a is None or b is None:
        return False
    if language == "python":
        return a == b == ()
    return all(o == "{" for o in a) and b in (a, (*a, "{"))


def starts_and_ends_a_statement(tree, line_start: int, line_end: int) -> bool:
    """The smallest node starting at the line's first code character that reaches its last one ends on the line, or
    the line ends with ``{`` or ``:`` (a block header); no such node (the line continues a statement above: a
    ``? b`` of a ternary, a ``.then(...)`` of a chain) is no whole statement's line."""
    line = tree.text[line_start:line_end]
    code = line.strip()
    lo = tree.byte_at(line_start + len(line) - len(line.lstrip()))
    hi = tree.byte_at(line_start + len(line.rstrip()))
    node = tree.root.descendant_for_byte_range(lo, lo + 1)
    while node is not None and node.start_byte == lo and node.end_byte < hi:
        node = node.parent
    if node is None or node.start_byte != lo:
        return False
    return node.end_byte <= hi or code.endswith(("{", ":"))


def line_candidates(seg, language: str, rng: random.Random) -> list[LangSpot]:
    """One line spot per code line of the body (the cursor at its start or mid-line, as ``rng`` says)."""
    out = []
    lines = seg.typed.split("\n")
    first_line = seg.before.count("\n")  # 0-based line of the body's first line in the file
    text = seg.before + seg.typed + seg.after
    tree = parse(language, text)
    pos = len(seg.before)
    for i, ln in enumerate(lines):
        start = pos
        pos += len(ln) + 1
        code = ln.strip()
        if not _code_line(code) or not whole_statement_line(language, text[:start], text[:pos - 1]) or \
                tree is None or not starts_and_ends_a_statement(tree, start, pos - 1):
            continue
        ind = _indent(ln)
        cuts = mid_cuts(code)
        mid = rng.random() < 0.5
        k = rng.choice(cuts) if mid and cuts else 0
        where = "mid-line" if k else "line start"
        off = start + len(ind) + k
        truth = code[k:]
        out.append(LangSpot(f"{seg.name}:{first_line + i + 1}" + (f"@{len(ind) + k + 1}" if k else ""), "line",
                            text[:off], text[off + len(truth):], truth, language, where))
    return out


def block_candidate(seg, language: str, rng: random.Random) -> LangSpot:
    """The function's body emptied whole, or (as ``rng`` says) its rest after a line of the body's own level."""
    lines = seg.typed.split("\n")
    ind = _indent(lines[0])
    opened = open_brackets(language, seg.before)
    cuts = []
    for j in range(1, len(lines) - MIN_BLOCK_LINES + 1):
        ln = lines[j]
        if not ln.strip() or _indent(ln) != ind or ln.strip()[0] in ")]}" or _COMMENT.match(ln.strip()):
            continue
        if open_brackets(language, seg.before + "\n".join(lines[:j]) + "\n") != opened:
            continue  # inside a statement or a nested block
        cuts.append(j)
    rest = rng.random() < 0.5
    j = rng.choice(cuts) if rest and cuts else 0
    kept = "\n".join(lines[:j]) + "\n" if j else ""
    line_no = seg.before.count("\n") + j + 1
    return LangSpot(f"{seg.name}:{line_no}:block", "block", seg.before + kept + ind, seg.after,
                    "\n".join(lines[j:])[len(ind):], language, "rest of body" if j else "whole body")


def round_robin(groups: list[list[LangSpot]], n: int) -> list[LangSpot]:
    out: list[LangSpot] = []
    depth = max(map(len, groups), default=0)
    for i in range(depth):
        for g in groups:
            if i < len(g) and len(out) < n:
                out.append(g[i])
    return out


def draw(segs: list, language: str, n_lines: int, n_blocks: int, seed: int) -> list[LangSpot]:
    """The spots of one language (the rule in the module's docstring)."""
    rng = random.Random(f"{seed}:{language}")
    segs = sorted(segs, key=lambda s: s.name)
    lines = [line_candidates(s, language, rng) for s in segs]
    blocks = [block_candidate(s, language, rng) for s in segs]
    order = list(range(len(segs)))
    rng.shuffle(order)
    for i in order:
        rng.shuffle(lines[i])
    line_spots = round_robin([lines[i] for i in order], n_lines)
    order2 = list(range(len(segs)))
    rng.shuffle(order2)
    return line_spots + [blocks[i] for i in order2[:n_blocks]]


def interleave(per_language: dict[str, list[LangSpot]]) -> list[LangSpot]:
    """The run's order: one spot of each language in turn (load and the server's state fall on all alike)."""
    return round_robin(list(per_language.values()), sum(map(len, per_language.values())))


# ------------------------------------------------------------------------------------------------ scoring


def ends_mid(spot: LangSpot, inserted: str) -> bool:
    """What was inserted leaves its statement unfinished (tree-sitter ``is_complete``, as replay_quality judges a
    ghost: a block it opened may stay open, a statement may not)."""
    if not inserted.strip():
        return False
    if re.fullmatch(r"\w+", inserted) and re.search(r"\w$", spot.prefix):
        return False  # the rest of the word being typed: the statement was open before it
    return is_complete(spot.language, spot.prefix, inserted.rstrip(), spot.suffix.split("\n", 1)[0]) is False


def leaves_block_open(spot: LangSpot, inserted: str) -> bool:
    """Blocks: what was inserted ends inside a block (or a bracket) it opened (``block_is_complete``): a body left
    unfinished after the Tabs, or an invoked block cut short."""
    return spot.kind == "block" and bool(inserted.strip()) and \
        block_is_complete(spot.language, spot.prefix, inserted.rstrip()) is False


def parses(language: str, text: str) -> bool:
    tree = parse(language, text)
    return tree is not None and not tree.root.has_error


@dataclass
class Outcome:
    spot: str
    language: str
    spot_kind: str
    where: str
    request: str  # "automatic" | "invoked"
    fresh: bool
    inserted: str
    exact: bool
    edit_sim: float
    shown: bool
    duplicate: bool
    mid_statement: bool
    parses: bool
    latency_ms: float
    left_open: bool = False  # blocks: a block the text opened is left open (leaves_block_open)
    items: int = 1
    rounds: int = 1
    asks: int = 1
    all_ms: float | None = None


def judge(spot: LangSpot, inserted: str, request: str = "", fresh: bool = True, latency_ms: float = 0.0,
          items: int = 1, rounds: int = 1) -> Outcome:
    doc = spot.prefix + inserted + spot.suffix
    exact = doc == spot.prefix + spot.expected + spot.suffix
    shown = bool(inserted.strip())
    dup = shown and not exact and (duplicates_below(inserted, spot)
                                   or repeats_below(spot.language, spot.prefix, spot.suffix, inserted))
    return Outcome(spot.name, spot.language, spot.kind, spot.where, request, fresh, inserted, exact,
                   round(edit_similarity(inserted, spot.expected), 4), shown, bool(dup),
                   shown and not exact and ends_mid(spot, inserted), parses(spot.language, doc), round(latency_ms, 1),
                   leaves_block_open(spot, inserted), items, rounds)


def truth_check(spots: list[LangSpot]) -> dict[str, dict]:
    """The judge on the true text of every spot: exact, not a duplicate, not mid-statement, parses. A spot that
    fails here says the judge (or the spot) is wrong for that language, not the server."""
    out: dict[str, dict] = {}
    for s in spots:
        o = judge(s, s.expected)
        r = out.setdefault(s.language, {"spots": 0, "not_exact": 0, "duplicate": 0, "mid_statement": 0,
                                        "left_open": 0, "not_parses": 0, "flagged": []})
        r["spots"] += 1
        # the judges themselves (judge() never flags an exact insertion: it restores the original file)
        bad = {"not_exact": not o.exact, "duplicate": duplicates_below(s.expected, s) or
               repeats_below(s.language, s.prefix, s.suffix, s.expected), "mid_statement": ends_mid(s, s.expected),
               "left_open": o.left_open, "not_parses": not o.parses}
        for k, v in bad.items():
            r[k] += int(v)
        if any(bad.values()):
            r["flagged"].append(s.name)
    return out


def quantile(values: list[float], q: float) -> float | None:
    """Linear interpolation between order statistics (statistics.quantiles, inclusive); q in (0, 1)."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def summarize(outs: list[Outcome]) -> list[dict]:
    """One row per (language, spot kind, request): shares of all requests (exact, edit_sim, shown, parses) and of
    the shown ones (duplicate, mid_statement); latency p50 (the ordinary median), mean, p95."""
    rows = []
    langs = [lang for lang in LANGUAGES if any(o.language == lang for o in outs)]
    for lang in langs:
        for sk in ("line", "block"):
            for req in ("automatic", "invoked"):
                g = [o for o in outs if (o.language, o.spot_kind, o.request) == (lang, sk, req)]
                if not g:
                    continue
                shown = [o for o in g if o.shown]
                lat = [o.latency_ms for o in g]
                rows.append({
                    "language": lang, "spots": sk, "request": req, "n": len(g),
                    "exact": round(sum(o.exact for o in g) / len(g), 3),
                    "edit_sim": round(statistics.mean(o.edit_sim for o in g), 3),
                    "shown": round(len(shown) / len(g), 3),
                    "mid_statement": f"{sum(o.mid_statement for o in shown)}/{len(shown)}",
                    "duplicate": f"{sum(o.duplicate for o in shown)}/{len(shown)}",
                    "left_open": f"{sum(o.left_open for o in shown)}/{len(shown)}" if sk == "block" else None,
                    "parses": round(sum(o.parses for o in g) / len(g), 3),
                    "latency_p50_ms": round(statistics.median(lat), 1),
                    "latency_mean_ms": round(statistics.mean(lat), 1),
                    "latency_p95_ms": round(quantile(lat, 0.95), 1),
                    "fresh_p50_ms": _median([o.latency_ms for o in g if o.fresh]),
                    "warm_p50_ms": _median([o.latency_ms for o in g if not o.fresh]),
                })
    return rows


# ------------------------------------------------------------------------------------------ the server


async def serve_spots(spots: list[LangSpot], args, work: Path, on_spot=None) -> list[Outcome]:
    """Every spot asked of one `flint serve` (this tree), as bench_served.run_config asks, with the spot's
    languageId; ``on_spot(outcomes)`` after each spot (partial results)."""
    cache_dir = tempfile.mkdtemp(prefix="flint-cache-")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "FLINT_HOME": str(work / "home"),
           "FLINT_CACHE_DIR": cache_dir}  # the built model stays where it is; caches and stats are fresh
    server = Server()
    cmd = [sys.executable, "-m", "lsp_server.cli", "serve", "--model", args.model_dir, "--threads", str(args.threads)]
    await server.start(cmd, env, work / "server.log", cwd=str(ROOT))
    await server.ask("initialize", {
        "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "bench-served-languages", "version": "1"},
        "capabilities": {"textDocument": {"synchronization": {"dynamicRegistration": False}, "inlineCompletion": {}}},
        "initializationOptions": {}}, timeout=300)
    server.notify("initialized", {})
    await asyncio.wait_for(server.ready.wait(), 600)
    out: list[Outcome] = []
    try:
        for k, spot in enumerate(spots):
            uri = f"file:///bench/langs/{k}_{re.sub(r'[^A-Za-z0-9_.]', '_', spot.name)}{EXT[spot.language]}"
            text = spot.prefix + spot.suffix
            server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": spot.language,
                                                                    "version": 1, "text": text}})
            order = ["invoked", "automatic"] if k % 2 == 0 else ["automatic", "invoked"]
            for j, req in enumerate(order):
                t_ask = time.perf_counter()
                ms, items, asks = await ask(server, uri, text, len(spot.prefix), req == "invoked", args.patience,
                                            args.refresh_wait)
                all_ms = None
                if req == "invoked" and args.variants_wait > 0:
                    # as bench_served: the editor asks again on flint/refresh until the variants are there, so
                    # the server's work on them is done before the next request
                    all_ms, _ = await all_items(server, uri, text, len(spot.prefix), t_ask, ms, items,
                                                args.variants_wait)
                doc, cursor = apply_tab(text, items[0]) if items else (text, len(spot.prefix))
                rounds, version = 1, 1
                while req == "automatic" and items and wants_another_tab(spot, text, doc, rounds, args.tab_rounds):
                    version += 1
                    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                             "contentChanges": [{"text": doc}]})
                    _, items, _ = await ask(server, uri, doc, cursor, False, args.patience / 2, args.refresh_wait)
                    rounds += 1
                    if items:
                        doc, cursor = apply_tab(doc, items[0])
                o = judge(spot, _inserted(spot, doc), req, j == 0, ms, len(items), rounds)
                o.asks, o.all_ms = asks, None if all_ms is None else round(all_ms, 1)
                out.append(o)
                if version > 1 or j == 0:  # back to the emptied spot for the other request
                    version += 1
                    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                             "contentChanges": [{"text": text}]})
                if j == 0:
                    await asyncio.sleep(args.gap)  # the user reads the first suggestion before asking again
            server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            print(f"  {k + 1}/{len(spots)} {spot.language} {spot.kind} {spot.name}: " + " | ".join(
                f"{o.request} {o.latency_ms:.0f} ms {'EXACT' if o.exact else f'es {o.edit_sim:.2f}'}"
                f"{' MID' if o.mid_statement else ''}{' DUP' if o.duplicate else ''}{'' if o.parses else ' NOPARSE'}"
                for o in out[-2:]), flush=True)
            if on_spot is not None:
                on_spot(out)
    finally:
        await server.stop()
        shutil.rmtree(cache_dir, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------------ report


def commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v <= 1.0 else f"{v:.0f}"
    return str(v)


def _clip(s: str, n: int = 90) -> str:
    s = s.replace("\n", "⏎")
    return s if len(s) <= n else s[: n - 1] + "…"


def markdown(rows: list[dict], meta: dict, outs: list[Outcome], spots: dict[str, LangSpot]) -> str:
    cols = ["language", "spots", "request", "n", "exact", "edit_sim", "shown", "mid_statement", "left_open", "duplicate",
            "parses",
            "latency_p50_ms", "latency_mean_ms", "latency_p95_ms", "fresh_p50_ms", "warm_p50_ms"]
    out = ["# Served suggestions per language on held-out code (bench_served_languages.py, issue 36)", "",
           f"Command: `{meta['command']}`  ", f"Commit: {meta['commit']}; date: {meta['date']}"
           + (f"; judged again {meta['rejudged']} (the run's inserted texts and latencies, judged with that commit's judge)" if meta.get("rejudged") else "") + "  ",
           f"CPU: {meta['cpu']}; {meta['machine']}; load average at start {meta['load']}, at the end {meta.get('load_end', '-')}  ",
           f"Model: {meta['model']} (served, onnxruntime), threads {meta['threads']}; fresh FLINT_HOME and "
           "FLINT_CACHE_DIR; one server for every language, the languages' spots interleaved  ",
           f"Spots per language: {meta['lines']} line + {meta['blocks']} block, seed {meta['seed']}; "
           f"Tab rounds {meta['tab_rounds']}, patience {meta['patience']} s, gap {meta['gap']} s, "
           f"variants wait {meta['variants_wait']} s", "",
           "**Served arm only**: no direct llama.cpp arm (issue 36 allows reporting without it).", "",
           "Held-out code: the validation half of scripts/replay_languages.py (JavaScript, TypeScript, Go, Rust) and of "
           "scripts/replay_corpus.py (Python); packages and versions in the JSON's `meta.packages` and in "
           "docs/benchmarks/replay_languages.md.", "",
           "**Spot rule** (seeded, per language `random.Random(f\"{seed}:{language}\")`): *line*: every code line of a "
           "validation body (8-100 characters stripped, not a comment, not closers alone, not inside a statement "
           "running over lines: only block braces open at its start, at its end the same or one more `{`; a statement "
           "starts at its first token and ends on the line, or the line is a block header ending in `{` or `:`) is a "
           "candidate, its cursor "
           "after the indentation or, half the time, at the start of a later token outside a string leaving >= 4 "
           "characters; the rest of the line is emptied and is the truth; functions shuffled, lines shuffled within "
           "each, taken round-robin (one per function per round). *block*: per function, half the time the whole "
           "body emptied (cursor on an empty line at the body's indentation), else the body kept up to a line of its "
           "own level with no other bracket open and >= 2 lines left, the rest emptied; the first functions of a "
           "second shuffle.", "",
           "**Columns.** exact: the completed file equals the original; edit_sim: 1 - Levenshtein / longer (inserted "
           "against the truth); shown: something inserted; mid_statement and duplicate: of the shown (k/shown); "
           "mid_statement: tree-sitter (`is_complete`, replay_quality's judge of a ghost) says what was inserted (after "
           "every Tab, blocks) leaves its statement unfinished (a block it opened may stay open), the rest of a word "
           "excepted; left_open (blocks): it ends inside a block or bracket it opened (`block_is_complete`: a body "
           "left unfinished after the Tabs, an invoked block cut short); duplicate: a line "
           "repeats one of the next three lines below, or the next statement below re-written (token level), or "
           "a closer already below closed again; parses: the completed file has no tree-sitter ERROR/MISSING node "
           "(every original has none); latency: first request at the spot to the first non-empty answer, p50 the "
           "ordinary median, p95 interpolated (n is small: p95 is about the slowest); fresh = the first request at a "
           "newly opened spot, warm = the second one there (after the first one's answer, its Tabs undone, and the "
           "gap). Requests: automatic "
           "(triggerKind 2; blocks: Tab again up to the Tab rounds) and invoked (triggerKind 1, item 1), order "
           "alternating per spot.", "",
           "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    tc = meta.get("truth_check", {})
    if tc:
        out += ["", "**The judge on the truth** (each spot's own emptied text inserted): "
                + "; ".join(f"{lang} {v['spots']} spots, {v['mid_statement']} mid-statement, {v['left_open']} left "
                            f"open, {v['duplicate']} duplicate, {v['not_parses']} not parsing"
                            for lang, v in tc.items()) + "."]
    flagged = [o for o in outs if o.mid_statement or o.duplicate or (o.shown and not o.parses and not o.left_open)]
    if flagged:
        out += ["", "## Flagged suggestions (mid-statement, duplicate, or not parsing without a block left open), up to 4 per language", "",
                "| language | spot | request | flags | inserted | truth |", "|---|---|---|---|---|---|"]
        for lang in LANGUAGES:
            for o in [o for o in flagged if o.language == lang][:4]:
                flags = ", ".join(f for f, v in (("mid", o.mid_statement), ("dup", o.duplicate),
                                                 ("open", o.left_open), ("no parse", not o.parses)) if v)
                out.append(f"| {lang} | {o.spot} ({o.where}) | {o.request} | {flags} | `{_clip(o.inserted)}` | "
                           f"`{_clip(spots[o.spot].expected) if o.spot in spots else ''}` |")
    out += ["", "Spots: " + ", ".join(f"{s} ({w})" for s, w in meta["spots"]), ""]
    return "\n".join(out)


def packages() -> list[str]:
    import replay_corpus as rc
    import replay_languages as rl

    return [f"pypi:{n}=={v}" for n, v in rc.PACKAGES] + \
        [f"{p.source}:{p.name}=={p.version}" for lang in rl.LANGUAGES for p in rl.PACKAGES[lang]]


def write(out_dir: Path, name: str, meta: dict, outs: list[Outcome], spots: list[LangSpot]) -> str:
    rows = summarize(outs)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(
        {"meta": meta, "rows": rows, "outcomes": [asdict(o) for o in outs],
         "spots": [asdict(s) | {"prefix": None, "suffix": None} for s in spots]}, indent=1))
    md = markdown(rows, meta, outs, {s.name: s for s in spots})
    path = out_dir / f"{name}.md"
    old = path.read_text() if path.exists() else ""
    if NOTES in old:  # the hand-written reading of a run stays: from the marker to the list of spots
        notes = old.split(NOTES, 1)[1].split("\nSpots: ", 1)[0]
        md = md.replace("\nSpots: ", "\n" + NOTES + notes + "\nSpots: ", 1)
    path.write_text(md)
    return md


async def amain(args) -> int:
    from bench_replay import cpu_model  # one description of the CPU for every benchmark

    from engine.config import resolve_model_dir
    from engine.model.manifest import load_manifest

    model_dir = resolve_model_dir(args.model)
    args.model_dir = str(model_dir)
    manifest = load_manifest(model_dir)
    langs = [x for x in args.languages.split(",") if x]
    per_lang = {lang: draw(validation_segments(lang), lang, args.lines, args.blocks, args.seed) for lang in langs}
    spots = interleave(per_lang)
    for lang, sp in per_lang.items():
        print(f"{lang}: {sum(s.kind == 'line' for s in sp)} line spots, {sum(s.kind == 'block' for s in sp)} "
              f"block spots", flush=True)
    meta = {"command": "python scripts/bench_served_languages.py " + " ".join(sys.argv[1:]), "commit": commit(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "load": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
            "model": manifest.model_id if manifest else str(model_dir), "threads": args.threads,
            "languages": langs, "lines": args.lines, "blocks": args.blocks, "seed": args.seed,
            "tab_rounds": args.tab_rounds, "patience": args.patience, "refresh_wait": args.refresh_wait,
            "gap": args.gap, "variants_wait": args.variants_wait, "packages": packages(),
            "truth_check": truth_check(spots), "spots": [(s.name, s.where) for s in spots]}
    print("judge on the truth:", {k: {kk: vv for kk, vv in v.items() if kk != "flagged"}
                                   for k, v in meta["truth_check"].items()}, flush=True)
    if args.spots_only:
        for s in spots:
            print(f"{s.language:<11}{s.kind:<6}{s.where:<13}{s.name}  {_clip(s.expected, 70)!r}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="flint-served-langs-"))
    out_dir = Path(args.out)
    partial = f"{args.name}.partial"
    try:
        outs = await serve_spots(spots, args, work, on_spot=lambda o: write(out_dir, partial, meta, o, spots))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    meta["load_end"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    md = write(out_dir, args.name, meta, outs, spots)
    for p in (out_dir / f"{partial}.json", out_dir / f"{partial}.md"):
        p.unlink(missing_ok=True)
    print(md)
    return 0


def rejudge(path: Path, out_dir: Path, name: str) -> int:
    """Judge a run's JSON again (``--rejudge JSON``): its spots drawn again from its meta (languages, lines,
    blocks, seed), every outcome's inserted text judged with today's judge, its latencies kept; the JSON and the
    report rewritten. Names of block spots before ``:block`` was added to them are matched by (name, kind)."""
    data = json.loads(path.read_text())
    meta = data["meta"]
    per_lang = {lang: draw(validation_segments(lang), lang, meta["lines"], meta["blocks"], meta["seed"])
                for lang in meta["languages"]}
    spots = interleave(per_lang)
    by_key = {(s.name.removesuffix(":block"), s.kind): s for s in spots}
    outs = []
    for d in data["outcomes"]:
        spot = by_key[(d["spot"].removesuffix(":block"), d["spot_kind"])]
        o = judge(spot, d["inserted"], d["request"], d["fresh"], d["latency_ms"], d["items"], d["rounds"])
        o.asks, o.all_ms = d["asks"], d["all_ms"]
        outs.append(o)
    meta |= {"truth_check": truth_check(spots), "spots": [(s.name, s.where) for s in spots],
             "rejudged": f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at {commit()}"}
    print(write(out_dir, name, meta, outs, spots))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--languages", default=",".join(LANGUAGES))
    p.add_argument("--lines", type=int, default=14, help="line spots per language")
    p.add_argument("--blocks", type=int, default=7, help="block spots per language")
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tab-rounds", type=int, default=3)
    p.add_argument("--patience", type=float, default=20.0,
                   help="seconds a user waits at a spot, asking again while the answer is empty")
    p.add_argument("--refresh-wait", type=float, default=10.0,
                   help="seconds a user at a spot that showed nothing waits for the server's flint/refresh")
    p.add_argument("--gap", type=float, default=1.0,
                   help="seconds between the first request's answer at a spot and the second request there")
    p.add_argument("--variants-wait", type=float, default=15.0,
                   help="invoked: seconds to wait for the other variants (flint/refresh) before going on; 0: none")
    p.add_argument("--spots-only", action="store_true", help="print the spots and the judge's truth check, no server")
    p.add_argument("--keep", action="store_true", help="keep the work directory (server log)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--name", default="served_languages", help="file name of the JSON and the report")
    p.add_argument("--rejudge", default=None, help="a run's JSON: judge its outcomes again, rewrite JSON and report")
    args = p.parse_args()
    if args.rejudge:
        return rejudge(Path(args.rejudge), Path(args.out), args.name)
    return asyncio.run(amain(args))


if __name__ == "__main__":
    raise SystemExit(main())
