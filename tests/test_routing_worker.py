"""The local worker warms its KV cache when the capable tier takes a request (Worker.poke): the
keystrokes after a routed request are the local model's, and nothing else would wake it."""

from __future__ import annotations

import threading
import time

from engine.types import Completion, Timings
from lsp_server.completion.worker import IDLE_WARM_S, Worker


class Engine:
    model_id = "e"

    def __init__(self) -> None:
        self.prefilled: list[tuple[str, str]] = []
        self.done = threading.Event()

    def complete(self, prefix, suffix="", params=None, cancel=None, on_token=None):
        return [Completion("x", [1], "eos")], Timings()

    def prefill(self, prefix, suffix="", cancel=None):
        self.prefilled.append((prefix, suffix))
        self.done.set()


class Hooks:
    def __init__(self) -> None:
        self.plan = None
        self.asked = 0

    def answer(self, job):
        return None

    def started(self, job):
        pass

    def token(self, job, index, text, doubts=()):
        return True

    def finished(self, job, result, ms):
        pass

    def idle(self, kv):
        self.asked += 1
        return self.plan


def test_poke_makes_an_idle_worker_warm_the_spot_routed_elsewhere():
    eng, hooks = Engine(), Hooks()
    w = Worker(lambda: eng, lambda uri: 1, hooks=hooks)
    w.start()
    try:
        assert w.loaded.wait(5)
        deadline = time.monotonic() + 5
        while hooks.asked == 0 and time.monotonic() < deadline:  # asked once after loading: nothing to warm
            time.sleep(0.01)
        assert hooks.asked == 1 and eng.prefilled == []
        # the user opened a file and a request went to the capable tier: the local worker saw no job
        hooks.plan = ("file:///a.py", 1, "def f():\n    ", "\n")
        w.document_changed("file:///a.py", 1)
        assert not eng.done.wait(IDLE_WARM_S * 3)  # nothing wakes it: it would stay cold
        w.poke()
        assert eng.done.wait(5)
        assert eng.prefilled == [("def f():\n    ", "\n")] and w.kv_prompt == ("def f():\n    ", "\n")
    finally:
        w.stop()
