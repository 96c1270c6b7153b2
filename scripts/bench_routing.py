#!/usr/bin/env python
"""Hybrid routing on replayed typing: the fast model only, the capable model only (local 1.5B, and the
1.5B on llama.cpp's server as the remote), and hybrid routing, side by side in one run.

The replay is scripts/bench_replay.py's (the real `flint serve` over stdio, a simulated VS Code typist
sending an automatic inline request per keystroke, Tab on a matching suggestion): keystroke ->
suggestion latency (p50 / p95 / p99) and characters saved by accepting. Each configuration gets its own
server process and an empty disk cache; the remote configurations get a fresh `llama_cpp.server`
(llama-cpp-python, the `bench` / `remote-test` extras) serving the 1.5B preset's GGUF on 127.0.0.1.

Configurations:

- ``fast``: Qwen2.5-Coder-0.5B int8 in-process, ``routing: local`` (the default);
- ``capable-local``: Qwen2.5-Coder-1.5B int8 in-process, ``routing: local``;
- ``capable-remote``: ``routing: remote``: every request to the 1.5B on the llama.cpp server (the local
  0.5B only as the fallback);
- ``hybrid``: keystrokes on the local 0.5B, blocks (multi-line) on the remote 1.5B.

(Routing ``race``, measured here in docs/benchmarks/routing.md, never had its remote answer shown and was
removed.)

On this machine the "remote" server shares the same 2 CPU cores with the local model (a real remote
tier is a GPU box): read the remote rows as "the capable model over the OpenAI API", not as GPU speed.

    python scripts/bench_routing.py                       # 300 keystrokes per configuration
    python scripts/bench_routing.py --configs fast,hybrid --keys 60 --out /tmp/routing   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_replay as br  # noqa: E402

CONFIGS = ("fast", "capable-local", "capable-remote", "hybrid")
FAST, CAPABLE = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, gguf: Path, threads: int, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", "4096", "--n_threads", str(threads), "--verbose", "False"],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})  # no spinning threads beside the local model
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"llama_cpp.server exited (log: {log})")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise SystemExit("llama_cpp.server did not come up")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


async def wait_idle(pids: list[int], window_s: float = 0.5, quiet_windows: int = 3, timeout: float = 300) -> float:
    """Wait until these processes use (almost) no CPU: both tiers have finished their work."""
    t0 = time.perf_counter()
    quiet = 0
    last = sum(cpu_seconds(p) for p in pids)
    while time.perf_counter() - t0 < timeout and quiet < quiet_windows:
        await asyncio.sleep(window_s)
        now = sum(cpu_seconds(p) for p in pids)
        quiet = quiet + 1 if now - last < 0.05 * window_s else 0
        last = now
    return time.perf_counter() - t0


class WarmServer(br.Server):
    """bench_replay's client, whose warm start (the first request in each file) also waits until both
    tiers are idle: the remote's first whole-prompt pass, and the local model's KV warming when that
    first request went to the remote, are done before typing starts, as the local one is in `fast`."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: list[int] = []
        self._cold: set[str] = set()

    def notify(self, method: str, params: dict) -> None:
        if method == "textDocument/didOpen":
            self._cold.add(params["textDocument"]["uri"])
        super().notify(method, params)

    def request(self, method: str, params: dict):
        msg_id, fut = super().request(method, params)
        uri = params.get("textDocument", {}).get("uri")
        if method != "textDocument/inlineCompletion" or uri not in self._cold:
            return msg_id, fut
        self._cold.discard(uri)
        settled = asyncio.get_running_loop().create_future()

        async def after_idle() -> None:
            _, msg = await fut
            await wait_idle([*self.pids, self.proc.pid])
            settled.set_result((time.perf_counter(), msg))

        asyncio.ensure_future(after_idle())
        return msg_id, settled


async def run_config(name: str, model_dir: str, options: dict, segments, args, env, logs: Path,
                     pids: list[int]):
    """bench_replay.run_config with a model per configuration; keeps the server's status stream."""
    server = WarmServer()
    server.pids = pids
    cmd = [sys.executable, "-m", "lsp_server", "--threads", str(args.threads), "--model", model_dir,
           *(["-v"] if args.keep_logs else [])]
    t0 = time.perf_counter()
    await server.start(cmd, env, logs / f"server-{name}.log")
    _, init = server.request("initialize", {
        "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "bench-routing", "version": "1"},
        "capabilities": {"textDocument": {"synchronization": {"dynamicRegistration": False},
                                          "inlineCompletion": {}}},
        "initializationOptions": options})
    await asyncio.wait_for(init, 300)
    server.notify("initialized", {})
    await asyncio.wait_for(server.ready.wait(), 600)
    run = br.Run(name, model_load_s=time.perf_counter() - t0)
    t1 = time.perf_counter()
    await br.replay(server, segments, br.Typist(key_s=1 / args.cps, pause_p=args.pause_p), args.seed, run,
                    args.keys, not args.cold)
    run.wall_s = time.perf_counter() - t1
    statuses = [p for _, p in server.statuses]
    await server.stop()
    return run, statuses


TIER_RE = re.compile(r" · (remote|capable)\b")


def tiers(statuses: list[dict]) -> dict:
    """Answers per backend, read from the server's flint/status messages (one per answer sent)."""
    answers = [p for p in statuses if br.ANSWER_RE.match(p.get("message", ""))]
    capable = [p for p in answers if TIER_RE.search(p["message"])]
    return {"answers": len(answers), "capable_tier": len(capable),
            "capable_share": round(len(capable) / len(answers), 3) if answers else 0.0,
            "local_fallbacks": sum("local fallback" in p.get("message", "") for p in statuses)}


def ratio(a, b) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "–"


def report(rows: list[dict], meta: dict) -> str:
    base = next((r for r in rows if r["config"] == "fast"), rows[0])
    out = [
        "# Hybrid routing on replayed typing",
        "",
        f"`{meta['command']}` — {meta['date']}, {meta['machine']}, load average {meta['load_average']}.",
        "",
        f"Local fast model: {meta['fast']}; capable: {meta['capable']} (local int8) and "
        f"{meta['capable_gguf']} on llama-cpp-python {meta['llama_cpp']}'s server (the remote, same machine, "
        f"{meta['server_threads']} threads). Typist: {meta['typist']}. Segments: {', '.join(meta['segments'])}.",
        "",
        "| config | keystrokes | answered | p50 | p95 | p99 | model answers: n, p50, p95 | p95 vs fast | "
        "chars saved | share of typed | answers from the capable tier | fallbacks |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lat, t, mod = r["latency_ms"], r["tiers"], r["model_latency_ms"]
        out.append(f"| {r['config']} | {r['keystrokes']} | {r['with_suggestion']} | {br.ms(lat['p50'])} | "
                   f"{br.ms(lat['p95'])} | {br.ms(lat['p99'])} | {mod['n']}, {br.ms(mod['p50'])}, {br.ms(mod['p95'])} | "
                   f"{ratio(lat['p95'], base['latency_ms']['p95'])} | "
                   f"{r['chars_saved']} | {br.share(r['chars_saved_share'])} | "
                   f"{t['capable_tier']} / {t['answers']} | {t['local_fallbacks']} |")
    out += [
        "",
        "Latency: didChange sent → non-empty inline answer received, over the keystrokes that got one "
        "(most are type-through answers of a few ms; \"model answers\" are the ones a generation had to make). "
        "Characters saved: accepted characters minus the Tab keystrokes, and their share of the typed "
        "region. Answers from the capable tier: flint/status messages tagged `· remote` / `· capable` "
        "(type-through of a capable suggestion counts as capable).",
        "",
        "## Reading it",
        "",
        "- The remote server runs on the same two cores as the local model here; on a GPU server its rows "
        "would be faster. What carries over: which requests each routing sends where, and that type-through, "
        "memory and the disk cache serve the remote's suggestions like the local model's.",
        "- `capable-remote` sends every keystroke over HTTP; `hybrid` keeps one-line keystrokes local and "
        "sends blocks.",
        "- One run per configuration over one segment: compare rows by more than the run-to-run noise.",
        "",
        "Sources per configuration (share of keystrokes): "
        + "; ".join(f"{r['config']}: " + ", ".join(f"{k} {v:.0%}" for k, v in r["share_of_keystrokes"].items() if v)
                    for r in rows),
    ]
    return "\n".join(out) + "\n"


async def amain(args) -> int:
    from engine import paths
    from engine.config import resolve_model_dir
    from engine.model.manifest import load_manifest
    from engine.model.presets import PRESETS

    wanted = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in wanted if c not in CONFIGS]
    if bad:
        raise SystemExit(f"unknown configs {bad}: choose from {', '.join(CONFIGS)}")
    fast_dir = str(resolve_model_dir(FAST))
    capable_dir = str(resolve_model_dir(CAPABLE)) if "capable-local" in wanted else None
    gguf = paths.gguf_dir() / PRESETS[CAPABLE].gguf_name
    if any(c in wanted for c in ("capable-remote", "hybrid")) and not gguf.exists():
        raise SystemExit(f"{gguf} missing: run `flint model build {CAPABLE}` (it fetches the GGUF)")
    corpus = [c for c in br.default_corpus() if Path(c[0]).stem in args.corpus.split(",")]
    if not corpus:
        raise SystemExit(f"no corpus file among {args.corpus!r}")
    per_segment = max(40, int(args.keys * 1.15 / len(corpus)))
    segments = [br.make_segment(p, lang, marker, per_segment) for p, lang, marker in corpus]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="flint-routing-"))
    logs = work / "logs"
    logs.mkdir()
    load = os.getloadavg()
    rows, runs = [], []
    try:
        for name in wanted:
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "FLINT_HOME": str(work / "home"),
                   "FLINT_CACHE_DIR": str(work / f"cache-{name}")}
            llama = None
            model_dir, options = fast_dir, {"routing": "local"}
            if name == "capable-local":
                model_dir = capable_dir
            elif name in ("capable-remote", "hybrid"):
                llama = LlamaServer(gguf, args.server_threads, logs / f"llama-{name}.log")
                options = {"routing": name.replace("capable-", ""), "remoteUrl": llama.url,
                           "remoteTimeoutMs": args.remote_timeout_ms}
            print(f"[{name}] replaying {len(segments)} segments, up to {args.keys} keystrokes ...", flush=True)
            try:
                run, statuses = await run_config(name, model_dir, options, segments, args, env, logs,
                                                 [llama.proc.pid] if llama is not None else [])
            finally:
                if llama is not None:
                    llama.stop()
            s = br.summarize(run)
            s["tiers"] = tiers(statuses)
            mlat = [k.latency_ms for k in run.keys if k.outcome == "suggestion" and k.source == "model"
                    and k.latency_ms is not None]
            s["model_latency_ms"] = {"n": len(mlat), "p50": br.pct(mlat, 50), "p95": br.pct(mlat, 95),
                                     "p99": br.pct(mlat, 99)}
            s["options"] = {k: v for k, v in options.items() if k != "remoteUrl"}
            s["model"] = Path(model_dir).name
            print(f"[{name}] {s['keystrokes']} keystrokes: p50 {br.ms(s['latency_ms']['p50'])}, p95 "
                  f"{br.ms(s['latency_ms']['p95'])}, p99 {br.ms(s['latency_ms']['p99'])}, saved {s['chars_saved']} "
                  f"chars, capable tier {s['tiers']}", flush=True)
            rows.append(s)
            runs.append(run)
    finally:
        if args.keep_logs:
            print(f"logs kept in {logs}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    import llama_cpp

    fm, cm = load_manifest(Path(fast_dir)), load_manifest(Path(capable_dir)) if capable_dir else None
    meta = {
        "command": "python scripts/bench_routing.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": " / ".join(f"{x:.2f}" for x in load),
        "fast": fm.model_id if fm else fast_dir, "capable": cm.model_id if cm else CAPABLE,
        "capable_gguf": PRESETS[CAPABLE].gguf_name, "llama_cpp": llama_cpp.__version__,
        "server_threads": args.server_threads, "threads": args.threads,
        "segments": [f"{s.name} ({s.language}, {len(s.typed)} chars)" for s in segments],
        "typist": f"{br.Typist(key_s=1 / args.cps, pause_p=args.pause_p).describe()}; seed {args.seed}",
    }
    (out / "routing.md").write_text(report(rows, meta))
    (out / "routing.json").write_text(json.dumps({
        "meta": meta, "summaries": rows,
        "keystrokes": {r.config: [{k: v for k, v in asdict(key).items() if k != "sent"} for key in r.keys]
                       for r in runs}}, indent=1))
    print(report(rows, meta))
    print(f"wrote {out / 'routing.md'}")
    return 0


def render_only(out: Path) -> int:
    data = json.loads((out / "routing.json").read_text())
    (out / "routing.md").write_text(report(data["summaries"], data["meta"]))
    print(f"wrote {out / 'routing.md'}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=300, help="keystrokes per configuration (default 300)")
    p.add_argument("--corpus", default="fnmatch",
                   help="comma-separated files of bench_replay's corpus (stems: textwrap, shlex, graphlib, fnmatch); "
                        "default fnmatch, whose short prefix keeps the 1.5B's first whole-prompt pass on 2 CPU "
                        "cores under a minute")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument("--cps", type=float, default=6.0)
    p.add_argument("--pause-p", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="the local model's threads")
    p.add_argument("--server-threads", type=int, default=2, help="the llama.cpp server's threads")
    p.add_argument("--remote-timeout-ms", type=int, default=120_000,
                   help="a remote generation's deadline (the first whole-prompt pass of the 1.5B on 2 shared "
                        "CPU cores takes tens of seconds)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--cold", action="store_true")
    p.add_argument("--keep-logs", action="store_true")
    p.add_argument("--render-only", action="store_true", help="rewrite routing.md from --out/routing.json")
    args = p.parse_args()
    if args.render_only:
        return render_only(Path(args.out))
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
