"""The local worker warms its KV cache when the capable tier takes a request (Worker.poke): the
keystrokes after a routed request are the local model's, and nothing else would wake it."""

from __future__ import annotations

from lsp_server.completion.jobs import WarmUp
from lsp_server.completion.policy import knobs
from tests.fakes import FakeEngine, Rig, state, text


def test_poke_makes_an_idle_worker_warm_the_spot_routed_elsewhere():
    r = Rig(FakeEngine(text("x"))).start()
    try:
        assert r.until(lambda: r.idle_calls == 1)  # idle once after loading: nothing to warm
        assert r.engine.prefills == []
        # the user opened a file and a request went to the capable tier: the local worker saw no job
        spot = state("file:///a.py", 1, "def f():\n    ", "\n")
        r.idle_plan = (spot, WarmUp())
        r.worker.document_changed("file:///a.py", 1)
        assert not r.until(lambda: r.engine.prefills, knobs.IDLE_WARM_S * 3)  # it heard of no job: it stays cold
        r.worker.poke()
        assert r.until(lambda: r.engine.prefills)
        assert r.engine.prefills == [(spot.prefix, spot.suffix)]
        assert r.until(lambda: r.engine.held == (spot.prefix, spot.suffix))
    finally:
        r.stop()
