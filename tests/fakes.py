"""One stand-in engine for every test that needs no model (the facade of engine/engine_api.md).

``FakeEngine`` runs a *script*: a generator that, given a call's prefix, suffix and parameters, yields
``Step``s (wait this long, then variant i's text is this) and returns how the generation ended. The engine
does what the real generation loop does around it: it records the call, checks the CancelToken and the
deadline while it waits, streams each step to ``on_token``, and returns the completions. Scripts for the
common shapes are below (``steps``, ``text``, ``oracle``); a test writes its own for anything else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import NamedTuple

from engine.types import CancelToken, Completion, GenParams, Timings


@dataclass(frozen=True)
class Step:
    text: str  # the variant's whole text so far
    wait: float = 0.0  # seconds before it (the model working)
    variant: int = 0


@dataclass(frozen=True)
class Done:
    reason: str = "eos"  # the finish reason of every variant the script wrote
    window: str = "full"  # Timings.window ("quick": the engine's short first window)
    texts: tuple[str, ...] | None = None  # the variants' final texts, when not the last ones streamed


class Call(NamedTuple):
    prefix: str
    suffix: str
    params: GenParams


Script = Callable[[str, str, GenParams], Generator[Step, None, Done]]


@dataclass
class FakeEngine:
    script: Script
    model_id: str = "fake"
    slow_prefill: tuple[str, ...] = ()  # prompts whose warm-up runs until it is stopped
    calls: list[Call] = field(default_factory=list)
    prefills: list[tuple[str, str]] = field(default_factory=list)
    steps_run: int = 0
    running: threading.Event = field(default_factory=threading.Event)  # a generation is under way
    context_digest: str = ""
    config: object = None  # (no EngineConfig: the service uses the default prompt windows)
    last_context: tuple[str, ...] = ()
    guidance: object = None
    log: list[tuple[str, str]] = field(default_factory=list)  # ("context", digest) / ("complete", prefix)
    ended: list[str] = field(default_factory=list)  # each call's finish reason, once it returned
    held: tuple[str, str] | None = None  # the window the KV would hold whole (a full-window run, a warm-up)
    doubts: tuple[tuple[int, float], ...] = ()  # every completion's (offset, probability) doubts
    prompt_pass_s: float | None = None  # what prefill_seconds says of every full window (None: not measured)

    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token=None) -> tuple[list[Completion], Timings]:
        params = params or GenParams()
        self.calls.append(Call(prefix, suffix, params))
        self.log.append(("complete", prefix))
        self.running.set()
        texts: dict[int, str] = {}
        gen = self.script(prefix, suffix, params)
        try:
            while True:
                step = next(gen)
                stopped = self._wait(step.wait, cancel, params.deadline)
                if stopped:
                    done = Done(stopped)
                    break
                texts[step.variant] = step.text
                self.steps_run += 1
                if on_token is not None:
                    on_token(step.variant, step.text)
        except StopIteration as end:
            done = end.value or Done()
        finally:
            self.running.clear()
        if done.texts is not None:
            texts = dict(enumerate(done.texts))
        self.ended.append(done.reason)
        self.held = (prefix, suffix) if done.window == "full" and done.reason != "cancelled" else None
        n = max(texts, default=0) + 1
        comps = [Completion(text=texts.get(i, ""), token_ids=[1] * max(1, len(texts.get(i, "")) // 2),
                            finish_reason=done.reason, variant=i, doubts=self.doubts) for i in range(n)]
        return comps, Timings(window=done.window)

    @staticmethod
    def _wait(seconds: float, cancel: CancelToken | None, deadline: float | None) -> str | None:
        """Sleep, stopping early at a cancel or the deadline (checked before the step too)."""
        end = time.monotonic() + seconds
        while True:
            if cancel is not None and cancel.cancelled:
                return "cancelled"
            if deadline is not None and time.monotonic() >= deadline:
                return "deadline"
            left = end - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(left, 0.002))

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> Timings | None:
        if (prefix, suffix) == self.held:
            return None  # as the engine: the KV holds this window already
        self.prefills.append((prefix, suffix))
        if prefix in self.slow_prefill:  # a long window on a slow CPU: one chunk at a time until stopped
            wait_for(lambda: cancel is not None and cancel.cancelled, float("inf"))
        if cancel is None or not cancel.cancelled:
            self.held = (prefix, suffix)
        return Timings(prompt_tokens=len(prefix), ran_tokens=len(prefix))  # a "token" a character

    def prefill_seconds(self, prefix: str, suffix: str = "") -> float | None:
        return self.prompt_pass_s

    def set_context(self, block) -> bool:
        digest = block.digest() if block is not None and block.chunks else ""
        changed, self.context_digest = digest != self.context_digest, digest
        self.log.append(("context", digest))
        return changed


# ---- scripts ------------------------------------------------------------------------------------------

def steps(n: int = 20, step_s: float = 0.01, slow: tuple[str, ...] = ()) -> Script:
    """The prefix's last character, then one "x" every ``step_s`` seconds, ``n`` of them (1000 for the
    ``slow`` prompts); ends "length"."""
    def script(prefix: str, suffix: str, params: GenParams) -> Generator[Step, None, Done]:
        text = prefix[-1:]
        for _ in range(1000 if prefix in slow else n):
            text += "x"
            yield Step(text, step_s)
        return Done("length")
    return script


def text(raw: str, delay: float = 0.0, reason: str = "eos") -> Script:
    """The same raw text for every call, after ``delay`` seconds."""
    def script(prefix: str, suffix: str, params: GenParams) -> Generator[Step, None, Done]:
        yield Step(raw, delay)
        return Done(reason)
    return script


def oracle(target: str, step_s: float = 0.005) -> Script:
    """A model that knows the file being typed: the rest of ``target`` after the prefix, two characters
    a step, ending at ``params.max_lines`` lines ("lines") or the target's end ("eos")."""
    def script(prefix: str, suffix: str, params: GenParams) -> Generator[Step, None, Done]:
        rest = target[len(prefix):] if target.startswith(prefix) else ""
        out = ""
        while len(out) < len(rest):
            out = rest[: len(out) + 2]
            if params.max_lines is not None and out.count("\n") >= params.max_lines:
                yield Step("\n".join(out.split("\n")[: params.max_lines]), step_s)
                return Done("lines")
            yield Step(out, step_s)
        return Done("eos")
    return script


# ---- the scheduler on a fake engine, without an event loop --------------------------------------------

class Rig:
    """A local worker writing into a real store; ``idle`` answers the worker's
    events.Idle the way the service does (a warm-up for ``idle_plan``, when set)."""

    def __init__(self, engine: FakeEngine | None = None, load=None, settings=None, tier: str = "local",
                 clock: Clock | None = None) -> None:
        from lsp_server.completion.events import Events, Idle, Status, Worked
        from lsp_server.completion.scheduler.worker import Worker
        from lsp_server.completion.store.store import Store
        from lsp_server.settings import Settings

        self.settings = settings or Settings()
        self.engine = engine
        self.events = Events()
        self.statuses: list[str] = []
        self.idle_calls = 0
        self.idle_plan = None  # (state, jobs.WarmUp) for the next warm-up
        self.events.on(Status, lambda e: self.statuses.append(e.state))
        self.worked: list[Worked] = []  # the accounting of each job the engine ran
        self.events.on(Worked, self.worked.append)
        self.events.on(Idle, self._idle)
        self.store = Store(lambda: self.settings, self.events)
        self.worker = Worker(load or (lambda: engine), self.store, self.events, tier, clock)
        self.store.attach(self.worker)  # (Store.submit's tickets reach it)
        self.tier = tier

    def start(self) -> Rig:
        self.worker.start()
        assert self.worker.loaded.wait(5)
        return self

    def _idle(self, event) -> None:
        self.idle_calls += 1
        plan, self.idle_plan = self.idle_plan, None
        if plan is not None:
            self.worker.warm(*plan)

    def pump(self) -> None:
        """Handle the events the worker sent (the service does this on its event loop)."""
        self.events.drain()

    def outcome(self, state, timeout: float = 5.0):
        """How the work for ``state`` ended (its record in the store), waiting up to ``timeout``."""
        if not self.until(lambda: self.store.outcome(self.tier, state) is not None, timeout):
            raise TimeoutError(f"no outcome for {state.prefix!r}")
        return self.store.outcome(self.tier, state)

    def result(self, state, timeout: float = 5.0) -> tuple[list[Completion], Timings]:
        """The work's result; its error raised."""
        done = self.outcome(state, timeout)
        if done.error is not None:
            raise done.error
        return done.result

    def until(self, cond, timeout: float = 5.0) -> bool:
        """Handle the worker's events until ``cond()`` holds (True) or ``timeout`` passes (False)."""
        return wait_for(lambda: (self.pump(), cond())[1], timeout, every=0.002)

    def stop(self) -> None:
        self.worker.stop()


def state(uri: str, revision: int, prefix: str, suffix: str = "", params: GenParams | None = None):
    """A state with these texts (one greedy line unless ``params`` says otherwise)."""
    from lsp_server.completion.jobs import State

    return State(uri, revision, len(prefix), prefix, suffix, "single", params or GenParams())


async def until(cond: Callable[[], object], timeout: float = 5.0, every: float = 0.02, poke=None) -> None:
    """Wait (on the event loop) until ``cond()`` holds or ``timeout`` passes, checking every ``every`` seconds
    (``poke``: a coroutine function awaited after each wait, e.g. asking again); the caller asserts what it
    needs."""
    import asyncio

    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await asyncio.sleep(every)
        if poke is not None:
            await poke()


async def next_edit_whole(s, uri: str, version: int, line: int, character: int, timeout: float = 5.0) -> dict:
    """A session's ``flint/nextEdit`` answer once its plan is complete: asked again while it says ``pending``
    (the other documents' parts still coming), as a client does."""
    import asyncio

    res = await s.next_edit(uri, version, line, character)
    deadline = time.monotonic() + timeout
    while res.get("pending") and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        res = await s.next_edit(uri, version, line, character)
    assert not res.get("pending"), res
    return res


def wait_for(cond: Callable[[], object], timeout: float = 5.0, every: float = 0.01,
             poke: Callable[[], object] | None = None) -> bool:
    """Wait (blocking this thread) until ``cond()`` holds, checking every ``every`` seconds (``poke``: called
    after each wait, e.g. asking again): True, or False once ``timeout`` passed (the caller asserts it). The one
    polling loop of the tests that run no event loop."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            return bool(cond())
        time.sleep(every)
        if poke is not None:
            poke()
    return True


class Clock:
    """A clock the test moves by hand, for code that takes a ``clock`` (time.monotonic's stand-in; the
    scheduler's, lsp_server/completion/scheduler/clock.py, also sleeps on it: ``wait``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, waiter, timeout: float | None) -> None:
        """A timed sleep ends when its thread is woken or the clock is moved past its end; a Condition's also
        every 0.1 s of real time (a spurious wakeup, which its callers re-check): a notify that lands as a
        timed wait gives up is lost to that wait (CPython's Condition), and this clock's time never runs out."""
        if timeout is None:
            waiter.wait()
            return
        end, polls = self.now + timeout, 50 if isinstance(waiter, threading.Condition) else -1
        while self.now < end and polls != 0:  # (polls: a move between the sleeper's check and its sleep is not lost)
            if waiter.wait(0.002):  # woken (a Condition notified, an Event set)
                return
            polls -= 1
