"""Routing decisions and the remote's backoff (engine/policy/routing.py): pure logic."""

from __future__ import annotations

import pytest

from engine.policy.routing import Backoff, RouteConfig, route

ALL = dict(invoked=False, variants=False, multiline=False)


def r(mode: str, remote_for=("invoked", "variants", "multiline"), ready=True, **kind) -> str:
    return route(RouteConfig(mode, frozenset(remote_for)), **{**ALL, **kind}, remote_ready=ready)


@pytest.mark.parametrize("mode", ["local", "hybrid"])
def test_an_automatic_keystroke_stays_local(mode):
    assert r(mode) == "local"


def test_remote_mode_sends_everything_there_unless_it_is_backing_off():
    assert r("remote") == "remote"
    assert r("remote", invoked=True) == "remote"
    assert r("remote", ready=False) == "local"


@pytest.mark.parametrize("kind", ["invoked", "variants", "multiline"])
def test_hybrid_routes_the_kinds_named(kind):
    assert r("hybrid", **{kind: True}) == "remote"
    assert r("local", **{kind: True}) == "local"
    others = tuple(k for k in ("invoked", "variants", "multiline") if k != kind)
    assert r("hybrid", remote_for=others, **{kind: True}) == "local"
    assert r("hybrid", ready=False, **{kind: True}) == "local"


def test_backoff_doubles_to_a_cap_and_resets_on_success():
    b = Backoff(base_s=0.5, cap_s=3.0)
    assert b.ready(0.0)
    assert b.failed(10.0, "refused") == 0.5
    assert not b.ready(10.4) and b.ready(10.5)
    assert b.failed(10.5, "refused") == 1.0
    assert b.failed(11.5, "refused") == 2.0
    assert b.failed(13.5, "refused") == 3.0  # capped
    assert b.failed(16.5, "refused") == 3.0
    assert b.last_error == "refused" and not b.ready(19.0)
    b.succeeded()
    assert b.ready(0.0) and b.failures == 0
    assert b.failed(20.0, "x") == 0.5
