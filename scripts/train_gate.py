#!/usr/bin/env python
"""Train the learned gate (issue 49) from the replay benchmark's records; write engine/data/gate.json.

The records come from the TUNING split only (``bench_replay.py --split tuning --records PATH``; a record of any
other split is refused). Each keystroke with a ghost on screen and the server's features of it is one example;
the functions typed are split by a hash of their names into a training part and a held-out part (``--held-out``
of them), so no function is in both. Two logistic regressions (numpy, L2, Newton steps) learn whether the whole
ghost (``right_all``) and its part before the first doubt (``right_head``) are what the file says next. The
threshold is chosen on the training part: the largest cut in keystrokes typed under a wrong ghost whose
characters saved fall by at most ``--max-saved-loss`` (an estimate that can only lose: a hidden ghost saves
nothing, a part before a doubt saves its own length only where the typist took the whole). The held-out part's
figures go into the model file and the report.

    python scripts/bench_replay.py --split tuning --typists steady,think --records /tmp/h49-rec/records.jsonl \\
        --options cur='{"learnedGate": false}' --out /tmp/h49-rec          # the records (the gate off)
    python scripts/train_gate.py /tmp/h49-rec/records.jsonl                # engine/data/gate.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.policy.gate import DEFAULT_PATH, FORMAT, SHOW_ALL, SHOW_HEAD  # noqa: E402


def load_records(paths: list[Path]) -> list[dict]:
    """The keystrokes with a ghost and the server's features of it (tuning split only: SystemExit otherwise)."""
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("split") != "tuning":
                raise SystemExit(f"{path}: a record of the {rec.get('split')!r} split: the gate learns from tuning only")
            if rec.get("features") and rec.get("same_text", True):
                out.append(rec)
    return out


def held_out(segment: str, share: float) -> bool:
    """Is a function in the held-out part? A fixed hash of its name: the same split on every run."""
    return int(hashlib.sha256(segment.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 30) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularized logistic regression (Newton's method; ``x`` standardized)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) + reg * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w[:-1], float(w[-1])


def matrix(recs: list[dict], names: list[str]) -> np.ndarray:
    return np.array([[float(r["features"].get(n, 0.0)) for n in names] for r in recs], dtype=float)


def outcome(recs: list[dict], p_all: np.ndarray, p_head: np.ndarray, t: float) -> dict:
    """Keystrokes under a wrong ghost and characters saved among these records with the gate at threshold ``t``
    (``t`` 0: every ghost shown, as recorded)."""
    wrong = saved = shown = right = 0
    for r, pa, ph in zip(recs, p_all, p_head, strict=True):
        if pa >= t:
            d = SHOW_ALL
        elif r["head"] and ph >= t:
            d = SHOW_HEAD
        else:
            continue
        shown += 1
        ok = r["right_all"] if d == SHOW_ALL else r["right_head"]
        right += ok
        wrong += not ok
        if d == SHOW_ALL:
            saved += r["saved"]
        elif r["fate"] == "taken" and ok:
            saved += min(r["saved"], r["head"] - 1)
    return {"ghost_keys": shown, "wrong_keys": wrong, "saved_chars": saved,
            "right_share": round(right / shown, 4) if shown else None}


def train(recs: list[dict], share: float, max_saved_loss: float, l2: float) -> tuple[dict, dict]:
    names = sorted({n for r in recs for n in r["features"]})
    train_recs = [r for r in recs if not held_out(r["segment"], share)]
    test_recs = [r for r in recs if held_out(r["segment"], share)]
    if not train_recs or not test_recs:
        raise SystemExit("too few functions in the records for a training and a held-out part")
    x = matrix(train_recs, names)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    y_all = np.array([float(r["right_all"]) for r in train_recs])
    heads = np.array([bool(r["head"]) for r in train_recs])
    y_head = np.array([float(r["right_head"]) for r in train_recs])
    w_all, b_all = fit_logistic(z, y_all, l2)
    w_head, b_head = fit_logistic(z[heads], y_head[heads], l2) if heads.sum() >= 20 else (np.zeros(len(names)), -9.0)

    def probs(rs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        zz = (matrix(rs, names) - mean) / scale
        return 1 / (1 + np.exp(-(zz @ w_all + b_all))), 1 / (1 + np.exp(-(zz @ w_head + b_head)))

    pa, ph = probs(train_recs)
    base = outcome(train_recs, pa, ph, 0.0)
    best_t, best = 0.0, base
    for t in np.arange(0.05, 0.951, 0.01):
        o = outcome(train_recs, pa, ph, float(t))
        if o["saved_chars"] >= (1 - max_saved_loss) * base["saved_chars"] and o["wrong_keys"] < best["wrong_keys"]:
            best_t, best = float(round(t, 2)), o
    ta, th = probs(test_recs)
    summary = {
        "records": len(recs), "functions": len({r["segment"] for r in recs}),
        "train": {"keys": len(train_recs), "functions": len({r["segment"] for r in train_recs}),
                  "before": base, "after": best},
        "held_out": {"keys": len(test_recs), "functions": len({r["segment"] for r in test_recs}),
                     "before": outcome(test_recs, ta, th, 0.0), "after": outcome(test_recs, ta, th, best_t)},
        # the trade-off at other thresholds, on the held-out functions: (threshold, wrong keys, characters saved)
        "held_out_curve": [[t, o["wrong_keys"], o["saved_chars"]] for t in (0.1, 0.2, 0.3, 0.4, 0.5)
                           for o in [outcome(test_recs, ta, th, t)]],
        "typists": sorted({r["typist"] for r in recs}), "right_all_share": round(float(y_all.mean()), 4),
        "user_prior": best["right_share"] or 0.5, "threshold": best_t,
        "cost_ms_p95": _p95([r["cost_ms"] for r in recs if r.get("cost_ms") is not None]),
        "cpu_ms_p95": _p95([r["cpu_ms"] for r in recs if r.get("cpu_ms") is not None]),
        "date": time.strftime("%Y-%m-%d"), "max_saved_loss": max_saved_loss, "l2": l2, "held_out_share": share,
    }
    model = {"format": FORMAT, "features": names, "mean": mean.round(6).tolist(), "scale": scale.round(6).tolist(),
             "heads": {SHOW_ALL: {"w": w_all.round(6).tolist(), "b": round(b_all, 6)},
                       SHOW_HEAD: {"w": w_head.round(6).tolist(), "b": round(b_head, 6)}},
             "threshold": best_t, "trained": summary}
    return model, summary


def _p95(values: list[float]) -> float | None:
    return round(float(np.percentile(values, 95)), 4) if values else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("    python "):],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", nargs="+", type=Path, help="bench_replay --records files (tuning split)")
    p.add_argument("--out", type=Path, default=DEFAULT_PATH, help="the model file (default: the package's)")
    p.add_argument("--held-out", type=float, default=0.3, help="share of the functions held out (default 0.3)")
    p.add_argument("--max-saved-loss", type=float, default=0.02,
                   help="characters saved may fall by at most this share on the training part (default 0.02)")
    p.add_argument("--l2", type=float, default=1.0)
    args = p.parse_args()
    recs = load_records(args.records)
    model, summary = train(recs, args.held_out, args.max_saved_loss, args.l2)
    summary["command"] = "python scripts/train_gate.py " + " ".join(str(x) for x in args.records)
    args.out.write_text(json.dumps(model, indent=None, separators=(",", ":")) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
