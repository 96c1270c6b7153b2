"""Local usage stats: counters and recent latencies, merged into FLINT_HOME/stats.json.

Every server on the machine (one per editor window) adds its own deltas to the one file under a lock,
so `flint stats` shows the machine's totals. Nothing leaves the machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.paths import stats_path
from lsp_server import convert
from lsp_server.completion.events import Worked

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_LATENCIES = 2000  # recent latency samples kept in the file (for percentiles)
REMEMBERED_COMPLETIONS = 256  # ids kept for didShow / didAccept
COUNTERS = ("requests", "suggestions", "empty", "cancelled", "stale", "errors", "shown", "accepted",
            "partial_accepts", "accepted_units")


class Stats:
    """In-memory deltas since the last flush. Used from the event loop only."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or stats_path()
        self.counts: Counter[str] = Counter()
        self.sources: Counter[str] = Counter()
        self.latencies: list[float] = []
        self.last_flush = time.monotonic()

    # ---- recording ------------------------------------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def completed(self, total_ms: float, source: str, suggestions: int) -> None:
        """A request answered with a result (``requests`` is counted when it arrives)."""
        if suggestions:
            self.counts["suggestions"] += 1
            self.sources[source] += 1
            self.latencies.append(round(total_ms, 2))
            del self.latencies[:-MAX_LATENCIES]
        else:
            self.counts["empty"] += 1

    def worked(self, w: Worked) -> None:
        """The work accounting: a job ran on a scheduler's engine. Counted per kind of work as
        ``work.<kind>.jobs`` / ``.wall_ms`` / ``.cpu_ms`` / ``.prefilled`` / ``.generated`` (tokens), and by how
        the jobs ended, ``work.<kind>.ended.<how>.jobs`` / ``.cpu_ms`` (CPU spent on work stopped unused);
        ``served``, ``accepted`` and ``accepted_units`` say what came of it (which work is worth its CPU)."""
        name = work_name(w.tier, w.work)
        self.counts[f"work.{name}.jobs"] += 1
        self.counts[f"work.{name}.wall_ms"] += round(w.wall_ms)
        self.counts[f"work.{name}.cpu_ms"] += round(w.cpu_ms)
        self.counts[f"work.{name}.prefilled"] += w.prefilled
        self.counts[f"work.{name}.generated"] += w.generated
        how = "-".join(w.ended.split()) or "complete"
        self.counts[f"work.{name}.ended.{how}.jobs"] += 1
        self.counts[f"work.{name}.ended.{how}.cpu_ms"] += round(w.cpu_ms)

    # ---- persistence ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Merge the deltas into the file (under a lock) and start new deltas. Never raises."""
        self.last_flush = time.monotonic()
        if not self.counts and not self.sources and not self.latencies:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(self.path.with_suffix(".lock")):
                data = load(self.path)
                for k, v in self.counts.items():
                    data["totals"][k] = data["totals"].get(k, 0) + v
                for k, v in self.sources.items():
                    data["by_source"][k] = data["by_source"].get(k, 0) + v
                data["latency_ms"] = (data["latency_ms"] + self.latencies)[-MAX_LATENCIES:]
                data["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                _drop_dead_writers_files(self.path)
                tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
                try:
                    tmp.write_text(json.dumps(data, indent=1))
                    os.replace(tmp, self.path)
                finally:
                    tmp.unlink(missing_ok=True)  # a write that failed (a full disk) leaves no file behind
        except OSError as e:
            log.warning("could not write stats to %s: %s", self.path, e)
            return
        self.counts.clear()
        self.sources.clear()
        self.latencies.clear()


def _drop_dead_writers_files(path: Path) -> None:
    """The temporary files of writers killed mid-write (``stats.PID.tmp``, their process gone): Flint's own."""
    from engine.model.publish import process_alive

    for old in path.parent.glob(f"{path.stem}.*.tmp"):
        pid = old.name[len(path.stem) + 1:-len(".tmp")]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            old.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(lock_path: Path):
    try:
        import fcntl
    except ImportError:  # Windows: best effort without a lock
        yield
        return
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def empty() -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "updated": None,
            "totals": {k: 0 for k in COUNTERS}, "by_source": {}, "latency_ms": []}


def load(path: Path | None = None) -> dict[str, Any]:
    """The stats file, or empty stats when it is missing or unreadable."""
    path = path or stats_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return empty()
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable stats file %s: %s", path, e)
        return empty()
    base = empty()
    if not isinstance(data, dict):
        return base
    base.update({k: data[k] for k in ("since", "updated") if k in data})
    if isinstance(data.get("totals"), dict):
        base["totals"].update({k: int(v) for k, v in data["totals"].items() if isinstance(v, int | float)})
    if isinstance(data.get("by_source"), dict):
        base["by_source"] = {k: int(v) for k, v in data["by_source"].items() if isinstance(v, int | float)}
    if isinstance(data.get("latency_ms"), list):
        base["latency_ms"] = [float(x) for x in data["latency_ms"] if isinstance(x, int | float)]
    return base


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    # nearest-rank percentile: simple and exact on the samples we have
    k = max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


def summary(data: dict[str, Any]) -> dict[str, Any]:
    t = data["totals"]
    lat = data["latency_ms"]
    shown = t.get("shown", 0)
    return {
        **t,
        "acceptance_rate": (t.get("accepted", 0) / shown) if shown else None,
        "latency_p50_ms": percentile(lat, 50),
        "latency_p90_ms": percentile(lat, 90),
        "latency_p99_ms": percentile(lat, 99),
        "latency_samples": len(lat),
        "by_source": data["by_source"],
        "since": data["since"],
        "updated": data["updated"],
    }


def format_summary(s: dict[str, Any], path: Path) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms"

    rate = "-" if s["acceptance_rate"] is None else f"{100 * s['acceptance_rate']:.1f}%"
    sources = ", ".join(f"{k} {v}" for k, v in sorted(s["by_source"].items(), key=lambda kv: -kv[1])) or "-"
    lines = [
        f"Flint stats ({path})",
        f"  since {s['since']}, updated {s['updated'] or 'never'}",
        f"  requests     {s['requests']}  (suggestions {s['suggestions']}, empty {s['empty']}, "
        f"cancelled {s['cancelled']}, stale {s['stale']}, errors {s['errors']})",
        f"  shown        {s['shown']}",
        f"  accepted     {s['accepted']}  ({rate} of shown), partially {s['partial_accepts']}",
        f"  latency      p50 {ms(s['latency_p50_ms'])}, p90 {ms(s['latency_p90_ms'])}, "
        f"p99 {ms(s['latency_p99_ms'])}  ({s['latency_samples']} recent suggestions)",
        f"  sources      {sources}",
    ]
    return "\n".join(lines + work_summary(s))


def work_summary(totals: dict[str, Any]) -> list[str]:
    """One line: the engine's jobs, their CPU, and the share spent on jobs stopped before their end, by why
    (``worked``'s ``work.<kind>.ended.<how>`` counters; none before they were counted)."""
    def per_kind(what: str) -> float:  # work.<kind>.<what> summed over the kinds
        return sum(v for k, v in totals.items() if k.startswith("work.") and k.count(".") == 2 and k.endswith(what))

    jobs, cpu = int(per_kind(".jobs")), per_kind(".cpu_ms")
    if not jobs:
        return []
    stopped: Counter[str] = Counter()
    for k, v in totals.items():
        parts = k.split(".")
        if len(parts) == 5 and parts[0] == "work" and parts[2] == "ended" and parts[4] == "cpu_ms" \
                and parts[3] != "complete":
            stopped[parts[3]] += v
    line = f"  engine work  {jobs} jobs, {cpu / 1000:.1f} s CPU"
    if cpu and stopped:
        why = ", ".join(f"{how} {100 * v / cpu:.0f}%" for how, v in stopped.most_common())
        line += f"; stopped before their end: {100 * sum(stopped.values()) / cpu:.0f}% ({why})"
    return [line]


def work_name(tier: str, work: str) -> str:
    """The accounting's name for a kind of work on a tier ("now", "future", "remote-now", ...)."""
    return (work or "other") if tier == "local" else f"{tier}-{work or 'other'}"


@dataclass
class _Record:
    uri: str
    texts: list[str]
    shown: set[int] = field(default_factory=set)
    accepted: bool = False
    work: str = ""  # work_name of the generation the suggestions came from ("": not the engine's)


class Shown:
    """The suggestions sent lately, by id: what the client's didShow / didAccept / didPartiallyAccept
    notifications refer to. Each is counted into ``stats`` once; an id not (or no longer) known is ignored."""

    def __init__(self, stats: Stats, kept: int = REMEMBERED_COMPLETIONS) -> None:
        self._stats = stats
        self._kept = kept
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def remember(self, sid: str, uri: str, texts: list[str], work: str = "") -> None:
        self._records[sid] = _Record(uri, texts, work=work)
        while len(self._records) > self._kept:
            self._records.popitem(last=False)

    def uri_of(self, sid: str) -> str | None:
        """The document a remembered suggestion was made for (None: not, or no longer, known)."""
        rec = self._records.get(sid)
        return rec.uri if rec is not None else None

    def did_show(self, sid: str, index: int) -> bool:
        rec = self._records.get(sid)
        if rec is None or not 0 <= index < max(1, len(rec.texts)):
            return False
        if index not in rec.shown:
            rec.shown.add(index)
            self._stats.count("shown")
        return True

    def did_accept(self, sid: str, index: int, encoding: str) -> bool:
        rec = self._records.get(sid)
        if rec is None or rec.accepted:
            return False
        rec.accepted = True
        self._stats.count("accepted")
        units = convert.unit_len(rec.texts[index], encoding) if index < len(rec.texts) else 0
        self._stats.count("accepted_units", units)
        if rec.work:
            self._stats.count(f"work.{rec.work}.accepted")
            self._stats.count(f"work.{rec.work}.accepted_units", units)
        return True

    def did_partially_accept(self, sid: str, accepted_length: int) -> bool:
        rec = self._records.get(sid)
        if rec is None:
            return False
        self._stats.count("partial_accepts")
        self._stats.count("accepted_units", max(0, accepted_length))
        if rec.work:
            self._stats.count(f"work.{rec.work}.accepted_units", max(0, accepted_length))
        return True
