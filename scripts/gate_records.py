"""The learned gate's training records in one command (issue 49): every language's TRAIN split (and, with
``--splits train,tuning``, its tuning half) typed by the replay typist into one commit's server with the gate off,
one records file per (split, language, typist), then ``train_gate.py`` on the folder.

    python scripts/gate_records.py --main HEAD --out ~/.cache/flint-bench/gate-records           # gather
    python scripts/train_gate.py ~/.cache/flint-bench/gate-records/*.jsonl --no-head --label chain \\
        --take-weight 0.25 --max-saved-loss 0.005 --trees 100 --depth 3 --rate 0.05 \\
        --pause-weight 8 --max-pause-loss 0.03                                                 # engine/data/gate.json

Validation and test never train the gate (bench_replay refuses ``--records`` there). A run takes long (Python's
train split ~40 minutes of 2 AVX2 cores per typist and seed, each other language 10-15) and sessions end without
warning: a file lands under its final name only when its run ended, so the same call again runs only what is
missing. Each run's replay report (characters saved, wrong ghosts, CPU) stays beside it in ``OUT/reports/``. The
records name the server's commit; train_gate.py refuses records of validation or test."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_test_table import LANGUAGES, ROOT, arm_tree  # noqa: E402
from replay_train_split import LEARNS_FROM  # noqa: E402

GATE_OFF = json.dumps({"learnedGate": False})  # every ghost shown: each one's fate is observed


def records_name(split: str, lang: str, typist: str, seed: int) -> str:
    return f"records-{split}-{lang}-{typist}-s{seed}.jsonl"


def plan(out: Path, splits: list[str], languages: list[str], typists: list[str], seeds: list[int]) -> list[tuple]:
    """The (split, language, typist, seed) runs whose records file is not in ``out`` yet, in the order run."""
    bad = [s for s in splits if s not in LEARNS_FROM]
    if bad:
        raise SystemExit(f"the gate learns from {' and '.join(LEARNS_FROM)} only, not {', '.join(bad)}")
    return [(sp, lang, typist, seed) for sp in splits for lang in languages for typist in typists for seed in seeds
            if not (out / records_name(sp, lang, typist, seed)).is_file()]


def command(split: str, lang: str, typist: str, seed: int, tree: Path, records: Path, work: Path) -> list[str]:
    """bench_replay's command for one run: one server (``tree``, the gate off), one typist, one round."""
    return [sys.executable, str(ROOT / "scripts" / "bench_replay.py"), "--language", lang, "--split", split,
            "--typists", typist, "--rounds", "1", "--seed", str(seed), "--server", f"main={tree}",
            "--options", f"main={GATE_OFF}", "--records", str(records), "--out", str(work)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--main", default="HEAD", help="the commit whose server types (default HEAD)")
    p.add_argument("--out", default=str(Path.home() / ".cache" / "flint-bench" / "gate-records"))
    p.add_argument("--splits", default="train", help="comma-separated: train, tuning (default train)")
    p.add_argument("--languages", default=",".join(LANGUAGES))
    p.add_argument("--typists", default="think", help="comma-separated (default think)")
    p.add_argument("--seeds", default="0", help="comma-separated timing seeds (default 0)")
    p.add_argument("--trees", default="", help="where the commit's tree is made (default a temporary folder)")
    p.add_argument("--dry-run", action="store_true", help="print the runs still missing and stop")
    args = p.parse_args(argv)
    out = Path(args.out).expanduser()
    todo = plan(out, args.splits.split(","), args.languages.split(","), args.typists.split(","),
                [int(s) for s in args.seeds.split(",")])
    for run in todo:
        print("missing:", records_name(*run), flush=True)
    if args.dry_run or not todo:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flint-gate-records-") as tmp:
        tree = arm_tree(args.main, Path(args.trees) if args.trees else Path(tmp))
        for split, lang, typist, seed in todo:
            name = records_name(split, lang, typist, seed)
            partial = out / f".{name}.partial"
            partial.unlink(missing_ok=True)
            cmd = command(split, lang, typist, seed, tree, partial, out / "reports" / name.removesuffix(".jsonl"))
            print("running:", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT)
            partial.rename(out / name)  # complete: the next call skips it
    return 0


if __name__ == "__main__":
    sys.exit(main())
