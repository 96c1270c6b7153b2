"""The work accounting in a replay: what each kind of engine work cost the server and what it bought.

The server counts, per kind of work (``lsp_server.stats``: ``work.<kind>.*``; kinds are the scheduler's
job kinds: "now" for the keystroke's own generation, "future" for a suggestion accepted ahead of the user,
"warm" for idle prefill, "variants" for a batch of several), the jobs its engine ran, their wall and CPU
time, how many of its generations a suggestion on screen came from ("served"), and the characters accepted
from them (the typist sends ``flint/didAccept`` / ``flint/didPartiallyAccept`` as VS Code does). The
server writes them to ``$FLINT_HOME/stats.json``; each replay run has its own FLINT_HOME.
"""

from __future__ import annotations

import json
from pathlib import Path

FIELDS = ("jobs", "wall_ms", "cpu_ms", "served", "accepted", "accepted_units", "prefilled", "generated")
ENDED_FIELDS = ("jobs", "cpu_ms")  # work.<kind>.ended.<how>.<field>: how the jobs ended (servers since s53)


def read_totals(home: Path) -> dict[str, int]:
    """The stats file's totals under ``home`` (empty when there is none)."""
    try:
        data = json.loads((home / "stats.json").read_text())
    except (OSError, ValueError):
        return {}
    totals = data.get("totals") if isinstance(data, dict) else None
    return {k: int(v) for k, v in totals.items() if isinstance(v, int | float)} if isinstance(totals, dict) else {}


def work_between(before: dict[str, int], after: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per kind of work, what the counters grew by between two readings of the totals."""
    out: dict[str, dict] = {}
    for key, value in after.items():
        parts = key.split(".")
        grown = value - before.get(key, 0)
        if parts[0] != "work" or not grown:
            continue
        if len(parts) == 3 and parts[2] in FIELDS:
            _kind(out, parts[1])[parts[2]] += grown
        elif len(parts) == 5 and parts[2] == "ended" and parts[4] in ENDED_FIELDS:
            ended = _kind(out, parts[1])["ended"].setdefault(parts[3], dict.fromkeys(ENDED_FIELDS, 0))
            ended[parts[4]] += grown
    return out


def _kind(out: dict[str, dict], kind: str) -> dict:
    return out.setdefault(kind, {**dict.fromkeys(FIELDS, 0), "ended": {}})


def pooled(works: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Several runs' accounting added up."""
    out: dict[str, dict] = {}
    for w in works:
        for kind, counts in w.items():
            acc = _kind(out, kind)
            for f in FIELDS:
                acc[f] += counts.get(f, 0)
            for how, c in counts.get("ended", {}).items():
                e = acc["ended"].setdefault(how, dict.fromkeys(ENDED_FIELDS, 0))
                for f in ENDED_FIELDS:
                    e[f] += c.get(f, 0)
    return out


def work_lines(summaries: list[dict]) -> list[str]:
    """The report's section: one table per configuration and half, one row per kind of work."""
    parts = [s for s in summaries if s.get("work")]
    if not parts:
        return []
    lines = ["## Where the server's CPU goes (work accounting)", "",
             "Per kind of engine work (`now`: the keystroke's own generation; `future`: a suggestion accepted, "
             "generated ahead; `warm`: idle prefill of the window; `variants`: a batch of several). *served*: "
             "generations a suggestion on screen came from; *accepted chars*: what the typist took from them. "
             "CPU is the server process's while the job ran.", ""]
    for s in parts:
        work = s["work"]
        total_cpu = sum(c["cpu_ms"] for c in work.values()) or 1
        lines += [f"`{s['config']}` ({s.get('split') or 'all'})", "",
                  "| work | jobs | CPU s | share of CPU | served (of jobs) | accepted chars | CPU ms per accepted char |",
                  "|---|---|---|---|---|---|---|"]
        for kind, c in sorted(work.items(), key=lambda kv: -kv[1]["cpu_ms"]):
            served = f"{c['served']} ({100 * c['served'] / c['jobs']:.0f}%)" if c["jobs"] else str(c["served"])
            per = f"{c['cpu_ms'] / c['accepted_units']:.0f}" if c["accepted_units"] else "–"
            lines.append(f"| {kind} | {c['jobs']} | {c['cpu_ms'] / 1000:.1f} | {100 * c['cpu_ms'] / total_cpu:.0f}% | "
                         f"{served} | {c['accepted_units']} | {per} |")
        lines += [""] + ended_lines(work, total_cpu)
    return lines


def ended_lines(work: dict[str, dict], total_cpu: int) -> list[str]:
    """How the jobs of each kind ended (complete, or why they stopped: stale, diverged, idle, ...), with the
    tokens they ran: CPU spent on work stopped before its end bought at most what streamed meanwhile."""
    rows = [(kind, how, e) for kind, c in work.items() for how, e in c.get("ended", {}).items()]
    if not rows:
        return []
    lines = ["| work | ended | jobs | CPU s | share of CPU |", "|---|---|---|---|---|"]
    for kind, how, e in sorted(rows, key=lambda r: -r[2]["cpu_ms"]):
        lines.append(f"| {kind} | {how} | {e['jobs']} | {e['cpu_ms'] / 1000:.1f} | {100 * e['cpu_ms'] / total_cpu:.0f}% |")
    tokens = [f"{kind}: {c['prefilled']} prompt tokens run, {c['generated']} generated"
              for kind, c in work.items() if c.get("prefilled") or c.get("generated")]
    return lines + ([""] + ["Tokens: " + "; ".join(tokens) + "."] if tokens else []) + [""]
