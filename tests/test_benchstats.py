"""scripts/benchstats.py: the one median and percentile every benchmark script uses (issue 47)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tests.scripts import load_script

bs = load_script("benchstats")


def test_median_is_the_ordinary_one():
    assert bs.median([4.0, 1.0, 3.0, 2.0]) == 2.5  # the upper-middle rule gave 3, nearest rank 2
    assert bs.median([3.0, 1.0, 2.0]) == 2.0
    rng = random.Random(3)
    for n in range(1, 40):
        vals = [rng.uniform(-50, 50) for _ in range(n)]
        assert bs.median(vals) == pytest.approx(statistics.median(vals))
    assert bs.median([]) is None


def test_percentiles_interpolate_linearly_as_numpy_does():
    assert bs.percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    assert bs.percentile(range(101), 99) == pytest.approx(99.0)
    vals = [5.0, 1.0, 9.0, 3.0, 7.0]
    inclusive = statistics.quantiles(vals, n=20, method="inclusive")  # the 5th, 10th, ... 95th percentiles
    assert bs.percentile(vals, 95) == pytest.approx(inclusive[-1])
    assert bs.percentile(vals, 0) == 1.0 and bs.percentile(vals, 100) == 9.0
    assert bs.percentile([1.0, math.inf, math.inf], 50) == math.inf
    with pytest.raises(ValueError):
        bs.percentile(vals, 150)


def test_spread_over_seeds():
    s = bs.spread([0.30, None, 0.34, 0.32])
    assert s["n"] == 3 and s["mean"] == pytest.approx(0.32) and s["sd"] == pytest.approx(0.02)
    assert s["min"] == 0.30 and s["max"] == 0.34
    one = bs.spread([0.3])
    assert one["sd"] is None and bs.mean_sd(one, lambda v: f"{v:.2f}") == "0.30 (n=1)"
    assert bs.mean_sd(s, lambda v: f"{100 * v:.0f}%") == "32% ± 2% (n=3)"
    assert bs.spread([None]) is None and bs.mean_sd(None) == "–"


# (script, q of its median): bench_picks and bench_next_edit take quantiles 0..1, the others percentiles 0..100
@pytest.mark.parametrize(("script", "half"), [("bench_picks", 0.5), ("bench_served", 50), ("bench_next_edit", 0.5),
                                              ("bench_context", 50), ("replay_stats", 50)])
def test_every_bench_script_takes_its_median_from_benchstats(script, half):
    mod = load_script(script)
    # 2.5: the ordinary median; the scripts' own rules gave 3 (upper middle, rounded index) or 2 (nearest rank)
    assert mod.pct([1.0, 3.0, 2.0, 10.0], half) == 2.5
    assert mod.pct([1.0, 2.0, 3.0, 4.0, 5.0], half * 1.9) == pytest.approx(bs.percentile([1, 2, 3, 4, 5], 95))
