#!/usr/bin/env python
"""Train the learned gate (issue 49) from the replay benchmark's records; write engine/data/gate.json.

The records come from the TUNING and TRAIN splits only (``bench_replay.py --split tuning|train --records PATH``;
replay_train_split.py holds the further packages; a record of validation or test is refused). Each keystroke with
a ghost on screen and the server's features of it is one example.
Two logistic regressions (numpy, L2, Newton steps) learn whether the whole ghost is right (``right_all``: what the
file says next; or, with ``--label taken``, whether the typist took it) and whether its part before the first
doubt is (``right_head``); with ``--trees`` the whole's head is boosted shallow trees instead (gate_trees.py).
The functions are split by a hash of their names into ``--folds`` folds: every
record is scored by the model fitted on the other folds (out of fold, so no function judges a model that saw
it), and the threshold is chosen on those scores: the largest cut in keystrokes typed under a wrong ghost whose
characters saved fall by at most ``--max-saved-loss`` (an estimate that can only lose: a hidden ghost saves
nothing, a part before a doubt saves its own length only where the typist took the whole, and a take comes later
when a ghost of the suggestion it took was hidden within the typist's reaction time before it: ``link_chains``).
``--label chain`` with ``--take-weight`` learns the ghosts of taken suggestions as right and weighs them by what
the take saved. The shipped model is fitted on every record; the out-of-fold figures go into the model file and
the report.

    python scripts/gate_records.py --out DIR          # the records: every language's train split, the gate off
    python scripts/train_gate.py DIR/*.jsonl --no-head --label chain --take-weight 0.25 --max-saved-loss 0.005 \
        --trees 100 --depth 3 --rate 0.05 --pause-weight 8 --max-pause-loss 0.03     # engine/data/gate.json
    python scripts/train_gate.py DIR/*.jsonl --evaluate engine/data/gate.json   # a model on records it never saw
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.policy.gate import DEFAULT_PATH, FORMAT, SHOW_ALL, SHOW_HEAD, SHOW_NONE, decide  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from gate_trees import fit_trees  # noqa: E402
from gate_trees import predict as predict_trees  # noqa: E402
from replay_stats import PAUSE_S  # noqa: E402  (the replay's pause: a keystroke's gap_s this long or more)
from replay_train_split import LEARNS_FROM  # noqa: E402

REACTION_S = 0.3  # the replay typist's: a suggestion is taken once readable this long (replay_typist.Typist)


def load_records(paths: list[Path]) -> list[dict]:
    """The keystrokes with a ghost and the server's features of it (tuning and train splits only: SystemExit
    otherwise), each linked to its chain (``link_chains``, over every keystroke of its file in the order typed)."""
    out = []
    for n, path in enumerate(paths):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for rec in rows:
            if rec.get("split") not in LEARNS_FROM:
                raise SystemExit(f"{path}: a record of the {rec.get('split')!r} split: the gate learns from tuning "
                                 "and train only")
        link_chains(rows, f"{n}:")
        out += [r for r in rows if r.get("features") and r.get("same_text", True)]
    return out


def link_chains(rows: list[dict], tag: str = "") -> None:
    """Mark each keystroke of ``rows`` (one replay's records in the order typed) with its chain: the keystrokes
    one suggestion stayed on screen through while the typist typed its next characters, up to the take that
    ends it. Sets ``chain`` (an id), ``chain_saved`` (the characters that take saved; 0: no take), ``t`` (s since
    the function's first keystroke) and ``key_s`` (the typist's usual interval in that function).

    The typist takes a suggestion only once it has been readable for its reaction time; the suggestion it took
    was on screen from its chain's first keystroke on. Hiding any of the chain's ghosts restarts that clock, so
    the take comes later or not at all: what ``outcome`` charges a gate beyond the take's own keystroke."""
    runs: dict[tuple, list[dict]] = {}
    for r in rows:
        runs.setdefault((r.get("server"), r.get("typist"), r.get("round"), r.get("seed"), r.get("segment")), []).append(r)
    chain = 0
    for run in runs.values():
        gaps = sorted(r["gap_s"] for r in run if r.get("kind") == "char" and (r.get("gap_s") or 0) > 0
                      and r["gap_s"] < 0.5)
        key_s = gaps[len(gaps) // 2] if gaps else 0.125
        t, members, last = 0.0, [], None
        for r in run:
            r["t"], r["key_s"] = t, key_s
            t += r.get("gap_s") or 0.0
            if r.get("fate") is None:  # nothing on screen: no chain goes on
                members, last = [], None
                continue
            if not (members and last == "through"):
                chain, members = chain + 1, []
            r["chain"], r["chain_saved"] = f"{tag}{chain}", 0
            members.append(r)
            if r["fate"] == "taken":
                for m in members:
                    m["chain_saved"] = r["saved"]
                members = []
            last = r["fate"]


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 30, weight: np.ndarray | None = None
                 ) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularized logistic regression (Newton's method; ``x`` standardized), each
    example counted ``weight`` times (default once)."""
    n, d = x.shape
    c = np.ones(n) if weight is None else weight
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (c * (p - y)) + reg * w
        hess = (xb * (c * p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w[:-1], float(w[-1])


def matrix(recs: list[dict], names: list[str]) -> np.ndarray:
    return np.array([[float(r["features"].get(n, 0.0)) for n in names] for r in recs], dtype=float)


def outcome(recs: list[dict], p_all: np.ndarray, p_head: np.ndarray, t: float, reaction_s: float = REACTION_S
            ) -> dict:
    """Keystrokes under a wrong ghost and characters saved among these records with the gate at threshold ``t``
    (``t`` 0: every ghost shown, as recorded). A take whose chain (``link_chains``) had a ghost hidden less than
    ``reaction_s`` before it comes that many of the typist's keystrokes later, each one character fewer saved
    (``saved_upper``: without that delay, the estimate before). It decides as the server does (``gate.decide``:
    never hidden at a line's indentation) and counts the keystrokes a typist paused after (``pause_keys``) and
    those whose ghost it hid (``pauses_hidden``): the replay's "pauses shown" loses each of them."""
    wrong = saved = upper = shown = right = kept = pauses = pauses_hidden = 0
    hidden_at: dict[str, float] = {}  # per chain, when its last hidden ghost's keystroke was typed
    for r, pa, ph in zip(recs, p_all, p_head, strict=True):
        # the server's own rule (gate.decide: never hidden at a line's indentation); t 0: everything shown
        d = decide({SHOW_ALL: _logit(pa), SHOW_HEAD: _logit(ph)}, t, has_head=bool(r["head"]),
                   mid_line=bool(r["features"].get("mid_line", 1.0)))
        pause = is_pause(r)
        pauses += pause
        if d == SHOW_NONE:
            pauses_hidden += pause
            if "chain" in r:
                hidden_at[r["chain"]] = r["t"]
            continue
        shown += 1
        ok = r["right_all"] if d == SHOW_ALL else r["right_head"]
        right += ok
        wrong += not ok
        kept += r["fate"] in ("taken", "through")
        if d == SHOW_ALL:
            upper += r["saved"]
            late = 0
            if r["saved"] and r.get("chain") in hidden_at:
                since = r["t"] - hidden_at[r["chain"]]  # shown again from the answer to that keystroke
                late = math.ceil((reaction_s - since) / r["key_s"]) if since < reaction_s else 0
            saved += max(0, r["saved"] - late)
        elif r["fate"] == "taken" and ok:
            upper += min(r["saved"], r["head"] - 1)
            saved += min(r["saved"], r["head"] - 1)
    return {"ghost_keys": shown, "wrong_keys": wrong, "saved_chars": saved, "saved_upper": upper,
            # keystrokes the typist paused after with a ghost ready, and those the gate hid (a pause shown lost)
            "pause_keys": pauses, "pauses_hidden": pauses_hidden,
            "right_share": round(right / shown, 4) if shown else None,
            # the user's "right" outcomes as the server counts them (lsp_server/gate_user.py: taken, or its next
            # character typed): the per-user adjustment's prior must be this share, not right_share
            "kept_share": round(kept / shown, 4) if shown else None}


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


def is_pause(rec: dict) -> bool:
    """Whether the typist paused after this keystroke (as the replay counts pauses shown; no next key: the end)."""
    return "gap_s" in rec and (rec["gap_s"] is None or rec["gap_s"] >= PAUSE_S)


LABELS = {  # what the whole-suggestion head learns
    "right": lambda r: r["right_all"],  # the ghost (or its first line) is what the file says next
    "taken": lambda r: r["fate"] == "taken",  # the typist took it: characters saved come only from these
    # right, or on screen in a chain the typist took (hiding it delays the take: link_chains)
    "chain": lambda r: r["right_all"] or r.get("chain_saved", 0) > 0,
}


def language_of(rec: dict) -> str:
    """A record's language group, from its one-hot features (``lang_*``)."""
    return next((n[5:] for n, v in rec["features"].items() if n.startswith("lang_") and v), "other")


def only_key(segment: str) -> str:
    """bench_replay's ``--only`` key (package:module:qualname) of a record's segment (package==version/module:qualname)."""
    package, rest = segment.split("==", 1)
    return package + ":" + rest.split("/", 1)[1]


def fold_of(segment: str, k: int) -> int:
    """A function's fold: a fixed hash of its name, so every seed and typist of one function share a fold."""
    return int(hashlib.sha256(segment.encode()).hexdigest()[:8], 16) % k


def fit(recs: list[dict], names: list[str], l2: float, label: str, head: bool = True, take_weight: float = 0.0,
        trees: dict | None = None, pause_weight: float = 0.0) -> dict:
    """Standardization and both heads' weights, fitted on ``recs`` (``head`` False: the part before a doubt is
    never shown alone, its head says so). ``take_weight``: a ghost in a chain the typist took counts
    1 + take_weight × the characters that take saved (hiding it costs them, hiding a wrong one saves one key).
    ``pause_weight``: a ghost the typist paused at is also a "show" example of that weight (hiding it loses a pause
    shown, right or wrong; the features see what the typist just typed, where pauses come, not the pause)."""
    x = matrix(recs, names)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    y_all = np.array([float(LABELS[label](r)) for r in recs])
    heads = np.array([bool(r["head"]) for r in recs])
    y_head = np.array([float(r["right_head"]) for r in recs])
    weight = np.array([1.0 + take_weight * r.get("chain_saved", 0) for r in recs])
    pause = np.array([is_pause(r) for r in recs]) if pause_weight else np.zeros(len(recs), dtype=bool)
    weight = weight + pause_weight * (pause & (y_all == 1))
    extra = pause & (y_all == 0)  # a wrong ghost at a pause: hiding it saves a key and loses the pause
    z_fit, y_fit = np.vstack([z, z[extra]]), np.concatenate([y_all, np.ones(int(extra.sum()))])
    w_fit = np.concatenate([weight, np.full(int(extra.sum()), pause_weight)])
    if trees:  # boosted shallow trees (gate_trees.fit_trees's options) in place of the whole's regression
        w_all, b_all, t_all = np.zeros(len(names)), 0.0, fit_trees(z_fit, y_fit, w_fit, **trees)
    else:
        (w_all, b_all), t_all = fit_logistic(z_fit, y_fit, l2, weight=w_fit), []
    w_head, b_head = fit_logistic(z[heads], y_head[heads], l2) if head and heads.sum() >= 20 \
        else (np.zeros(len(names)), -30.0)
    return {"mean": mean, "scale": scale, "all": (w_all, b_all), "head": (w_head, b_head), "trees": t_all}


def probs(m: dict, recs: list[dict], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    zz = (matrix(recs, names) - m["mean"]) / m["scale"]
    (wa, ba), (wh, bh) = m["all"], m["head"]
    za = zz @ wa + ba + predict_trees(m.get("trees") or [], zz)
    return 1 / (1 + np.exp(-za)), 1 / (1 + np.exp(-(zz @ wh + bh)))


def out_of_fold(recs: list[dict], names: list[str], k: int, l2: float, label: str, head: bool = True,
                take_weight: float = 0.0, trees: dict | None = None, pause_weight: float = 0.0
                ) -> tuple[np.ndarray, np.ndarray]:
    """Each record's probabilities from the model fitted on the other folds' functions (never its own)."""
    fold = np.array([fold_of(r["segment"], k) for r in recs])
    pa, ph = np.zeros(len(recs)), np.zeros(len(recs))
    if len(set(fold.tolist())) < 2:
        raise SystemExit(f"too few functions in the records for {k} folds")
    for f in sorted(set(fold.tolist())):
        inside, outside = np.where(fold != f)[0], np.where(fold == f)[0]
        m = fit([recs[i] for i in inside], names, l2, label, head, take_weight, trees, pause_weight)
        pa[outside], ph[outside] = probs(m, [recs[i] for i in outside], names)
    return pa, ph


def train(recs: list[dict], folds: int, max_saved_loss: float, l2: float, label: str = "right", head: bool = True,
          take_weight: float = 0.0, trees: dict | None = None, max_pause_loss: float = 1.0,
          pause_weight: float = 0.0) -> tuple[dict, dict]:
    """The model fitted on every record; its threshold and every figure reported from out-of-fold probabilities
    (each function scored by a model that never saw it): the threshold is the one that cuts the most
    wrong-ghost keystrokes while the estimated characters saved fall by at most ``max_saved_loss`` and at most
    ``max_pause_loss`` of the ghosts a typist paused at are hidden."""
    names = sorted({n for r in recs for n in r["features"]})
    pa, ph = out_of_fold(recs, names, folds, l2, label, head, take_weight, trees, pause_weight)
    base = outcome(recs, pa, ph, 0.0)
    best_t, best = 0.0, base
    for t in np.arange(0.01, 0.951, 0.005):
        o = outcome(recs, pa, ph, float(t))
        if o["saved_chars"] >= (1 - max_saved_loss) * base["saved_chars"] and o["wrong_keys"] < best["wrong_keys"] \
                and o["pauses_hidden"] <= max_pause_loss * base["pause_keys"]:
            best_t, best = float(round(t, 3)), o
    m = fit(recs, names, l2, label, head, take_weight, trees, pause_weight)
    right = np.array([float(r["right_all"]) for r in recs])
    by_language = per_language(recs, pa, ph, best_t)  # out of fold, at the chosen threshold
    summary = {
        "records": len(recs), "functions": len({r["segment"] for r in recs}), "folds": folds, "label": label, "head": head,
        "take_weight": take_weight, "trees": trees or None,
        "seeds": sorted({r.get("seed") for r in recs if r.get("seed") is not None}),
        "out_of_fold": {"before": base, "after": best}, "by_language": by_language,
        # the trade-off at other thresholds, out of fold: (threshold, wrong keys, characters saved)
        "curve": [[round(float(t), 3), o["wrong_keys"], o["saved_chars"]]
                  for t in np.arange(0.02, 0.61, 0.02) for o in [outcome(recs, pa, ph, float(t))]],
        "typists": sorted({r["typist"] for r in recs}), "right_all_share": round(float(right.mean()), 4),
        "user_prior": best["kept_share"] or 0.5, "threshold": best_t,
        "cost_ms_p95": _p95([r["cost_ms"] for r in recs if r.get("cost_ms") is not None]),
        "cpu_ms_p95": _p95([r["cpu_ms"] for r in recs if r.get("cpu_ms") is not None]),
        "date": time.strftime("%Y-%m-%d"), "max_saved_loss": max_saved_loss, "max_pause_loss": max_pause_loss,
        "pause_weight": pause_weight,
        "l2": l2,
    }
    (w_all, b_all), (w_head, b_head) = m["all"], m["head"]
    model = {"format": FORMAT, "features": names, "mean": m["mean"].round(6).tolist(),
             "scale": m["scale"].round(6).tolist(),
             "heads": {SHOW_ALL: {"w": w_all.round(6).tolist(), "b": round(b_all, 6),
                                  "trees": [[[round(v, 6) for v in node] for node in t] for t in m["trees"]]},
                       SHOW_HEAD: {"w": w_head.round(6).tolist(), "b": round(b_head, 6)}},
             "threshold": best_t, "trained": summary}
    return model, summary


def per_language(recs: list[dict], pa: np.ndarray, ph: np.ndarray, t: float) -> dict:
    """Each language's own records: every ghost shown, and the gate at threshold ``t``."""
    langs = [language_of(r) for r in recs]
    out = {}
    for lang in sorted(set(langs)):
        i = np.array([x == lang for x in langs])
        part = [r for r, keep in zip(recs, i, strict=True) if keep]
        out[lang] = {"records": len(part), "functions": len({r["segment"] for r in part}),
                     "before": outcome(part, pa[i], ph[i], 0.0), "after": outcome(part, pa[i], ph[i], t)}
    return out


def evaluate(model: dict, recs: list[dict]) -> dict:
    """A model file's figures on ``recs`` it may never have seen (records of other functions or another commit):
    every ghost shown against the model at its own threshold, in all and per language."""
    heads = model["heads"]
    m = {"mean": np.array(model["mean"]), "scale": np.array(model["scale"]),
         "all": (np.array(heads[SHOW_ALL]["w"]), heads[SHOW_ALL]["b"]),
         "head": (np.array(heads[SHOW_HEAD]["w"]), heads[SHOW_HEAD]["b"]),
         "trees": heads[SHOW_ALL].get("trees", [])}
    pa, ph = probs(m, recs, model["features"])
    t = model["threshold"]
    by_language = per_language(recs, pa, ph, t)
    unknown = sorted({n for r in recs for n in r["features"]} - set(model["features"]))
    return {"records": len(recs), "functions": len({r["segment"] for r in recs}), "threshold": t,
            "before": outcome(recs, pa, ph, 0.0), "after": outcome(recs, pa, ph, t), "by_language": by_language,
            "features_the_model_lacks": unknown}


def _p95(values: list[float]) -> float | None:
    return round(float(np.percentile(values, 95)), 4) if values else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__[__doc__.index("    python "):],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records", nargs="+", type=Path, help="bench_replay --records files (tuning or train split)")
    p.add_argument("--out", type=Path, default=DEFAULT_PATH, help="the model file (default: the package's)")
    p.add_argument("--folds", type=int, default=5, help="folds of functions for the out-of-fold figures (default 5)")
    p.add_argument("--max-saved-loss", type=float, default=0.02,
                   help="characters saved (out of fold) may fall by at most this share (default 0.02)")
    p.add_argument("--max-pause-loss", type=float, default=1.0,
                   help="at most this share of the ghosts a typist paused at may be hidden (out of fold; default 1: "
                        "no bound)")
    p.add_argument("--pause-weight", type=float, default=0.0,
                   help="a ghost the typist paused at is also a 'show' example of this weight (default 0)")
    p.add_argument("--l2", type=float, default=10.0)
    p.add_argument("--hold", default="", metavar="FOLDS",
                   help="comma-separated folds whose functions are left out of training altogether, for a replay "
                        "A/B of the gate on tuning functions it never saw (their bench_replay --only list is printed)")
    p.add_argument("--no-head", action="store_true",
                   help="show a suggestion whole or not at all (never only its part before the first doubt)")
    p.add_argument("--label", choices=sorted(LABELS), default="right",
                   help="what the whole suggestion's head learns: right (what the file says next) or taken")
    p.add_argument("--take-weight", type=float, default=0.0,
                   help="a ghost in a chain the typist took weighs 1 + this x the characters the take saved")
    p.add_argument("--trees", type=int, default=0, metavar="ROUNDS",
                   help="the whole suggestion's head as ROUNDS boosted shallow trees (scripts/gate_trees.py) instead of "
                        "a logistic regression (default 0: the regression)")
    p.add_argument("--depth", type=int, default=3, help="the trees' depth (default 3)")
    p.add_argument("--rate", type=float, default=0.05, help="the trees' learning rate (default 0.05)")
    p.add_argument("--evaluate", type=Path, default=None, metavar="MODEL",
                   help="write nothing: MODEL's figures on the records at its own threshold (records it never saw)")
    args = p.parse_args()
    recs = load_records(args.records)
    if args.evaluate is not None:
        print(json.dumps(evaluate(json.loads(args.evaluate.read_text()), recs), indent=1))
        return 0
    hold = {int(x) for x in args.hold.split(",") if x}
    if hold:
        held = sorted({r["segment"] for r in recs if fold_of(r["segment"], args.folds) in hold})
        recs = [r for r in recs if fold_of(r["segment"], args.folds) not in hold]
        print(f"held out ({len(held)} functions): --only {','.join(map(only_key, held))}", file=sys.stderr)
    trees = dict(rounds=args.trees, depth=args.depth, lr=args.rate) if args.trees else None
    model, summary = train(recs, args.folds, args.max_saved_loss, args.l2, args.label, not args.no_head,
                           args.take_weight, trees, args.max_pause_loss, args.pause_weight)
    summary["command"] = "python scripts/train_gate.py " + " ".join(sys.argv[1:])
    args.out.write_text(json.dumps(model, indent=None, separators=(",", ":")) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
