"""engine.types.Rate: the prefill rate idle work is timed by (a running mean of long enough measurements)."""

from __future__ import annotations

import pytest

from engine.types import Rate


def test_no_rate_before_a_measurement_long_enough_to_mean_one():
    r = Rate()
    r.add(8, 0.01)  # a keystroke's few tokens: mostly the call's overhead
    r.add(64, 0.0)
    assert r.per_s is None
    r.add(64, 0.1)
    assert r.per_s == pytest.approx(640.0)


def test_the_newest_measurement_moves_the_rate_by_its_weight():
    r = Rate(weight=0.25)
    r.add(100, 1.0)
    r.add(500, 1.0)
    assert r.per_s == pytest.approx(100 + 0.25 * 400)
    for _ in range(40):
        r.add(500, 1.0)
    assert r.per_s == pytest.approx(500.0, rel=1e-3)  # a machine that got faster is followed
