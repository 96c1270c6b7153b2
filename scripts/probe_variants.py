#!/usr/bin/env python3
"""How long an explicit request's variants (n=3) take at a warm spot, and how they end: a quick probe of the
engine alone (no server), to compare source trees one after the other (run it once per tree with
``PYTHONPATH=<tree>``; the full comparison through `flint serve` is scripts/bench_served.py).

    flock -x /tmp/flint-heavy.lock env PYTHONPATH=. FLINT_CACHE_DIR=$(mktemp -d) \\
        python scripts/probe_variants.py --lines 4 --blocks 4 [--auto-budget] [--json out.json]

Spots: bench_served's (held-out pinned PyPI packages, same seed). Each spot is prefilled first (n=1, one
token: the user looked at it), then asked as the server asks an explicit request: n=3, the planner's block
or line parameters, a 6 s deadline from the start of the call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_served import draw_spots, fetch_sources  # noqa: E402

from engine.config import EngineConfig  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.text.budget import decide_mode  # noqa: E402
from engine.text.statements import split_cursor  # noqa: E402
from engine.types import GenParams  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=4)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--max-prefix-chars", type=int, default=1500)
    p.add_argument("--auto-budget", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        spots = draw_spots(fetch_sources(Path(d)), args.lines, args.blocks, args.seed)
    eng = Engine.load(config=EngineConfig(max_prefix_chars=args.max_prefix_chars))
    rows = []
    for s in spots:
        lp, ls = split_cursor(s.prefix, s.suffix)
        mode = decide_mode(lp, ls)
        max_tokens, max_lines = (48, 1) if mode == "single" else (24 * 9, 9)  # planner.gen_params, invoked
        eng.complete(s.prefix, s.suffix, GenParams(max_tokens=1))
        t0 = time.monotonic()
        params = GenParams(max_tokens=max_tokens, max_lines=max_lines, n=3, deadline=t0 + 6.0,
                           auto_budget=args.auto_budget) if "auto_budget" in GenParams.__dataclass_fields__ \
            else GenParams(max_tokens=max_tokens, max_lines=max_lines, n=3, deadline=t0 + 6.0)
        comps, t = eng.complete(s.prefix, s.suffix, params)
        ms = (time.monotonic() - t0) * 1000
        rows.append({"spot": s.name, "kind": s.kind, "ms": round(ms), "finish": [c.finish_reason for c in comps],
                     "tokens": [len(c.token_ids) for c in comps], "texts": [c.text for c in comps]})
        print(f"{s.kind:5} {ms:7.0f} ms  {[c.finish_reason for c in comps]}  {[len(c.token_ids) for c in comps]}  "
              f"{s.name}", flush=True)
    ms = [r["ms"] for r in rows]
    print(f"median {statistics.median(ms):.0f} ms, max {max(ms)} ms, "
          f"deadline-ended {sum('deadline' in r['finish'] for r in rows)}/{len(rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
