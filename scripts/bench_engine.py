#!/usr/bin/env python3
"""Engine benchmark: Flint (ONNX Runtime) vs llama.cpp (llama-cpp-python) on the same GGUF, same threads.

Each engine lives in its own worker process; the driver asks them in turn (A B A B), never both at
once (one busy core cuts decode ~3x on this machine). Prints a table, writes engine.json and engine.md to
--out (docs/benchmarks by default: a smoke run passes another directory).

Fair yardsticks (issue 32): llama.cpp runs at its best per row. Before the rounds the driver measures
flash attention on and off (a cold prompt pass, plain decoding) and llama-cpp-python's prompt-lookup
decoding at each --pld-tokens draft length, and keeps the faster of each; Flint's plain decoding is
measured against llama.cpp's plain decoding, its drafted decoding (decode_spec, decode_fast) against
llama.cpp's prompt lookup, and the keystroke rows run the same token ids on both engines in both layouts
(Flint's anchored FIM and the PSM layout of llama.cpp's /infill). Every row of the report says what each
arm got.

    python scripts/bench_engine.py [--model qwen2.5-coder-0.5b] [--rounds 3] [--no-llamacpp] [--out DIR]
        [--llama-fa auto|on|off] [--pld-tokens 2,10] [--decode-prompts N] [--decode-tokens 64]
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
# fair yardsticks (issue 32): which llama.cpp row each Flint row is compared with, and what each arm gets

PLD_NGRAM = 2  # LlamaPromptLookupDecoding's n-gram (its default); the draft length is measured (--pld-tokens)

# Flint row -> the llama.cpp row it is measured against: plain decoding against plain decoding, Flint's
# drafted decoding against llama.cpp's own prompt-lookup decoding or its plain decoding, whichever was faster
# (llama-cpp-python's prompt lookup keeps logits for every position and can lose to plain decoding:
# drafted_best), each keystroke layout against itself
YARDSTICK = {
    "prefill_tok_s_200": "llamacpp_prefill_tok_s_200",
    "prefill_tok_s_1000": "llamacpp_prefill_tok_s_1000",
    "decode_tok_s": "llamacpp_decode_tok_s",
    "decode_spec_tok_s": "llamacpp_decode_drafted_best_tok_s",
    "decode_fast_tok_s": "llamacpp_decode_drafted_best_tok_s",
    "ttft_cold_ms_1000": "llamacpp_ttft_cold_ms_1000",
    "ttft_reuse_ms_1000": "llamacpp_ttft_reuse_ms_1000",
    "ttft_keystroke_fim_ms": "llamacpp_ttft_keystroke_fim_ms",
    "ttft_keystroke_psm_ms": "llamacpp_ttft_keystroke_psm_ms",
    "cold_start_s": "llamacpp_cold_start_s",
}
# the same rows against llama.cpp's own server (llama-server built for this CPU): its speculative decoding
# without a draft model is the yardstick for Flint's drafted decoding
SERVER_YARDSTICK = {
    "decode_tok_s": "llamaserver_decode_tok_s",
    "decode_spec_tok_s": "llamaserver_decode_spec_tok_s",
    "decode_fast_tok_s": "llamaserver_decode_spec_tok_s",
}
ROWS = ("prefill_tok_s_200", "prefill_tok_s_1000", "decode_tok_s", "decode_spec_tok_s", "decode_fast_tok_s",
        "ttft_cold_ms_1000", "ttft_reuse_ms_1000", "ttft_keystroke_fim_ms", "ttft_keystroke_psm_ms",
        "variants3_over_1", "rss_mb", "rss_peak_mb", "cold_start_s")


def row_gets(key: str, llama: dict) -> str:
    """What each arm got in row ``key``. ``llama``: the llama.cpp settings used (meta["llamacpp"]: flash
    attention for prompt passes and for decoding, the prompt-lookup draft length); {} without llama.cpp."""
    fa_p = f"flash_attn {'on' if llama.get('flash_attn_prompt') else 'off'}" if llama else ""
    fa_d = f"flash_attn {'on' if llama.get('flash_attn_decode') else 'off'}" if llama else ""
    pld = (f"LlamaPromptLookupDecoding(max_ngram_size={llama.get('pld_ngram', PLD_NGRAM)}, "
           f"num_pred_tokens={llama.get('pld_tokens')})") if llama else ""

    def ll(t: str) -> str:
        return f"; llama.cpp: {t}" if llama else ""

    if key.startswith("prefill_tok_s") or key == "ttft_cold_ms_1000":
        return "both: one prompt pass over plain code from an empty KV cache" + ll(fa_p)
    if key == "decode_tok_s":
        return ("both: plain greedy decoding of the same prompt token ids, no drafts (Flint: full LM head)"
                + ll(fa_d))
    best = (f"the faster of its own prompt lookup ({pld}) and its plain decoding: "
            f"{llama.get('drafted_best') or '?'}, {fa_d}")
    if key == "decode_spec_tok_s":
        return "both: the same prompt token ids; Flint: prompt-lookup drafts, full LM head" + ll(best)
    if key == "decode_fast_tok_s":
        return ("both: the same prompt token ids; Flint: prompt-lookup drafts + trimmed LM head (picks re-checked "
                "by the full head)" + ll(best))
    if key == "ttft_reuse_ms_1000":
        return "both: the KV cache of the unchanged prefix reused" + ll(fa_p)
    if key == "ttft_keystroke_fim_ms":
        return ("both: Flint's anchored FIM layout, the same token ids (typed text after the middle token), "
                "previous state cached" + ll(fa_p))
    if key == "ttft_keystroke_psm_ms":
        return ("both: the PSM layout of llama.cpp's /infill (suffix after the prefix: a keystroke re-runs "
                "it), the same token ids, previous state cached" + ll(fa_p))
    if key == "variants3_over_1":
        return "Flint only: 3 variants in one batched pass over 1"
    if key in ("rss_mb", "rss_peak_mb"):
        return "Flint's worker process only"
    if key == "cold_start_s":
        return "both: process start to ready, with a short warm-up" + ll("plain, flash_attn off")
    return ""


def spread(detail: dict, key: str) -> str:
    """A cell's spread after its median: " (mean M, min-max A–B, n N)" for more than one sample."""
    d = detail.get(key)
    if not d or d.get("n", 0) < 2 or "mean" not in d:
        return ""
    return f" (mean {d['mean']}, {d['min']}–{d['max']}, n {d['n']})"


def drafted_best(plain: float | None, pld: float | None) -> tuple[float | None, str]:
    """llama.cpp's faster decoding for the drafted rows: its prompt lookup unless its plain decoding was
    faster (tokens/s, and which)."""
    if pld is None and plain is None:
        return None, ""
    if plain is None or (pld is not None and pld >= plain):
        return pld, "prompt lookup"
    return plain, "plain"


def pick_faster(samples: dict, lower_is_better: bool):
    """The setting whose median sample is best (ties: the first listed)."""
    best, best_v = None, None
    for k, xs in samples.items():
        if not xs:
            continue
        v = statistics.median(xs)
        if best_v is None or (v < best_v if lower_is_better else v > best_v):
            best, best_v = k, v
    return best


def new_tokens(before: list[int], after: list[int]) -> int:
    """Tokens of ``after`` past its common prefix with ``before``: what a cached ``before`` leaves to run."""
    n = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        n += 1
    return len(after) - n


def keystroke_ids(tok, fim, bos_id: int | None, prefix: str, suffix: str, typed: str, anchored: bool,
                  cfg=None) -> tuple[list[int], list[int]]:
    """The prompt ids Flint's engine runs (Engine.build: clip_window, choose_anchor with the anchor the KV
    cache holds, build_prompt with token healing) before and after ``typed`` is typed at the end of
    ``prefix``, from a reset engine; ``anchored`` False: the PSM layout. Both engines get these ids."""
    from engine.config import EngineConfig
    from engine.decoding.prompt import build_prompt, choose_anchor
    from engine.text.window import clip_window

    cfg = cfg or EngineConfig()
    out = []
    previous = None
    for pre in (prefix, prefix + typed):
        p, s = clip_window(pre, suffix, cfg.max_prefix_chars, cfg.max_suffix_chars)
        anchor = None
        if anchored:
            anchor, s = choose_anchor(p, s, previous, cfg.fast.max_middle_chars, cfg.fast.fresh_middle_chars)
            previous = (p[:anchor], s)
        out.append(build_prompt(tok, p, s, fim, bos_id=bos_id, heal=True, anchor=anchor).ids)
    return out[0], out[1]


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

    def prompt_ids(self, prompt: str, max_tokens: int) -> list[int]:
        """The token ids decode() runs for ``prompt`` (Engine.build: FIM layout, empty suffix, no healing):
        llama.cpp is sent the same ids, so both engines continue the same prompt."""
        self.eng.reset()
        return self.eng.build(prompt, "", heal=False, max_new=max_tokens).ids

    def decode(self, prompt: str, max_tokens: int, fast: bool) -> dict:
        # the same prompt runs once per round and mode: an earlier run's output would be a perfect draft
        self.eng.drafts.forget()  # the remembered outputs would serve the repeated prompt as drafts
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
    """llama.cpp at its best per row (issue 32): one Llama per (flash_attn, prompt-lookup draft length), made
    when first asked for; each op says which it runs on (the driver measures both flash-attention settings
    and the draft lengths, and keeps the faster)."""

    def __init__(self, gguf: str, threads: int) -> None:
        self.gguf, self.threads = gguf, threads
        self.llms: dict[tuple[bool, int], object] = {}
        self.llm = self._llm(False, 0)  # the cold start: plain, flash attention off

    def _llm(self, fa: bool, pld: int):
        key = (bool(fa), int(pld))
        if key not in self.llms:
            from llama_cpp import Llama

            kw = {}
            if pld:  # llama-cpp-python's own prompt-lookup decoding (it keeps logits for every position)
                from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

                kw["draft_model"] = LlamaPromptLookupDecoding(max_ngram_size=PLD_NGRAM, num_pred_tokens=pld)
            # a draft model makes llama-cpp-python store every position's logits, but it sizes that buffer from
            # logits_all (False: n_batch rows), so past 512 tokens it fails (0.3.36): say it
            llm = Llama(model_path=self.gguf, n_threads=self.threads, n_threads_batch=self.threads, n_ctx=2048,
                        n_batch=512, logits_all=bool(pld), flash_attn=bool(fa), verbose=False, **kw)
            llm("def f():", max_tokens=4, temperature=0.0)  # warm up
            self.llms[key] = llm
        return self.llms[key]

    def build(self) -> dict:
        """How the llama.cpp this worker loaded was built (the driver may see another one)."""
        from llama_build import build_info

        return build_info()

    def drop(self, fa: bool, pld: int = 0) -> dict:
        """Free an instance the driver will not use (a prompt-lookup one holds n_ctx x vocab logits)."""
        llm = self.llms.pop((bool(fa), int(pld)), None)
        if llm is not None and llm is not self.llm:
            llm.close()
        return {}

    def ntok(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False, special=False))

    @staticmethod
    def _ttft(llm, prompt: str | list[int]) -> float:
        t0 = time.perf_counter()
        for _ in llm.create_completion(prompt, max_tokens=1, temperature=0.0, top_k=1, repeat_penalty=1.0,
                                       stream=True):
            break
        return (time.perf_counter() - t0) * 1000

    def prefill(self, prompt: str, fa: bool = False) -> dict:
        llm = self._llm(fa, 0)
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm, "_ctx") else None
        ms = self._ttft(llm, prompt)
        return {"tokens": self.ntok(prompt), "ms": ms}

    def reuse(self, prompt: str, changed: str, fa: bool = False) -> dict:
        llm = self._llm(fa, 0)
        self._ttft(llm, prompt)
        return {"ms": self._ttft(llm, changed), "tokens": self.ntok(changed)}

    def keystroke(self, before: list[int], after: list[int], fa: bool = False) -> dict:
        """The same keystroke as Flint's engine lays it out: ``before`` / ``after`` are the token ids its
        prompt has before and after the typed character (keystroke_ids), in either layout."""
        llm = self._llm(fa, 0)
        self._ttft(llm, before)
        return {"ms": self._ttft(llm, after), "tokens": len(after)}

    def decode(self, prompt: str | list[int], max_tokens: int, fast: bool = False, fa: bool = False,
               pld: int = 0) -> dict:
        """``prompt``: text, or the token ids Flint's engine runs for it (FlintWorker.prompt_ids)."""
        llm = self._llm(fa, pld)
        self._ttft(llm, prompt)
        times = []
        text = ""
        for chunk in llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, top_k=1,
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
    def __init__(self, kind: str, model: str, threads: int, pythonpath: str | None = None) -> None:
        env = dict(os.environ, FLINT_BENCH_T0=str(time.time()))
        if pythonpath:  # the native llama.cpp build comes before the environment's portable one
            env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
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
    ap.add_argument("--decode-prompts", type=int, default=0, help="use only the first N decode prompts (0: all)")
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--server-spec", default="ngram-simple:2:8,ngram-simple:3:16,ngram-mod",
                    help="llama-server's speculative settings without a draft model to measure (the fastest is "
                         "kept); 'none' runs no llama-server")
    ap.add_argument("--llama-build", choices=["native", "portable"], default="native",
                    help="llama.cpp built for this CPU (scripts/llama_wheel.sh native: its instruction sets, AMX "
                         "off), or the environment's portable AVX2 build the tests use")
    ap.add_argument("--llama-fa", choices=["auto", "on", "off"], default="auto",
                    help="llama.cpp flash attention (auto: measure both, keep the faster, per prompt pass / decode)")
    ap.add_argument("--pld-tokens", default="2,10",
                    help="llama.cpp prompt-lookup draft lengths to measure (the fastest is kept)")
    ap.add_argument("--calibration-samples", type=int, default=1)
    ap.add_argument("--out", default=str(OUT), help="directory for engine.json / engine.md (smoke runs: elsewhere)")
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
    commit = _commit(ROOT)  # the code the workers load, taken before they load it
    gguf = man.source.get("gguf") if man else None

    flint = Proc("flint", str(mdir), args.threads)
    cold_start = flint.ready_s
    engines = {"flint": flint}
    if not args.no_llamacpp:
        try:
            import llama_cpp  # noqa: F401

            site = native_llama() if args.llama_build == "native" else None
            engines["llamacpp"] = Proc("llamacpp", gguf, args.threads, pythonpath=site)
        except ImportError:  # the yardstick is the point: its absence is an error, not a quieter report
            print("llama-cpp-python is not installed: scripts/setup.sh export,dev,bench (or --no-llamacpp)",
                  file=sys.stderr)
            flint.close()
            return 2

    servers: dict[str, object] = {}  # llama.cpp's own server: "plain" and the kept speculative setting
    if "llamacpp" in engines and args.server_spec != "none":
        import llama_server

        server_bin = llama_server.build()
        servers["plain"] = llama_server.LlamaServer(server_bin, gguf, args.threads)

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
    dprompts = dprompts[: args.decode_prompts] if args.decode_prompts > 0 else dprompts
    # a FIM keystroke: the cursor inside a method, 3,000 characters before it and 600 after it, at the end of
    # a line (`pass`) where Enter is typed. Not inside a word or after indentation: there token healing backs
    # the typed character off with the token it joins, the prompt's ids stay the same and the "keystroke"
    # computes nothing (both engines answer from what they hold)
    cur = text.find("\n", text.find("    def _get_values(self, action, arg_strings):")) + 1
    cur = text.find(" pass\n", text.find("\n", cur + 200)) + 5  # after the next `pass`
    k_prefix, k_suffix, k_typed = text[cur - 3000: cur], text[cur: cur + 600], "\n"

    from engine.decoding.prompt import Fim

    fim = Fim(**man.fim) if man and man.fim else None
    bos = man.bos_token_id if man else None
    # both engines get the same ids for the keystroke: Flint's engine builds them itself, llama.cpp is sent them
    kids = {lay: keystroke_ids(tk, fim, bos, k_prefix, k_suffix, k_typed, lay == "fim") for lay in ("fim", "psm")}
    k_new = {lay: new_tokens(*kids[lay]) for lay in kids}  # what a keystroke has to run

    # llama.cpp decodes the very token ids Flint's engine runs for each decode prompt (its FIM layout with an
    # empty suffix): the same prompt, so the same text up to the two weight formats' near-ties
    dids = [flint("prompt_ids", prompt=dp, max_tokens=args.decode_tokens) for dp in dprompts]
    llama: dict = {}
    if "llamacpp" in engines:
        llama = calibrate(engines["llamacpp"], p1000, dids[:2], args.decode_tokens, args.llama_fa,
                          [int(x) for x in args.pld_tokens.split(",") if x.strip()], args.calibration_samples)
        print(f"llama.cpp at its best here: {json.dumps(llama)}", file=sys.stderr)
    if servers:
        servers["spec"], llama["server_spec"], llama["server_measured"] = calibrate_server(
            server_bin, gguf, args.threads, [x.strip() for x in args.server_spec.split(",") if x.strip()],
            dids[:2], args.decode_tokens, args.calibration_samples)
        print(f"llama-server's fastest drafting here: {llama['server_spec']}", file=sys.stderr)
    fa_p, fa_d, pld = llama.get("flash_attn_prompt", False), llama.get("flash_attn_decode", False), \
        llama.get("pld_tokens", 0)

    res: dict[str, dict[str, list]] = {k: {} for k in engines}

    def add(eng: str, key: str, v: float) -> None:
        res[eng].setdefault(key, []).append(v)

    keystroke_tokens: dict[str, dict[str, int]] = {}
    plain_text: dict[str, str] = {}  # Flint's plain greedy text per decode prompt, this round
    for r in range(args.rounds):
        for name, w in engines.items():  # A then B, every round
            kw = {"fa": fa_p} if name == "llamacpp" else {}
            for n, p in (("200", p200), ("1000", p1000)):
                o = w("prefill", prompt=p, **kw)
                add(name, f"prefill_tok_s_{n}", o["tokens"] / (o["ms"] / 1000))
                if n == "1000":
                    add(name, "ttft_cold_ms_1000", o["ms"])
            for _ in range(max(1, args.reuse_samples // args.rounds)):
                o = w("reuse", prompt=p1000, changed=changed, **kw)
                add(name, "ttft_reuse_ms_1000", o["ms"])
            for dp, di in zip(dprompts, dids, strict=True):
                if name == "flint":
                    o = w("decode", prompt=dp, max_tokens=args.decode_tokens, fast=False)
                    add(name, "decode_tok_s", o["tok_s"])
                    plain_text[dp] = o["text"]
                    o2 = w("decode", prompt=dp, max_tokens=args.decode_tokens, fast=True)
                    add(name, "decode_fast_tok_s", o2["tok_s"])
                    add(name, "fast_same_text", float(o2["text"] == o["text"]))
                    o3 = w("decode", prompt=dp, max_tokens=args.decode_tokens, fast="spec")
                    add(name, "decode_spec_tok_s", o3["tok_s"])
                    add(name, "spec_same_text", float(o3["text"] == o["text"]))
                else:
                    o = w("decode", prompt=di, max_tokens=args.decode_tokens, fa=fa_d)
                    add(name, "decode_tok_s", o["tok_s"])
                    o2 = w("decode", prompt=di, max_tokens=args.decode_tokens, fa=fa_d, pld=pld)
                    add(name, "decode_pld_tok_s", o2["tok_s"])
                    add(name, "pld_same_text", float(o2["text"] == o["text"]))
                    if dp in plain_text:  # Flint ran first this round (A B)
                        add(name, "same_text_as_flint", float(o["text"] == plain_text[dp]))
                        add(name, "shared_prefix_with_flint",
                            len(os.path.commonprefix([o["text"], plain_text[dp]])) / max(1, len(plain_text[dp])))
            for _ in range(max(1, args.reuse_samples // args.rounds)):
                for lay in ("fim", "psm"):
                    if name == "flint":
                        o = w("keystroke", prefix=k_prefix, suffix=k_suffix, typed=k_typed, anchored=lay == "fim")
                    else:
                        o = w("keystroke", before=kids[lay][0], after=kids[lay][1], fa=fa_p)
                    add(name, f"ttft_keystroke_{lay}_ms", o["ms"])
                    keystroke_tokens.setdefault(lay, {})[name] = o["tokens"]
            if name == "flint":
                o = w("variants", prompt=dprompts[0], max_tokens=32)
                add(name, "variants3_over_1", o["ms3"] / o["ms1"])
            if name == "llamacpp" and servers:  # llama.cpp's own server, right after its library
                res.setdefault("llamaserver", {})
                for di in dids:
                    o = servers["plain"].decode(di, args.decode_tokens)
                    add("llamaserver", "decode_tok_s", o["tok_s"])
                    o2 = servers["spec"].decode(di, args.decode_tokens)
                    add("llamaserver", "decode_spec_tok_s", o2["tok_s"])
                    add("llamaserver", "spec_same_text", float(o2["text"] == o["text"]))
                    add("llamaserver", "spec_accepted", o2["draft_accepted"] / max(1, o2["draft_n"]))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    rss = flint("rss")
    summary: dict[str, float] = {}
    detail: dict[str, dict[str, float]] = {}
    for name, d in res.items():
        for k, xs in d.items():
            key = k if name == "flint" else f"{name}_{k}"
            summary[key] = round(statistics.median(xs), 2)
            detail[key] = {"median": round(statistics.median(xs), 2), "p95": round(pct(xs, 95), 2),
                           "p99": round(pct(xs, 99), 2), "n": len(xs), "mean": round(statistics.mean(xs), 2),
                           "min": round(min(xs), 2), "max": round(max(xs), 2)}
    summary["rss_mb"] = round(rss["rss_mb"], 1)
    summary["rss_peak_mb"] = round(rss["hwm_mb"], 1)
    summary["cold_start_s"] = round(cold_start, 2)
    if "llamacpp" in engines:
        summary["llamacpp_cold_start_s"] = round(engines["llamacpp"].ready_s, 2)
        best, which = drafted_best(summary.get("llamacpp_decode_tok_s"), summary.get("llamacpp_decode_pld_tok_s"))
        if best is not None:
            summary["llamacpp_decode_drafted_best_tok_s"] = best
            llama["drafted_best"] = which
    build = engines["llamacpp"]("build") if "llamacpp" in engines else {}  # asked before the worker ends
    for w in [*engines.values(), *servers.values()]:
        w.close()

    ratios = {}
    for k, lk in [*YARDSTICK.items(), ("decode_spec_tok_s", "llamacpp_decode_pld_tok_s"),
                  ("decode_fast_tok_s", "llamacpp_decode_pld_tok_s"), *SERVER_YARDSTICK.items()]:
        if k != "cold_start_s" and summary.get(lk) and k in summary:
            ratios[f"{k}_vs_llamacpp" if lk == f"llamacpp_{k}" else f"{k}_vs_{lk}"] = round(summary[k] / summary[lk], 2)
    from llama_build import describe as describe_build

    meta = {"model": man.model_id if man else str(mdir), "threads": args.threads, "rounds": args.rounds,
            "command": "python scripts/bench_engine.py " + " ".join(sys.argv[1:]), "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": _cpu(), "decode_prompts": len(dprompts),
            "decode_tokens": args.decode_tokens, "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()], "llamacpp_build": build,
            "llamacpp": llama, "keystroke_prompt_tokens": keystroke_tokens, "keystroke_new_tokens": k_new,
            "yardstick": {k: v for k, v in YARDSTICK.items() if "llamacpp" in engines},
            "arms": {k: row_gets(k, llama) for k in ROWS}}
    OUTD = Path(args.out)
    OUTD.mkdir(parents=True, exist_ok=True)
    (OUTD / "engine.json").write_text(json.dumps({**summary, "ratios": ratios, "detail": detail, "meta": meta},
                                                 indent=2))
    rows = [("metric", "Flint", "llama.cpp", "Flint / llama.cpp", "what each arm got")]
    for k in ROWS:
        lk = YARDSTICK.get(k, "")
        lv = summary.get(lk, "")
        fv = summary.get(k, "")
        ratio = f"{fv / lv:.2f}" if isinstance(fv, float | int) and isinstance(lv, float | int) and lv else ""
        lname = f"{lv}{spread(detail, lk)}"
        if lk == "llamacpp_decode_drafted_best_tok_s" and lv != "":
            pk = "llamacpp_decode_pld_tok_s"
            lname = (f"{lv} ({llama.get('drafted_best')}; prompt lookup {summary.get(pk)}{spread(detail, pk)}, "
                     f"plain {summary.get('llamacpp_decode_tok_s')}{spread(detail, 'llamacpp_decode_tok_s')})")
        rows.append((k, f"{fv}{spread(detail, k)}", lname, ratio, row_gets(k, llama)))
    if servers:  # llama.cpp's own server: plain against plain, drafted against its own drafting
        spec = llama.get("server_spec")
        for k, lk in SERVER_YARDSTICK.items():
            fv, lv = summary.get(k, ""), summary.get(lk, "")
            ratio = f"{fv / lv:.2f}" if isinstance(fv, float | int) and isinstance(lv, float | int) and lv else ""
            gets = ("both: plain greedy decoding of the same prompt token ids; llama.cpp: its own server "
                    "(llama-server), no speculation" if k == "decode_tok_s" else
                    f"both: the same prompt token ids; Flint: {'prompt-lookup drafts' if k == 'decode_spec_tok_s' else 'prompt-lookup drafts + trimmed LM head'}; "
                    f"llama.cpp: its own server's speculative decoding without a draft model (--spec-type {spec}; "
                    f"drafts accepted {summary.get('llamaserver_spec_accepted')}, text equal to its plain "
                    f"decoding in {summary.get('llamaserver_spec_same_text')} of runs)")
            rows.append((f"{k} (llama-server)", f"{fv}{spread(detail, k)}", f"{lv}{spread(detail, lk)}", ratio,
                         gets))
    table = "\n".join(f"| {' | '.join(r)} |" if i else f"| {' | '.join(r)} |\n|---|---|---|---|---|"
                      for i, r in enumerate(rows))
    print(table)
    # reading notes written by people (what bounds each number, dead ends measured) survive re-runs
    notes_file = OUTD / "engine_notes.md"
    notes = [notes_file.read_text().rstrip() + "\n"] if notes_file.exists() else []
    fa_line = ""
    if llama:
        m = llama.get("measured", {})
        fa_line = (f"llama.cpp at its best, measured before the rounds ({args.calibration_samples} sample(s) each) "
                   f"and kept for every round: flash attention {'on' if fa_p else 'off'} for prompt passes "
                   f"(1,000-token cold prompt pass, ms: {m.get('prompt_ms')}), {'on' if fa_d else 'off'} for "
                   f"decoding (tokens/s: {m.get('decode_tok_s')}); prompt-lookup draft length {pld} "
                   f"(LlamaPromptLookupDecoding, n-gram {PLD_NGRAM}; tokens/s by draft length: "
                   f"{m.get('pld_tok_s')}). In the rounds its prompt lookup ran at "
                   f"{summary.get('llamacpp_decode_pld_tok_s')} tokens/s and its plain decoding at "
                   f"{summary.get('llamacpp_decode_tok_s')}: Flint's drafted rows are measured against the faster, "
                   f"{llama.get('drafted_best')}. Its prompt-lookup text equals its plain text in "
                   f"{statistics.mean(res['llamacpp'].get('pld_same_text', [0])) * 100:.0f}% of runs.\n")
    md = [f"# Engine benchmark\n\n{meta['date']} · model `{meta['model']}` · {args.threads} threads · "
          f"{args.rounds} rounds, engines alternated (A B A B), one at a time · CPU: {meta['cpu']} · load average "
          f"{meta['load_avg_start'][0]} at start, {meta['load_avg_end'][0]} at the end (2 cores: anything above ~0.2 "
          "is other work sharing them; llama.cpp, whose threads busy-wait, loses more to it)\n",
          f"Command: `{meta['command']}` at commit {meta['commit']} (llama.cpp: "
          + ("built for this CPU by `scripts/llama_wheel.sh native`, its instruction sets with AMX off"
             if args.llama_build == "native" else "the environment's portable AVX2 build, scripts/llama_wheel.sh")
          + ").\n",
          *([f"llama.cpp build: {describe_build(build)}\n"] if build else []),
          *([fa_line] if fa_line else []),
          "Medians, then (mean, min–max, number of samples) where a metric has more than one. Each row is measured against llama.cpp doing the "
          "same at its best (plain decoding against plain decoding; Flint's drafted decoding against llama.cpp's "
          "own prompt-lookup decoding, or its plain decoding where that was faster, both figures in the cell; each "
          "keystroke layout against the same layout), and its last column says what each arm got. "
          "decode = greedy tokens/s after the first token "
          f"on {len(dprompts)} code prompts from files outside the trimmed head's corpus (stdlib textwrap, shlex, "
          f"json.decoder; pygls) ({args.decode_tokens} tokens; both engines run the same token ids, the FIM "
          "prompt Flint's engine builds with an empty suffix); ttft_reuse = first token after only the last 5 "
          "tokens of a 1,000-token prompt changed (KV cache reused); ttft_keystroke = first token after one "
          "character (Enter at the end of a line) is typed in a FIM prompt (3,000 characters before the cursor, "
          "600 after) whose previous state is cached, in Flint's anchored layout (`fim`: the typed line after the "
          "middle token, so a keystroke appends) and in the PSM layout llama.cpp's `/infill` uses (`psm`: the "
          "suffix after the prefix, so a keystroke re-runs it); both engines run the same token ids, Flint's "
          "(prompt tokens: " + ", ".join(f"{lay} {v}" for lay, v in keystroke_tokens.items()) + "; new after the "
          "keystroke, which the cached state does not hold: " + ", ".join(f"{lay} {v}" for lay, v in k_new.items())
          + ").\n", table, "",
          f"Greedy text identical to plain decoding: speculation only (decode_spec) "
          f"{statistics.mean(res['flint'].get('spec_same_text', [0])) * 100:.0f}% of runs, all fast paths (decode_fast, "
          f"which adds the trimmed LM head) {statistics.mean(res['flint'].get('fast_same_text', [0])) * 100:.0f}%. "
          "Differences come from near-ties: a forward over several tokens uses other MatMulNBits kernels than "
          "over one, so logits differ in the last bits."
          + (f" llama.cpp's plain greedy text (the GGUF's own weights) equals Flint's (int8 weights made from "
             f"them) on the same prompt ids in {statistics.mean(res['llamacpp']['same_text_as_flint']) * 100:.0f}% "
             f"of runs; on average they share the first "
             f"{statistics.mean(res['llamacpp']['shared_prefix_with_flint']) * 100:.0f}% of Flint's text."
             if res.get("llamacpp", {}).get("same_text_as_flint") else ""), "", *notes, "```json",
          json.dumps({"summary": summary, "ratios": ratios}, indent=2), "```"]
    (OUTD / "engine.md").write_text("\n".join(md) + "\n")
    return 0


def calibrate(w: Proc, p1000: str, dprompts: list[list[int]], decode_tokens: int, fa_choice: str,
              pld_choices: list[int], samples: int) -> dict:
    """llama.cpp's best settings here: flash attention on or off for prompt passes (a cold 1,000-token
    prompt pass) and for decoding (plain greedy), then the prompt-lookup draft length (with the decoding
    flash-attention setting). The instances not kept are freed."""
    fas = [False, True] if fa_choice == "auto" else [fa_choice == "on"]
    prompt_ms: dict[bool, list[float]] = {fa: [] for fa in fas}
    decode: dict[bool, list[float]] = {fa: [] for fa in fas}
    for _ in range(samples):
        for fa in fas:  # alternated
            prompt_ms[fa].append(w("prefill", prompt=p1000, fa=fa)["ms"])
            for dp in dprompts:
                decode[fa].append(w("decode", prompt=dp, max_tokens=decode_tokens, fa=fa)["tok_s"])
    fa_p, fa_d = pick_faster(prompt_ms, True), pick_faster(decode, False)
    for fa in fas:
        if fa not in (fa_p, fa_d) and fa:  # the cold-start instance (off) stays
            w("drop", fa=fa)
    pld: dict[int, list[float]] = {n: [] for n in pld_choices}
    for _ in range(samples if len(pld_choices) > 1 else 0):
        for n in pld_choices:
            for dp in dprompts:
                pld[n].append(w("decode", prompt=dp, max_tokens=decode_tokens, fa=fa_d, pld=n)["tok_s"])
    best = pick_faster(pld, False) if len(pld_choices) > 1 else pld_choices[0]
    for n in pld_choices:
        if n != best:
            w("drop", fa=fa_d, pld=n)

    def med(d: dict) -> dict:
        return {str(k).lower(): round(statistics.median(v), 2) for k, v in d.items() if v}

    return {"flash_attn_prompt": fa_p, "flash_attn_decode": fa_d, "pld_tokens": best, "pld_ngram": PLD_NGRAM,
            "measured": {"prompt_ms": med(prompt_ms), "decode_tok_s": med(decode), "pld_tok_s": med(pld)},
            "samples": samples}


def calibrate_server(binary: str, gguf: str, threads: int, specs: list[str], dprompts: list[list[int]],
                     decode_tokens: int, samples: int):
    """llama-server's fastest speculative setting here (median tokens/s over the calibration prompts, settings
    alternated); returns the kept server (the others are stopped), its setting, and what each measured."""
    import llama_server

    running = {sp: llama_server.LlamaServer(binary, gguf, threads, sp) for sp in specs}
    tok_s: dict[str, list[float]] = {sp: [] for sp in specs}
    for _ in range(samples):
        for sp, srv in running.items():
            for dp in dprompts:
                tok_s[sp].append(srv.decode(dp, decode_tokens)["tok_s"])
    best = pick_faster(tok_s, False)
    for sp, srv in running.items():
        if sp != best:
            srv.close()
    return running[best], best, {sp: round(statistics.median(v), 2) for sp, v in tok_s.items()}


def native_llama() -> str:
    """The directory holding llama-cpp-python built for this CPU (scripts/llama_wheel.sh native: its
    instruction sets, AMX off), built on first use (~8 min on 2 cores)."""
    r = subprocess.run(["bash", str(ROOT / "scripts" / "llama_wheel.sh"), "native"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHON=sys.executable))
    if r.returncode != 0:
        raise RuntimeError(f"scripts/llama_wheel.sh native failed:\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


def _commit(tree: Path) -> str:
    """The code measured: HEAD of ``tree``, marked when it has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return (head or "?") + (" (with uncommitted changes)" if dirty else "")


def _cpu() -> str:
    """The CPU as every benchmark records it (bench_replay.cpu_model: name, family/model, widest int8 ISA)."""
    try:
        from bench_replay import cpu_model

        return cpu_model()
    except Exception:  # noqa: BLE001 - a report without its CPU's details is still a report
        return f"? x{os.cpu_count()}"


if __name__ == "__main__":
    sys.exit(main())
