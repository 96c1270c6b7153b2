"""The one set of statistics every benchmark script uses (issue 47): an ordinary median, percentiles, and mean with
spread over samples. Before this, bench_picks took the upper of two middle values, bench_served a rounded index and
bench_next_edit the nearest rank, each under the name "p50"; one definition keeps a figure comparable across reports.

- ``percentile(values, q)``: linear between the two nearest ranks (numpy's default, ``statistics.quantiles``'
  "inclusive" method); ``q`` in 0..100.
- ``median(values)``: ``percentile(values, 50)``, the mean of the two middle values for an even count.
- ``spread(values)``: mean, sample standard deviation, min and max of independent samples (a benchmark's seeds).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0 <= q <= 100), linear between the nearest ranks; None for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    s = sorted(values)
    if not s:
        return None
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    if s[lo] == s[hi]:  # also keeps inf - inf out of the arithmetic
        return s[lo]
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(values: Iterable[float]) -> float | None:
    return percentile(values, 50)


def mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return statistics.fmean(vals) if vals else None


def spread(values: Iterable[float | None]) -> dict | None:
    """Mean and spread of samples (None values are left out): ``n``, ``mean``, ``sd`` (sample standard deviation;
    None for one sample), ``min``, ``max``. None when there is no sample."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"n": len(vals), "mean": statistics.fmean(vals),
            "sd": statistics.stdev(vals) if len(vals) > 1 else None, "min": min(vals), "max": max(vals)}


def mean_sd(s: dict | None, fmt=lambda v: f"{v:.3g}") -> str:
    """A report cell: "mean ± sd (n)", or the one value when there is one sample."""
    if not s:
        return "–"
    if s["sd"] is None:
        return f"{fmt(s['mean'])} (n=1)"
    return f"{fmt(s['mean'])} ± {fmt(s['sd'])} (n={s['n']})"
