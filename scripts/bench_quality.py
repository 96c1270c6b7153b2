#!/usr/bin/env python3
"""Quantisation quality vs speed: greedy text of each built precision against fp32 (the dequantised GGUF)
and against llama.cpp on the same GGUF, on the eval prompts (FIM and prefix-only), plus decode speed.

    python scripts/bench_quality.py [--model qwen2.5-coder-0.5b] [--precisions int4,int4-mixed,int8]

Writes docs/benchmarks/quality.json and docs/benchmarks/quality.md. Engines run one at a time.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import paths  # noqa: E402
from engine.config import EngineConfig, resolve_model_dir  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.types import GenParams  # noqa: E402

PROMPTS = json.loads(resources.files("engine").joinpath("data/eval_prompts.json").read_text())
MAX_NEW = 24


def heldout_prompts(n: int, seed: int = 7) -> list[dict[str, str]]:
    """Cursors at the start of a line's code in pygls and lsprotocol (runtime dependencies, so on every
    machine; never in the trimmed head's corpus, as a user's code is not): 1,500 characters before, 300 after."""
    import lsprotocol
    import pygls

    files = [f for root in (Path(pygls.__file__).parent, Path(lsprotocol.__file__).parent)
             for f in sorted(root.rglob("*.py")) if f.stat().st_size > 4000]
    rng = random.Random(seed)
    rng.shuffle(files)
    out = []
    for f in files[:n]:
        t = f.read_text()
        lines = t.split("\n")
        i = rng.randrange(len(lines) // 4, len(lines) - 3)
        off = sum(len(x) + 1 for x in lines[:i]) + len(lines[i]) - len(lines[i].lstrip())
        out.append({"prefix": t[max(0, off - 1500):off], "suffix": t[off:off + 300]})
    return out


def run_flint(mdir: Path) -> tuple[list[str], float, list[list[int]]]:
    eng = Engine.load(mdir, config=EngineConfig(threads=2))
    eng.config.fast.speculative = False
    eng.config.fast.anchored_fim = False  # the same token ids for every engine: this table is about weights
    texts, ids, rates = [], [], []
    for p in PROMPTS:
        eng.reset()
        c, t = eng.complete(p["prefix"], p["suffix"], GenParams(max_tokens=MAX_NEW, token_healing=False))
        texts.append(c[0].text)
        ids.append(c[0].token_ids)
        n = len(c[0].token_ids)
        if n > 4:
            rates.append((n - 1) / ((t.total_ms - t.ttft_ms) / 1000))
    del eng
    gc.collect()
    return texts, statistics.median(rates) if rates else 0.0, ids


def run_llamacpp(gguf: str, fim_prompts: list[list[int]], stop: set[int], detok) -> list[str]:
    from llama_cpp import Llama

    llm = Llama(model_path=gguf, n_threads=2, n_ctx=2048, logits_all=False, verbose=False)
    out = []
    for ids in fim_prompts:
        llm.reset()
        gen = []
        for t in llm.generate(ids, top_k=1, temp=0.0, repeat_penalty=1.0):
            if t in stop or len(gen) >= MAX_NEW:
                break
            gen.append(t)
        out.append(detok(gen))
    del llm
    gc.collect()
    return out


def line_samples(n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """Held-out line completions from the Python standard library: (prefix, suffix, truth). The cursor sits
    inside a line after a non-word character; the truth is the rest of that line; the suffix starts at
    the line break after it (the middle is missing from the prompt, as when the user is writing it)."""
    import random
    import sysconfig

    std = Path(sysconfig.get_paths()["stdlib"])
    files = ["textwrap.py", "shlex.py", "csv.py", "argparse.py", "json/encoder.py", "dataclasses.py",
             "fractions.py", "heapq.py", "bisect.py", "statistics.py"]
    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    while len(out) < n:
        t = (std / rng.choice(files)).read_text()
        i = rng.randrange(2000, len(t) - 500)
        ls, le = t.rfind("\n", 0, i) + 1, t.find("\n", i)
        line = t[ls:le]
        if len(line.strip()) < 12 or line.strip().startswith("#"):
            continue
        ind = len(line) - len(line.lstrip())
        cands = [k for k in range(ind + 1, len(line) - 5) if not line[k - 1].isalnum()]
        if cands:
            k = rng.choice(cands)
            out.append((t[max(0, ls + k - 1500): ls + k], t[le: le + 400], line[k:]))
    return out


def line_eval(mdir: Path, samples: list[tuple[str, str, str]]) -> dict[str, dict[str, float]]:
    """Exact first-line match and shared-prefix share against the held-out line, for plain PSM prompts
    and anchored prompts (the typed line after the middle token, engine/decoding/prompt.py), greedy, healing on."""
    eng = Engine.load(mdir, config=EngineConfig(threads=2))
    res = {}
    for name, anchored in (("psm", False), ("anchored", True)):
        eng.config.fast.anchored_fim = anchored
        exact, share = 0, 0.0
        for pre, suf, truth in samples:
            eng.reset()
            c, _ = eng.complete(pre, suf, GenParams(max_tokens=24, max_lines=1))
            got = c[0].text.split("\n")[0]
            exact += got.rstrip() == truth.rstrip()
            share += prefix_agreement(got, truth) * max(len(got), len(truth)) / max(1, len(truth))
        res[name] = {"exact": exact, "n": len(samples), "share": round(share / len(samples), 3)}
    del eng
    gc.collect()
    return res


def prefix_agreement(a: str, b: str) -> float:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n / max(1, max(len(a), len(b)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--precisions", default="int4,int4-mixed,int8")
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--lines", type=int, default=60, help="held-out line completions for PSM vs anchored (0: skip)")
    ap.add_argument("--heldout", type=int, default=30,
                    help="prompts from pygls/lsprotocol code added to the eval prompts (0: eval prompts only)")
    ap.add_argument("--extra", action="append", default=[], metavar="LABEL=DIR",
                    help="another model directory to compare (e.g. an older weight recipe)")
    args = ap.parse_args()
    n_eval = len(PROMPTS)
    PROMPTS.extend(heldout_prompts(args.heldout) if args.heldout else [])
    ref_dir = resolve_model_dir(paths.models_dir() / f"{args.model}-fp32")
    ref, ref_rate, _ = run_flint(ref_dir)
    ref_eng = Engine(ref_dir, EngineConfig(threads=2))
    ref_eng.config.fast.anchored_fim = False
    fim_ids = [ref_eng.build(p["prefix"], p["suffix"], heal=False).ids for p in PROMPTS]
    rows = {"fp32": {"same_as_fp32": len(PROMPTS), "char_agreement": 1.0, "decode_tok_s": round(ref_rate, 1)}}
    texts = {"fp32": ref}
    llama = None
    if not args.no_llamacpp:
        try:
            tok = ref_eng.tok
            llama = run_llamacpp(ref_eng.manifest.source["gguf"], fim_ids, ref_eng.stop_ids,
                                 lambda ids: tok.decode_bytes(ids).decode("utf-8", "replace"))
            texts["llama.cpp"] = llama
        except ImportError:
            print("llama-cpp-python missing: skipping", file=sys.stderr)
    del ref_eng
    dirs = [(prec, paths.models_dir() / f"{args.model}-{prec}") for prec in args.precisions.split(",") if prec]
    dirs += [(e.split("=", 1)[0], Path(e.split("=", 1)[1])) for e in args.extra]
    for prec, d in dirs:
        if not (d / "flint.json").exists():
            print(f"{d} not built; skipping (flint model build -p {prec})", file=sys.stderr)
            continue
        t, rate, _ = run_flint(d)
        texts[prec] = t
        rows[prec] = {"same_as_fp32": sum(a == b for a, b in zip(t, ref, strict=True)),
                      "char_agreement": round(statistics.mean(prefix_agreement(a, b) for a, b in zip(t, ref, strict=True)), 3),
                      "decode_tok_s": round(rate, 1)}
    if llama is not None:
        for k, t in texts.items():
            rows.setdefault(k, {})["same_as_llamacpp"] = sum(a == b for a, b in zip(t, llama, strict=True))
        rows["llama.cpp"].update({"same_as_fp32": sum(a == b for a, b in zip(llama, ref, strict=True)),
                                  "char_agreement": round(statistics.mean(prefix_agreement(a, b) for a, b in zip(llama, ref, strict=True)), 3)})
    lines_res = line_eval(resolve_model_dir(args.model), line_samples(args.lines)) if args.lines else {}
    n = len(PROMPTS)
    for k, t in texts.items():
        if k in rows:
            rows[k]["same_as_fp32_eval"] = sum(a == b for a, b in zip(t[:n_eval], ref[:n_eval], strict=True))
    head = ("| precision | same greedy text as fp32 (all) | … eval prompts | … held-out code | mean shared-prefix share | "
            "same as llama.cpp | decode tok/s (plain, 2 threads) |\n|---|---|---|---|---|---|---|")
    lines = [head]
    for k, r in rows.items():
        ev = r.get("same_as_fp32_eval", n_eval if k == "fp32" else None)
        split = f"{ev}/{n_eval} | {r.get('same_as_fp32', 0) - ev}/{n - n_eval}" if ev is not None else " | "
        lines.append(f"| {k} | {r.get('same_as_fp32', '')}/{n} | {split} | {r.get('char_agreement', '')} | "
                     f"{str(r.get('same_as_llamacpp', '')) + '/' + str(n) if 'same_as_llamacpp' in r else ''} | {r.get('decode_tok_s', '')} |")
    table = "\n".join(lines)
    if lines_res:
        table2 = ("| prompt layout | exact line | mean shared-prefix share of the line |\n|---|---|---|\n" +
                  "\n".join(f"| {k} | {v['exact']}/{v['n']} | {v['share']} |" for k, v in lines_res.items()))
    else:
        table2 = ""
    print(table)
    print(table2)
    out = ROOT / "docs" / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    (out / "quality.json").write_text(json.dumps({"rows": rows, "prompts": n, "lines": lines_res, "max_new_tokens": MAX_NEW,
                                                  "texts": texts, "date": time.strftime("%Y-%m-%d %H:%M")}, indent=1))
    (out / "quality.md").write_text(
        f"# Quantisation quality vs speed\n\n{time.strftime('%Y-%m-%d %H:%M')} · model `{args.model}` · {n} prompts "
        f"({n_eval} FIM and prefix-only eval prompts, engine/data/eval_prompts.json; {n - n_eval} cursors in pygls and "
        "lsprotocol code, at the start of a line's code, 1,500 characters before and 300 after) · greedy, {MAX_NEW} new tokens, token healing off, "
        "plain PSM prompts: every engine gets the same token ids, so this table is about the weights alone.\n\n"
        "fp32 is the dequantised GGUF, built by the same builder (its ONNX greedy text equals an independent numpy forward's — tests/test_reference.py). "
        "The GGUF itself is mixed Q5_0/Q6_K/Q4_K/Q8_0, so llama.cpp's text is the quality users get today.\n\n"
        f"Reproduce: `python {' '.join(['scripts/bench_quality.py', *sys.argv[1:]])}`\n\n{table}\n\n"
        "## Prompt layout: PSM vs anchored\n\n"
        f"{args.lines} held-out line completions from the Python standard library (the cursor inside a line after a "
        "non-word character; the truth is the rest of the line; the suffix starts at the next line break), "
        f"default model (`{args.model}`), greedy, token healing on. *psm*: `<prefix> P <suffix> S <middle>`; "
        "*anchored* (Flint's default): the cursor's line goes after the middle token, as if the model had "
        "written it (`<prefix> P[:line start] <suffix> S <middle> line`), so typing appends tokens instead of "
        "re-running the suffix (engine/decoding/prompt.py).\n\n"
        f"{table2}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
