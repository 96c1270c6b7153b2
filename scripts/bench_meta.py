"""What a benchmark run records about where it ran (issue 47): each arm's commit, the CPU and its flags, the load; and
the ledger of every run that typed the replay's validation or test split (docs/benchmarks/ledger.md).

An arm is usually a ``git archive`` snapshot, which has no .git: the commit is read from a ``COMMIT`` file at the
snapshot's root (``git rev-parse HEAD > TREE/COMMIT`` when archiving), else from git in the tree, else ``?``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "docs" / "benchmarks" / "ledger.md"
# the flags that decide the speed of ORT's and llama.cpp's kernels here, in the order they are reported
FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")
LEDGER_HEAD = """# Ledger: every run that typed the replay's validation or test split

Issue 47: the validation half stops being held out once decisions are taken on it, and the test split is worth
something only while it is typed rarely and for a stated reason. `bench_replay.py` appends a row here before it
types either split (an interrupted run is a use too); the rows before issue 47 were written from the archived
reports' JSON (`docs/benchmarks/archive/`, `replay.json`, `replay_languages/`); most of those runs recorded
no commit for their arms (`?`; a server's name often carries it).

| date (UTC) | split | arms (commit) | command | purpose | CPU |
| --- | --- | --- | --- | --- | --- |
"""


def arm_commit(tree: str | Path) -> str:
    """The commit an arm's tree holds: its COMMIT file, else git's HEAD there, else "?"."""
    marker = Path(tree) / "COMMIT"
    if marker.is_file():
        text = marker.read_text().strip().split()
        if text:
            return text[0][:12]
    try:
        out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def cpu_info(cpuinfo: str | None = None) -> dict:
    """Model name, family/model, the flags of ``FLAGS`` present and the cores (from /proc/cpuinfo's first CPU)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    first = cpuinfo.split("\n\n", 1)[0]
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines()) if v}
    flags = set(fields.get("flags", "").split())
    return {"model": fields.get("model name", "?"), "family": fields.get("cpu family", "?"),
            "model_number": fields.get("model", "?"), "flags": [f for f in FLAGS if f in flags],
            "cores": os.cpu_count()}


def cpu_line(info: dict) -> str:
    """One line for a report: model, family/model, flags, cores."""
    return (f"{info['model']} (family {info['family']} model {info['model_number']}; "
            f"{' '.join(info['flags']) or 'no avx2'}), {info['cores']} cores")


def load_average() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return " / ".join(f"{x:.2f}" for x in load)


def ledger_row(date: str, split: str, arms: dict[str, str], command: str, purpose: str, cpu: str) -> str:
    def cell(s: str) -> str:  # a table cell holds no line break or bar
        return " ".join(s.split()).replace("|", "\\|")

    arm_cells = ", ".join(f"{name} ({commit})" for name, commit in arms.items())
    return f"| {cell(date)} | {cell(split)} | {cell(arm_cells)} | `{cell(command)}` | {cell(purpose)} | {cell(cpu)} |\n"


def append_ledger(row: str, path: Path = LEDGER) -> None:
    """Append a row, writing the ledger's head first when the file is new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(LEDGER_HEAD)
    with open(path, "a", encoding="utf-8") as f:
        f.write(row)
