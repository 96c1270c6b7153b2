"""The collector hold of next edits (lsp_server/nextedit/collector.py): off while a computation finds its first
part, on again after, holds nesting across threads."""

from __future__ import annotations

import gc
import threading

from lsp_server.nextedit.collector import Hold


def test_a_hold_keeps_the_collector_off_until_released_or_done():
    assert gc.isenabled()
    h = Hold()
    seen: list[bool] = []

    def compute(x: int) -> int:
        seen.append(gc.isenabled())
        h.release()  # the first part is out
        seen.append(gc.isenabled())
        h.release()  # twice is nothing
        return x + 1

    assert h.around(compute)(1) == 2
    assert seen == [False, True] and gc.isenabled()


def test_holds_nest_and_an_exception_releases():
    a, b = Hold(), Hold()
    started, go = threading.Event(), threading.Event()

    def long() -> None:
        started.set()
        go.wait(10)

    t = threading.Thread(target=a.around(long))
    t.start()
    started.wait(10)

    def fails() -> None:
        assert not gc.isenabled()
        raise ValueError("a bug in a computation")

    try:
        b.around(fails)()
    except ValueError:
        pass
    assert not gc.isenabled()  # the other computation still holds it
    go.set()
    t.join(10)
    assert gc.isenabled()


def test_a_collector_switched_off_by_someone_else_stays_off():
    gc.disable()
    try:
        Hold().around(lambda: None)()
        assert not gc.isenabled()
    finally:
        gc.enable()
