#!/usr/bin/env python3
"""Engine benchmark: Flint (ONNX Runtime) vs llama.cpp (llama-cpp-python) on the same GGUF, same threads.

Each engine lives in its own worker process; the driver asks them in turn (A B A B), never both at
once (one busy core cuts decode ~3x on this machine). Prints a table, writes
docs/benchmarks/engine.json and docs/benchmarks/engine.md.

    python scripts/bench_engine.py [--model qwen2.5-coder-0.5b] [--rounds 3] [--no-llamacpp]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks"


# ---------------------------------------------------------------------------------------------------
# corpus: real code from the Python standard library
def code_text() -> str:
    std = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    for name in ("argparse.py", "json/decoder.py", "textwrap.py", "shlex.py"):
        p = std / name
        if p.exists():
            parts.append(p.read_text())
    return "\n".join(parts)


# Decode prompts come from code the trimmed LM head's corpus (engine.lm_head.code_corpus_files) does not
# include, as a user's own code is not in it: stdlib modules past the corpus' share of the stdlib, and pygls
# (a runtime dependency, so present wherever Flint is installed; site-packages are never in the corpus).
DECODE_SPOTS = (("stdlib", "textwrap.py", "def dedent("), ("stdlib", "shlex.py", "    def read_token"),
                ("stdlib", "json/decoder.py", "def JSONArray("),
                ("pygls", "workspace/text_document.py", "    def position_to_client_units"))


def decode_prompts() -> list[str]:
    """Prefixes that end inside function bodies (places where code repeats its own names), from files
    the trimmed head's corpus does not hold."""
    import pygls

    from engine.model.lm_head import code_corpus_files

    roots = {"stdlib": Path(sysconfig.get_paths()["stdlib"]), "pygls": Path(pygls.__file__).parent}
    corpus = {p.resolve() for p in code_corpus_files()}
    out = []
    for root, name, marker in DECODE_SPOTS:
        path = roots[root] / name
        if not path.exists() or path.resolve() in corpus:
            continue
        text = path.read_text()
        i = text.find(marker)
        if i > 0:
            j = text.find("\n", text.find("\n", i) + 1)  # keep the def line and one more
            out.append(text[max(0, j - 2000): j + 1])
    return out


def rss_mb() -> tuple[float, float]:
    rss = hwm = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


# ---------------------------------------------------------------------------------------------------
# workers: one engine each, JSON lines over stdin/stdout
class FlintWorker:
    def __init__(self, model: str, threads: int) -> None:
        from engine.config import EngineConfig
        from engine.engine import Engine

        self.eng = Engine.load(model, config=EngineConfig(threads=threads))
        self.tok = self.eng.tok

    def ntok(self, text: str) -> int:
        return len(self.tok.encode(text))

    def _complete(self, prompt: str, max_tokens: int, fast: bool | str, n: int = 1, temperature: float = 0.0):
        from engine.types import GenParams

        f = self.eng.config.fast
        f.speculative = bool(fast)
        f.trimmed_head = fast is True  # "spec": speculation only (exact); True: every fast path
        return self.eng.complete(prompt, "", GenParams(max_tokens=max_tokens, n=n, temperature=temperature,
                                                       token_healing=False))

    def prefill(self, prompt: str) -> dict:
        self.eng.reset()
        outs, t = self._complete(prompt, 1, False)
        return {"tokens": t.prompt_tokens, "ms": t.ttft_ms}

    def reuse(self, prompt: str, changed: str) -> dict:
        self._complete(prompt, 1, False)  # the cache holds prompt
        outs, t = self._complete(changed, 1, False)
        return {"ms": t.ttft_ms, "reused": t.reused_tokens, "tokens": t.prompt_tokens}

    def keystroke(self, prefix: str, suffix: str, typed: str, anchored: bool) -> dict:
        """First token after one keystroke in a FIM prompt whose previous state is cached."""
        from engine.types import GenParams

        self.eng.config.fast.anchored_fim = anchored
        try:
            self.eng.reset()
            self.eng.complete(prefix, suffix, GenParams(max_tokens=1))
            outs, t = self.eng.complete(prefix + typed, suffix, GenParams(max_tokens=1))
        finally:
            self.eng.config.fast.anchored_fim = True
        return {"ms": t.ttft_ms, "reused": t.reused_tokens, "tokens": t.prompt_tokens}

    def decode(self, prompt: str, max_tokens: int, fast: bool) -> dict:
        # the same prompt runs once per round and mode: an earlier run's output would be a perfect draft
        self.eng.forget_outputs()
        self._complete(prompt, 1, False)  # prefill outside the timing
        outs, t = self._complete(prompt, max_tokens, fast)
        n = len(outs[0].token_ids)
        dt = (t.total_ms - t.ttft_ms) / 1000
        return {"tokens": n, "tok_s": (n - 1) / dt if dt > 0 and n > 1 else 0.0, "text": outs[0].text,
                "accepted": t.draft_accepted, "forwards": t.forward_calls}

    def variants(self, prompt: str, max_tokens: int) -> dict:
        self._complete(prompt, 1, False)
        t0 = time.perf_counter()
        o1, _ = self._complete(prompt, max_tokens, False, n=1)
        t1 = time.perf_counter()
        o3, _ = self._complete(prompt, max_tokens, False, n=3)
        t3 = time.perf_counter()
        return {"ms1": (t1 - t0) * 1000, "ms3": (t3 - t1) * 1000, "tok1": len(o1[0].token_ids),
                "tok3": max(len(o.token_ids) for o in o3)}

    def rss(self) -> dict:
        r, h = rss_mb()
        return {"rss_mb": r, "hwm_mb": h}


class LlamaWorker:
    def __init__(self, gguf: str, threads: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads, n_ctx=2048, n_batch=512,
                         logits_all=False, verbose=False)
        self.llm("def f():", max_tokens=4, temperature=0.0)  # warm up

    def ntok(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False, special=False))

    def _ttft(self, prompt: str | list[int]) -> float:
        t0 = time.perf_counter()
        for _ in self.llm.create_completion(prompt, max_tokens=1, temperature=0.0, top_k=1, repeat_penalty=1.0,
                                            stream=True):
            break
        return (time.perf_counter() - t0) * 1000

    def prefill(self, prompt: str) -> dict:
        self.llm.reset()
        self.llm._ctx.kv_cache_clear() if hasattr(self.llm, "_ctx") else None
        ms = self._ttft(prompt)
        return {"tokens": self.ntok(prompt), "ms": ms}

    def reuse(self, prompt: str, changed: str) -> dict:
        self._ttft(prompt)
        return {"ms": self._ttft(changed), "tokens": self.ntok(changed)}

    def keystroke(self, prefix: str, suffix: str, typed: str, anchored: bool) -> dict:
        """The same keystroke as llama.cpp's /infill lays it out (PSM): the suffix after the prefix."""
        def ids(pre: str) -> list[int]:
            text = f"<|fim_prefix|>{pre}<|fim_suffix|>{suffix}<|fim_middle|>"
            return self.llm.tokenize(text.encode(), add_bos=False, special=True)

        self._ttft(ids(prefix))
        return {"ms": self._ttft(ids(prefix + typed))}

    def decode(self, prompt: str, max_tokens: int, fast: bool) -> dict:
        self._ttft(prompt)
        times = []
        text = ""
        for chunk in self.llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, top_k=1,
                                                repeat_penalty=1.0, stream=True):
            times.append(time.perf_counter())
            text += chunk["choices"][0]["text"]
        n = len(times)
        dt = times[-1] - times[0] if n > 1 else 0
        return {"tokens": n, "tok_s": (n - 1) / dt if dt > 0 else 0.0, "text": text}

    def rss(self) -> dict:
        r, h = rss_mb()
        return {"rss_mb": r, "hwm_mb": h}


def worker_main(kind: str, model: str, threads: int) -> None:
    t0 = float(os.environ.get("FLINT_BENCH_T0", time.time()))
    w = FlintWorker(model, threads) if kind == "flint" else LlamaWorker(model, threads)
    ready = time.time() - t0
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the protocol pipe
    out.write(json.dumps({"ready_s": ready}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        fn = getattr(w, req.pop("op"))
        out.write(json.dumps(fn(**req)) + "\n")
        out.flush()


class Proc:
    def __init__(self, kind: str, model: str, threads: int) -> None:
        env = dict(os.environ, FLINT_BENCH_T0=str(time.time()))
        self.p = subprocess.Popen([sys.executable, __file__, "--worker", kind, "--model", model,
                                   "--threads", str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env, cwd=str(ROOT))
        self.kind = kind
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the {kind} worker died while starting ({self._end()})")
        self.ready_s = json.loads(line)["ready_s"]

    def _end(self) -> str:
        """How the worker ended: a llama.cpp built for another CPU ends by SIGILL."""
        rc = self.p.wait(30)
        return f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"

    def __call__(self, op: str, **kw) -> dict:
        self.p.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.kind} worker died during {op} ({self._end()})")
        return json.loads(line)

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=30)


# ---------------------------------------------------------------------------------------------------
def cut_tokens(text: str, ntok, target: int) -> str:
    """The shortest prefix of text with at least target tokens (by bisection)."""
    lo, hi = 1, len(text)
    while lo < hi:
        mid = (lo + hi) // 2
        if ntok(text[:mid]) >= target:
            hi = mid
        else:
            lo = mid + 1
    return text[:lo]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))
    return xs[k]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=["flint", "llamacpp"])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reuse-samples", type=int, default=10)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if args.worker:
        worker_main(args.worker, args.model, args.threads)
        return 0

    sys.path.insert(0, str(ROOT))
    from engine.config import resolve_model_dir
    from engine.model.manifest import load_manifest

    mdir = resolve_model_dir(args.model)
    man = load_manifest(mdir)
    load_start = os.getloadavg()
    gguf = man.source.get("gguf") if man else None

    flint = Proc("flint", str(mdir), args.threads)
    cold_start = flint.ready_s
    engines = {"flint": flint}
    if not args.no_llamacpp:
        try:
            import llama_cpp  # noqa: F401

            engines["llamacpp"] = Proc("llamacpp", gguf, args.threads)
        except ImportError:  # the yardstick is the point: its absence is an error, not a quieter report
            print("llama-cpp-python is not installed: scripts/setup.sh export,dev,bench (or --no-llamacpp)",
                  file=sys.stderr)
            flint.close()
            return 2

    text = code_text()
    import tokenizers  # noqa: F401

    from engine.decoding.tokenizer import HFTokenizer

    tk = HFTokenizer(str(Path(mdir) / "tokenizer.json"))

    def ntok(s: str) -> int:
        return len(tk.encode(s))

    start = text.find("class ArgumentParser")
    p200 = cut_tokens(text[start:], ntok, 200)
    p1000 = cut_tokens(text[start:], ntok, 1000)
    ids = tk.encode(p1000)
    tail_text = tk.decode_bytes(ids[-5:]).decode("utf-8", "replace")
    changed = p1000[: len(p1000) - len(tail_text)] + "    x_y = 1\n" if p1000.endswith(tail_text) else p1000 + " "
    dprompts = decode_prompts()
    # a FIM keystroke: the cursor inside a method, ~3,000 characters before it and 600 after it
    cur = text.find("\n", text.find("    def _get_values(self, action, arg_strings):")) + 1
    cur = text.find("\n", cur + 200) + 9
    k_prefix, k_suffix = text[cur - 3000: cur], text[cur: cur + 600]

    res: dict[str, dict[str, list]] = {k: {} for k in engines}

    def add(eng: str, key: str, v: float) -> None:
        res[eng].setdefault(key, []).append(v)

    for r in range(args.rounds):
        for name, w in engines.items():  # A then B, every round
            for n, p in (("200", p200), ("1000", p1000)):
                o = w("prefill", prompt=p)
                add(name, f"prefill_tok_s_{n}", o["tokens"] / (o["ms"] / 1000))
                if n == "1000":
                    add(name, "ttft_cold_ms_1000", o["ms"])
            for _ in range(max(1, args.reuse_samples // args.rounds)):
                o = w("reuse", prompt=p1000, changed=changed)
                add(name, "ttft_reuse_ms_1000", o["ms"])
            for dp in dprompts:
                o = w("decode", prompt=dp, max_tokens=args.decode_tokens, fast=False)
                add(name, "decode_tok_s", o["tok_s"])
                if name == "flint":
                    o2 = w("decode", prompt=dp, max_tokens=args.decode_tokens, fast=True)
                    add(name, "decode_fast_tok_s", o2["tok_s"])
                    add(name, "fast_same_text", float(o2["text"] == o["text"]))
                    o3 = w("decode", prompt=dp, max_tokens=args.decode_tokens, fast="spec")
                    add(name, "decode_spec_tok_s", o3["tok_s"])
                    add(name, "spec_same_text", float(o3["text"] == o["text"]))
            for _ in range(max(1, args.reuse_samples // args.rounds)):
                o = w("keystroke", prefix=k_prefix, suffix=k_suffix, typed="x", anchored=True)
                add(name, "ttft_keystroke_fim_ms", o["ms"])
                if name == "flint":
                    o = w("keystroke", prefix=k_prefix, suffix=k_suffix, typed="x", anchored=False)
                    add(name, "ttft_keystroke_psm_ms", o["ms"])
            if name == "flint":
                o = w("variants", prompt=dprompts[0], max_tokens=32)
                add(name, "variants3_over_1", o["ms3"] / o["ms1"])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    rss = flint("rss")
    summary: dict[str, float] = {}
    detail: dict[str, dict[str, float]] = {}
    for name, d in res.items():
        for k, xs in d.items():
            key = k if name == "flint" else f"llamacpp_{k}"
            summary[key] = round(statistics.median(xs), 2)
            detail[key] = {"median": round(statistics.median(xs), 2), "p95": round(pct(xs, 95), 2),
                           "p99": round(pct(xs, 99), 2), "n": len(xs)}
    summary["rss_mb"] = round(rss["rss_mb"], 1)
    summary["rss_peak_mb"] = round(rss["hwm_mb"], 1)
    summary["cold_start_s"] = round(cold_start, 2)
    if "llamacpp" in engines:
        summary["llamacpp_cold_start_s"] = round(engines["llamacpp"].ready_s, 2)
    for w in engines.values():
        w.close()

    ratios = {}
    for k in ("prefill_tok_s_200", "prefill_tok_s_1000", "decode_tok_s", "ttft_reuse_ms_1000", "ttft_cold_ms_1000",
              "ttft_keystroke_fim_ms"):
        if f"llamacpp_{k}" in summary and summary[f"llamacpp_{k}"]:
            ratios[f"{k}_vs_llamacpp"] = round(summary[k] / summary[f"llamacpp_{k}"], 2)
    if "llamacpp_decode_tok_s" in summary:
        ratios["decode_fast_tok_s_vs_llamacpp_decode"] = round(
            summary["decode_fast_tok_s"] / summary["llamacpp_decode_tok_s"], 2)
    meta = {"model": man.model_id if man else str(mdir), "threads": args.threads, "rounds": args.rounds,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": _cpu(), "decode_prompts": len(dprompts),
            "decode_tokens": args.decode_tokens, "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()], "llamacpp_build": _llamacpp_build()}
    OUTD = Path(args.out)
    OUTD.mkdir(parents=True, exist_ok=True)
    (OUTD / "engine.json").write_text(json.dumps({**summary, "ratios": ratios, "detail": detail, "meta": meta},
                                                 indent=2))
    rows = [("metric", "Flint", "llama.cpp", "Flint / llama.cpp")]
    for k in ("prefill_tok_s_200", "prefill_tok_s_1000", "decode_tok_s", "decode_spec_tok_s", "decode_fast_tok_s",
              "ttft_cold_ms_1000",
              "ttft_reuse_ms_1000", "ttft_keystroke_fim_ms", "ttft_keystroke_psm_ms", "variants3_over_1", "rss_mb",
              "rss_peak_mb", "cold_start_s"):
        lk = "llamacpp_decode_tok_s" if k.startswith("decode_") else f"llamacpp_{k}"
        lk = "llamacpp_ttft_keystroke_fim_ms" if k == "ttft_keystroke_psm_ms" else lk
        lv = summary.get(lk, "")
        fv = summary.get(k, "")
        ratio = f"{fv / lv:.2f}" if isinstance(fv, float | int) and isinstance(lv, float | int) and lv else ""
        p95 = detail.get(k, {}).get("p95")
        rows.append((k, f"{fv}" + (f" (p95 {p95})" if p95 is not None and detail[k]["n"] > 3 else ""), str(lv), ratio))
    table = "\n".join(f"| {' | '.join(r)} |" if i else f"| {' | '.join(r)} |\n|---|---|---|---|"
                      for i, r in enumerate(rows))
    print(table)
    # reading notes written by people (what bounds each number, dead ends measured) survive re-runs
    notes_file = OUTD / "engine_notes.md"
    notes = [notes_file.read_text().rstrip() + "\n"] if notes_file.exists() else []
    md = [f"# Engine benchmark\n\n{meta['date']} · model `{meta['model']}` · {args.threads} threads · "
          f"{args.rounds} rounds, engines alternated (A B A B), one at a time · CPU: {meta['cpu']} · load average "
          f"{meta['load_avg_start'][0]} at start, {meta['load_avg_end'][0]} at the end (2 cores: anything above ~0.2 "
          "is other work sharing them; llama.cpp, whose threads busy-wait, loses more to it)\n",
          "Reproduce: `python scripts/bench_engine.py` (llama.cpp via `scripts/setup.sh export,dev,bench`).\n",
          f"llama.cpp build: `{meta['llamacpp_build']}`\n",
          "Medians (p95 where a metric has more than 3 samples). decode = greedy tokens/s after the first token "
          f"on {len(dprompts)} code prompts from files outside the trimmed head's corpus (stdlib textwrap, shlex, json.decoder; "
          f"pygls) ({args.decode_tokens} tokens); decode_fast = "
          "prompt-lookup speculation + trimmed LM head (its picks re-checked by the full head in batches: exact); ttft_reuse = first token after only the last 5 tokens "
          "of a 1,000-token prompt changed (KV cache reused); ttft_keystroke_fim = first token after one character is "
          "typed in a FIM prompt (3,000 characters before the cursor, 600 after) whose previous state is cached: "
          "Flint's anchored layout (the typed line after the middle token) vs the PSM layout "
          "(`ttft_keystroke_psm`, suffix after the prefix: a keystroke re-runs it), and llama.cpp with the PSM "
          "layout `/infill` uses.\n", table, "",
          f"Greedy text identical to plain decoding: speculation only (decode_spec) "
          f"{statistics.mean(res['flint'].get('spec_same_text', [0])) * 100:.0f}% of runs, all fast paths (decode_fast, "
          f"which adds the trimmed LM head) {statistics.mean(res['flint'].get('fast_same_text', [0])) * 100:.0f}%. "
          "Differences come from near-ties: a forward over several tokens uses other MatMulNBits kernels than "
          "over one, so logits differ in the last bits.", "", *notes, "```json", json.dumps({"summary": summary, "ratios": ratios}, indent=2), "```"]
    (OUTD / "engine.md").write_text("\n".join(md) + "\n")
    return 0


def _llamacpp_build() -> str:
    """llama.cpp's own account of the instruction sets it was compiled for (scripts/llama_wheel.sh's flags)."""
    try:
        import llama_cpp
    except ImportError:
        return "not installed"
    return f"llama-cpp-python {llama_cpp.__version__}: " + llama_cpp.llama_print_system_info().decode().strip()


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" x{os.cpu_count()}"
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    sys.exit(main())
