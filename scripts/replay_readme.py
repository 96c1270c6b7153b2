"""README's held-out sections, written from the test-split reports they cite (issue 47): the table (mean ± sd over
the seeds), where and when each row was measured, and each row against the issues' targets. Nothing in them is
typed by hand, so a cell that moves (scripts/replay_test_table.py files it) moves its rows, its CPU and its
verdicts together, and tests/test_readme_figures.py fails while README and the reports disagree.

    python scripts/replay_readme.py            # rewrite the three sections in README.md
    python scripts/replay_readme.py --check    # exit 1 where README differs from the reports
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay_stats as stats  # noqa: E402
from replay_test_table import LANGUAGES, NAMES, TEST, TYPISTS, readme_rows, recorded_kind, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
WIDTH = 118  # README's prose lines

# Issue 47's targets on the test split, and issue 49's against the baseline in the same run.
SAVED_MIN, PAUSES_MIN, WRONG_MAX, CPU_MAX = 0.45, 0.90, 0.40, 25.0
WRONG_CUT = 0.30  # keystrokes under a wrong ghost at least 30% fewer than the baseline's...
RATIO_MIN = 0.8  # ...and JavaScript's and TypeScript's characters saved at least 0.8x Python's

MACHINES = {  # recorded_kind -> how README names the machine, and its vector units
    "zen4": ("AMD EPYC Zen 4", "AVX-512 VNNI"), "zen5": ("AMD EPYC Zen 5", "AVX-512 VNNI"),
    "xeon": ("Intel Xeon", "AVX-512 VNNI"), "avx2": ("AMD EPYC Zen 3", "AVX2, no AVX-512"),
}


@dataclass(frozen=True)
class Section:
    title: str
    folder: Path
    note: str  # what sets this table apart, one sentence


SECTIONS = (
    Section("### Held-out figures: the test split", TEST,
            "The first table: each row from the latest run of its cell on a machine with AVX-512 VNNI."),
    Section("### Held-out figures on an AVX2-only machine", TEST / "avx2",
            "Every row on the AMD EPYC without AVX-512 (Zen 3), the slowest of the kinds of machine this project "
            "runs on (a forward of the default model: docs/benchmarks/cpu.md)."),
    Section("### Held-out figures on the AMD EPYC Zen 5", TEST / "zen5",
            "Every row on the AMD EPYC Zen 5 (family 26), the fastest kind of machine this project runs on; the "
            "cells not listed were not measured there."),
)


@dataclass(frozen=True)
class Cell:
    language: str
    typist: str
    report: str  # path as README names it
    meta: dict
    main: dict  # summaries
    base: dict
    functions: int


def cells(folder: Path) -> list[Cell]:
    """Every (language, typist) cell of ``folder``'s reports, in the table's order."""
    out = {}
    for (lang, typist), (path, _commits) in table(folder).items():
        data = json.loads(path.read_text())
        sums, names = stats.common_summaries(data, "test")
        by = {s["server"]: s for s in sums if s["typist"] == typist}
        out[(lang, typist)] = Cell(lang, typist, path.relative_to(ROOT).as_posix(), data["meta"], by["main"],
                                   by["base"], len(names))
    return [out[(lang, t)] for lang in LANGUAGES for t in TYPISTS if (lang, t) in out]


def _mean(sm: dict, metric: str) -> float | None:
    """A metric's mean over the seeds, rounded as the table prints it (a verdict agrees with the figure shown)."""
    s = sm["over_seeds"].get(metric)
    if not s:
        return None
    return round(s["mean"], 1) if metric == "cpu_s_per_typing_min" else round(s["mean"], 3)


def machine(meta: dict) -> str:
    name, units = MACHINES.get(recorded_kind(meta) or "", (meta.get("cpu", "not recorded").split(" (")[0], ""))
    m = re.search(r"family (\S+) model (\S+);", meta.get("cpu", ""))
    return ", ".join(x for x in (name, m and f"family {m.group(1)} model {m.group(2)}", units) if x)


def _pc(v: float) -> str:
    return f"{100 * v:.1f}%"


def _verdict(ok: bool, text: str) -> str:
    return f"{'met' if ok else '**missed**'}: {text}"


def targets(c: Cell) -> list[str]:
    """The row's verdicts: issue 47's four targets, then issue 49's two (against the baseline of the same run)."""
    saved, base_saved = _mean(c.main, "chars_saved_share"), _mean(c.base, "chars_saved_share")
    pauses, wrong = _mean(c.main, "pauses_share"), _mean(c.main, "wrong_ghost_share")
    cpu, base_wrong = _mean(c.main, "cpu_s_per_typing_min"), _mean(c.base, "wrong_ghost_share")
    cut = wrong / base_wrong - 1
    gain = 100 * (saved - base_saved)
    return [_verdict(saved >= SAVED_MIN, _pc(saved)),
            "– (no pauses)" if pauses is None else _verdict(pauses >= PAUSES_MIN, _pc(pauses)),
            _verdict(wrong <= WRONG_MAX, _pc(wrong)),
            _verdict(cpu <= CPU_MAX, f"{cpu:.1f} s"),
            _verdict(cut <= -WRONG_CUT, f"{100 * cut:+.0f}%".replace("-", "−")),
            _verdict(gain >= 0, f"{gain:+.1f} points".replace("-", "−"))]


def ratios(cs: list[Cell]) -> list[str]:
    """Issue 49's JavaScript and TypeScript characters saved against Python's, typist by typist (main's means)."""
    by = {(c.language, c.typist): c for c in cs}
    out = []
    for lang in ("javascript", "typescript"):
        parts = []
        for t in TYPISTS:
            if (lang, t) in by and ("python", t) in by:
                r = _mean(by[(lang, t)].main, "chars_saved_share") / _mean(by[("python", t)].main, "chars_saved_share")
                same = machine(by[(lang, t)].meta) == machine(by[("python", t)].meta)
                parts.append(f"{t} {r:.2f}×" + ("" if same else " (another machine)"))
        if parts:
            out.append(f"{NAMES[lang]} {', '.join(parts)}")
    return out


def render(sec: Section) -> str:
    cs = cells(sec.folder)
    assert cs, f"no test-split report in {sec.folder}"
    functions = {NAMES[c.language]: c.functions for c in cs}
    counts = ", ".join(f"{name} {n}" for name, n in functions.items())
    seeds = sorted({s for c in cs for s in c.meta.get("seeds", [])})
    reports = sorted({c.report for c in cs})
    verdicts = [targets(c) for c in cs]
    lines = [
        sec.title, "",
        *textwrap.wrap(f"{sec.note} Generated from the reports by `python scripts/replay_readme.py` (a hand edit fails "
        "tests/test_readme_figures.py): " + ", ".join(f"`{r}`" for r in reports) + " (each with its `.md` report). "
        "The test split's code (`scripts/replay_test_split.py`: pinned, sha256-checked packages none of our other "
        "benchmarks, tests or decisions use), functions typed whole by both arms in every round: "
        f"{counts} functions. main beside issue 32's baseline 1944788 (`base`), arms alternated, one run per "
        f"language and typist, each round on its own timing seed ({', '.join(map(str, seeds))}); each cell the "
        "mean ± sd over the seeds, each metric as the glossary defines it (`docs/benchmarks/README.md`). Typists: "
        "steady (8 characters/s ±30%), think (the steady one, 1 s after each Enter and 0.8 s after 15% of spaces and "
        "`,(=:`), open (the think typist typing 1 s after the file opens, with no request at the cursor before). "
        "**Compare a row with its own baseline only**: rows measured on other machines or at other commits are not "
        "comparable with each other (CPU least of all; the machine and commit of each row are below). Earlier rows "
        "and what was learned from them: `docs/benchmarks/archive/README.md` (the replay_test.* reports, and the "
        "README's earlier text of these sections, `archive/readme.held-out-s95.md`).", WIDTH, break_long_words=False, break_on_hyphens=False), "",
        "| code | typist | server | characters saved | answered before the next key | pauses shown within 150 ms "
        "| keystrokes under a wrong ghost | server CPU s per minute of typing |",
        "|---|---|---|---|---|---|---|---|",
        *readme_rows(sec.folder)[0], "",
        "Where and when each row was measured (main's commit; the baseline is 1944788 in every run):", "",
        "| code | typist | main | machine, 2 cores | date (UTC) | load average at start / end |",
        "|---|---|---|---|---|---|",
    ]
    for c in cs:
        load = f"{c.meta.get('load_average', '?').split(' / ')[0]} / {c.meta.get('load_average_end', '?').split(' / ')[0]}"
        lines.append(f"| {NAMES[c.language]} | {c.typist} | {c.meta['servers']['main']['commit'][:7]} | "
                     f"{machine(c.meta)} | {c.meta['date']} | {load} |")
    lines += [
        "", *textwrap.wrap("Each row against the issues' targets (main's means over the seeds; issue 47: characters saved ≥ 45%, "
        "pauses shown within 150 ms ≥ 90%, keystrokes under a wrong ghost ≤ 40%, server CPU ≤ 25 s per minute of "
        "typing; issue 49: keystrokes under a wrong ghost 30% fewer than the baseline's in the same run, with "
        "characters saved no lower):", WIDTH), "",
        "| code | typist | saved ≥ 45% | pauses ≥ 90% | wrong ghost ≤ 40% | CPU ≤ 25 s | wrong ghost −30% | saved "
        "no lower |",
        "|---|---|---|---|---|---|---|---|",
        *[f"| {NAMES[c.language]} | {c.typist} | " + " | ".join(v) + " |" for c, v in zip(cs, verdicts, strict=True)],
    ]
    met = sum(v.startswith("met") for vs in verdicts for v in vs)
    told = sum(not v.startswith("–") for vs in verdicts for v in vs)
    tail = f"{met} of {told} verdicts met."
    if rs := ratios(cs):
        tail += " Issue 49's characters saved against Python's (≥ 0.8×), main: " + "; ".join(rs) + "."
    lines += ["", *textwrap.wrap(tail, WIDTH)]
    return "\n".join(lines) + "\n"


def replace_section(readme: str, title: str, text: str) -> str:
    """``readme`` with the section from ``title`` to the next heading of level 2 or 3 replaced by ``text``."""
    start = readme.index(title + "\n")
    end = min(i for h in ("\n## ", "\n### ") if (i := readme.find(h, start + 1)) >= 0)
    return readme[:start] + text + readme[end:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 where README differs from the reports")
    args = p.parse_args(argv)
    old = README.read_text()
    new = old
    for sec in SECTIONS:
        new = replace_section(new, sec.title, render(sec))
    if args.check:
        print("README's held-out sections are the reports'" if new == old else "README differs from the reports")
        return 0 if new == old else 1
    README.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
