"""The held-out table of one kind of machine, cell by cell (issue 47): which (language, typist) cells of
``docs/benchmarks/replay_test/KIND/`` are measured at a given main beside the baseline, running the ones still
missing (one ``bench_replay.py --split test`` run per cell, three seeds, each ledgered by bench_replay), and the
README rows of every cell measured at that main.

    python scripts/replay_test_table.py --main 214eddf                        # measured and missing cells
    python scripts/replay_test_table.py --main 214eddf --run --purpose "..."  # run the missing cells, one by one
    python scripts/replay_test_table.py --main 214eddf --rows                 # README rows and "From" paths

Sessions end without warning and a table takes longer than one (Python's cell ~80 minutes of 2 AVX2 cores, the
other languages' 13-17): each cell lands in the folder as its run ends, so the next call on the same kind of
machine runs only what is still missing. A cell's older report (another main) moves to the archive, whose
index (archive/README.md) still needs its line by hand; then ``python scripts/replay_readme.py`` writes README's
sections from the reports (rows, where each was measured, verdicts against the targets). The kind is guessed from /proc/cpuinfo (``--kind``)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_meta import cpu_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "docs" / "benchmarks" / "replay_test"
ARCHIVE = ROOT / "docs" / "benchmarks" / "archive"
BASE = "1944788"  # issue 32's baseline: every held-out table's other arm
LANGUAGES = ("python", "javascript", "typescript", "go", "rust")
TYPISTS = ("think", "steady", "open")
ROUNDS = 3
NAMES = {"python": "Python", "javascript": "JavaScript", "typescript": "TypeScript", "go": "Go", "rust": "Rust"}
TYPIST_LABEL = {"think": "think (pauses)", "steady": "steady (8 chars/s)", "open": "open (file just opened)"}


def machine_kind(info: dict) -> str:
    """The folder under replay_test/ for a CPU (bench_meta.cpu_info): the kinds of machine the tables are kept for,
    else a name of its own (a new kind gets a new folder, never another kind's)."""
    avx512 = any(f.startswith("avx512") for f in info["flags"])
    amd, family = "AMD" in info["model"], str(info["family"])
    if amd and not avx512:
        return "avx2"  # the AVX2-only EPYC (Zen 3)
    if amd and family == "26":
        return "zen5"
    if amd and family == "25":
        return ""  # the first table's machine (Zen 4 cores with AVX-512 VNNI): replay_test/ itself
    if "Intel" in info["model"] and avx512:
        return "xeon"
    return f"cpu-{family}-{info['model_number']}"


def cells_of(data: dict) -> dict[tuple[str, str], dict[str, str]]:
    """The (language, typist) cells a test-split report holds whole: both arms, ``main`` and ``base``, with
    ROUNDS rounds or more each -> the arms' commits (12 hex digits, as bench_replay records them)."""
    meta = data.get("meta", {})
    servers = meta.get("servers", {})
    if set(servers) != {"main", "base"} or meta.get("splits") != ["test"]:
        return {}
    rounds: dict[tuple[str, str], set[int]] = {}
    for r in data.get("runs", []):
        if r.get("split") == "test":
            rounds.setdefault((r["typist"], r["server"]), set()).add(r["round"])
    commits = {name: s.get("commit", "?") for name, s in servers.items()}
    return {(meta["language"], t): commits for t in {t for t, _ in rounds}
            if all(len(rounds.get((t, arm), ())) >= ROUNDS for arm in ("main", "base"))}


def same_commit(recorded: str, wanted: str) -> bool:
    """A recorded commit (12 digits, or "?") is the wanted one (any unambiguous abbreviation, or a full hash)."""
    return recorded != "?" and len(wanted) >= 7 and (recorded.startswith(wanted) or wanted.startswith(recorded))


def table(folder: Path) -> dict[tuple[str, str], tuple[Path, dict[str, str]]]:
    """Every cell the reports of ``folder`` hold -> (report, the arms' commits)."""
    found = {}
    for path in sorted(folder.glob("*.json")):
        for cell, commits in cells_of(json.loads(path.read_text())).items():
            found[cell] = (path, commits)
    return found


def missing(found: dict, main: str, base: str, languages=LANGUAGES, typists=TYPISTS) -> list[tuple[str, str]]:
    """The cells not measured at ``main`` beside ``base``, in the order they should run (a language's typists
    together: one corpus fetch, and a table whose rows fill language by language)."""
    out = []
    for lang in languages:
        for t in typists:
            have = found.get((lang, t))
            if have is None or not (same_commit(have[1]["main"], main) and same_commit(have[1]["base"], base)):
                out.append((lang, t))
    return out


def filed(report_md: str, name: str) -> str:
    """bench_replay's report, renamed: its line naming the raw numbers names the file they are in now."""
    return report_md.replace("are in `replay.json`.", f"are in `{name}.json`.")


def recorded_kind(meta: dict) -> str | None:
    """The kind of machine a report was measured on, from the CPU bench_replay recorded (``meta["cpu"]``:
    bench_meta.cpu_line's "MODEL (family F model M; flags), N cores"); None where it is not recorded."""
    m = re.match(r"(.*) \(family (\S+) model (\S+); ([^)]*)\)", meta.get("cpu", ""))
    if m is None:
        return None  # the line's flags, not meta["cpu_flags"]: older reports have the line only
    flags = [] if m.group(4) == "no avx2" else m.group(4).split()  # cpu_line's word for no flags
    kind = machine_kind({"model": m.group(1), "family": m.group(2), "model_number": m.group(3), "flags": flags})
    return kind or "zen4"


def archived_stem(folder: Path, report: Path, main: str) -> str:
    """The archive's name for a report leaving ``folder``'s table (as archive/ names them:
    replay_test.KIND-REPORT-MAIN): KIND is the machine the report says it was measured on (the first table,
    replay_test/ itself, holds rows of the Zen 4 EPYC and of the Intel Xeon), else the folder's (replay_test/
    itself: the Zen 4 one)."""
    try:
        kind = recorded_kind(json.loads(report.read_text()).get("meta", {}))
    except (OSError, ValueError):
        kind = None
    if kind is None:
        kind = "zen4" if folder.resolve() == TEST.resolve() else folder.name
    return f"replay_test.{kind}-{report.stem}-{main[:7]}"


def arm_tree(commit: str, root: Path) -> Path:
    """``git archive`` of ``commit`` into ``root``/arm-COMMIT with a COMMIT file (bench_replay records it)."""
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    tree = root / f"arm-{full[:7]}"
    if (tree / "COMMIT").is_file() and (tree / "COMMIT").read_text().strip() == full:
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", full], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    (tree / "COMMIT").write_text(full + "\n")
    return tree


def run_cell(lang: str, typist: str, trees: dict[str, Path], folder: Path, purpose: str, work: Path,
             found: dict) -> Path:
    """One cell: bench_replay on the test split, its report filed as ``folder``/LANG-TYPIST.{json,md}."""
    out = work / f"{lang}-{typist}"
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_replay.py"), "--language", lang, "--split", "test",
           "--typists", typist, "--rounds", str(ROUNDS), "--server", f"base={trees['base']}",
           "--server", f"main={trees['main']}", "--purpose", purpose, "--out", str(out)]
    print("running:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    data = json.loads((out / "replay.json").read_text())
    if (lang, typist) not in cells_of(data):
        raise SystemExit(f"{out}/replay.json does not hold {lang} {typist} whole: not filed")
    name = f"{lang}-{typist}"
    old = found.get((lang, typist))
    if old is not None:  # the cell's older report leaves the table (a report of several cells: all of it)
        stem = archived_stem(folder, old[0], old[1]["main"])
        for ext in (".json", ".md"):
            src = old[0].with_suffix(ext)
            if src.exists():
                shutil.move(str(src), ARCHIVE / f"{stem}{ext}")
        print(f"archived {old[0].name} as {stem}: add its line to {ARCHIVE / 'README.md'}; the other cells it "
              "held are missing again; README: python scripts/replay_readme.py", flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text((out / "replay.json").read_text())
    (folder / f"{name}.md").write_text(filed((out / "replay.md").read_text(), name))
    return folder / f"{name}.json"


def readme_rows(folder: Path, main: str | None = None) -> tuple[list[str], list[str]]:
    """README's held-out rows (mean ± sd over the seeds, replay_stats.seed_row) of the cells measured at
    ``main`` (None: every cell on file, whatever its main: the table as it stands), and the reports they come
    from (paths as README names them)."""
    import replay_stats as stats

    rows, sources = [], []
    paths = sorted({p for p, c in table(folder).values() if main is None or same_commit(c["main"], main)})
    by_cell = {}
    for path in paths:
        data = json.loads(path.read_text())
        sums, _ = stats.common_summaries(data, "test")
        for s in sums:
            by_cell[(data["meta"]["language"], s["typist"], s["server"])] = stats.seed_row(s)
        sources.append(path.relative_to(ROOT).as_posix())
    for lang in LANGUAGES:
        first = True
        for t in TYPISTS:
            for arm in ("main", "base"):
                row = by_cell.get((lang, t, arm))
                if row is None:
                    continue
                head = NAMES[lang] if first else ""
                first = False
                label = TYPIST_LABEL[t] if arm == "main" else ""
                rows.append(f"| {head} | {label} | {arm} | " + " | ".join(row.values()) + " |")
    return rows, sources


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--main", required=True, help="the commit the table is measured at")
    p.add_argument("--base", default=BASE, help="the baseline's commit (default: issue 32's)")
    p.add_argument("--kind", default=None, help="replay_test's folder for this machine (default: from the CPU)")
    p.add_argument("--languages", default=",".join(LANGUAGES))
    p.add_argument("--typists", default=",".join(TYPISTS))
    p.add_argument("--run", action="store_true", help="run the missing cells, one after another")
    p.add_argument("--purpose", default="", help="the ledger's line for each run (required with --run)")
    p.add_argument("--trees", default=str(Path(tempfile.gettempdir()) / "flint-arms"),
                   help="where the arms' trees go (kept: a later call reuses a tree of the same commit)")
    p.add_argument("--rows", action="store_true", help="print README's rows of the cells measured at --main")
    args = p.parse_args(argv)
    kind = machine_kind(cpu_info()) if args.kind is None else args.kind
    folder = TEST / kind if kind else TEST
    if args.rows:
        rows, sources = readme_rows(folder, args.main)
        print("From " + ", ".join(f"`{s}`" for s in sources))
        print("\n".join(rows))
        return 0
    found = table(folder)
    todo = missing(found, args.main, args.base, args.languages.split(","), args.typists.split(","))
    print(f"{folder.relative_to(ROOT)}: {len(todo)} cell(s) not measured at main {args.main} beside {args.base}: "
          + (", ".join(f"{lang} {t}" for lang, t in todo) or "none"))
    if not args.run or not todo:
        return 0
    if not args.purpose:
        p.error("--run types the test split: say why with --purpose (each run's ledger line)")
    root = Path(args.trees)
    trees = {"main": arm_tree(args.main, root), "base": arm_tree(args.base, root)}
    work = Path(tempfile.mkdtemp(prefix="flint-table-"))
    for lang, t in todo:
        run_cell(lang, t, trees, folder, f"{args.purpose} ({lang}, {t})", work, table(folder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
