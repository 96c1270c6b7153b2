"""``StoreHooks``: how one backend's scheduler (worker.Worker) writes into the store. Every outcome of every
job goes through here: the tokens a generation streams (its type-through entry), how the job ended
(``Store.ended``: a result or an error), the disk cache and its identity. It reads only thread-safe things
(the store) and the data the scheduler hands it (the job, with its settings snapshot; the engine, when it
changes); what a capable-tier generation made goes up as an event (events.RemoteDone), never as a call
into the service.
"""

from __future__ import annotations

import time

from engine.backends import Backend
from engine.cache.front import Identity
from engine.cache.typethrough import Entry, anchor_of
from engine.policy import routing
from engine.types import Doubts, Timings
from lsp_server.completion.events import Events, RemoteDone
from lsp_server.completion.jobs import USER, Job, Result, State
from lsp_server.completion.policy import knobs
from lsp_server.completion.store.store import Store


class StoreHooks:
    def __init__(self, store: Store, tier: str = "local", events: Events | None = None) -> None:
        self.store = store
        self.tier = tier  # whose worker these hooks serve: local | remote
        self._events = events

    # ---- with the scheduler's lock held ---------------------------------------------------------
    def queued(self, job: Job) -> None:
        self.store.queued(self.tier, job)

    def repeat(self, job: Job) -> bool:
        work = self.store.repeat(self.tier, job)
        if work is not None and job.priority == USER:
            self._remote_done(job, work.result)  # asked again: a race or a pause hears the answer again
        return work is not None

    def ended(self, job: Job, result: Result | None, error: BaseException | None) -> None:
        self.store.ended(self.tier, job, result, error)
        self._remote_done(job, result)

    def _remote_done(self, job: Job, result: Result | None) -> None:
        comps = result[0] if result is not None else None
        if self.tier == "remote" and comps and any(c.text for c in comps) and self._events is not None:
            self._events.put(RemoteDone(job.state, comps, time.monotonic()))  # a race's or a pause's

    def forget(self) -> None:
        self.store.forget(self.tier)

    def identify(self, engine: Backend | None) -> None:
        """(engine thread) The tier's engine changed (loaded, unloaded, another context block): the disk
        cache keys its answers by what it is now."""
        self.store.disk.identify(self.tier, identity_of(engine))

    def keep(self, job: Job, running: bool, current: State) -> bool:
        """Does a job made for an older revision still serve the document's new state ``current``? A
        running generation the user typed through so far does (once it has streamed text)."""
        if self.tier == "remote" and job.settings.routing == routing.PAUSE:
            return False  # the pause is over: the capable model leaves both cores to the keystrokes
        entry = job.handle
        if running and isinstance(entry, Entry) and self.store.consistent(entry, current.prefix, current.suffix):
            # a local one still in its prompt pass has written nothing the typing could agree with: the
            # newest state starts instead, on the KV this one computed (a keystroke appends to it). A remote
            # one is kept: starting again there costs a whole round trip
            return self.tier != "local" or entry.max_len > 0 or \
                (current.prefix, current.suffix) == (job.prefix, job.suffix)
        return False

    # ---- the engine thread ----------------------------------------------------------------------
    def answer(self, job: Job) -> Result | None:
        """The store's complete answer for the job's state, filled since it was queued (typed through,
        disk): then no model call."""
        found = self.store.lookup(job.state, since=None, partial=False, backend=self.tier, settings=job.settings)
        if found is None or not found.complete:
            return None
        return found.comps, Timings()

    def started(self, job: Job) -> None:
        if not job.settings.speculation:  # (with speculation off nothing is typed through)
            return
        key = (*job.params.key(), self.tier)
        if self.tier == "remote" and job.settings.routing in (routing.RACE, routing.PAUSE):
            # a race's (or a pause's) remote generation stays out of sight until it wins (race.py,
            # pause.py); its entry is kept aside only to tell whether the user's typing agrees with it
            job.handle = Entry(*anchor_of(job.prefix), job.suffix, job.params.n, key)  # (answers nothing)
            return
        job.handle = self.store.open(job.prefix, job.suffix, job.params.n, key, work=job.account)

    def token(self, job: Job, index: int, text: str, doubts: Doubts = ()) -> None:
        entry = job.handle
        if isinstance(entry, Entry):
            self.store.stream(entry, index, text, doubts)

    def finished(self, job: Job, result: Result | None, ms: float) -> None:
        entry = job.handle
        comps = result[0] if result is not None else None
        if isinstance(entry, Entry):
            if comps is None and self.tier == "remote":
                self.store.discard(entry)  # a failed remote stream: the local fallback answers instead
            else:
                self.store.finish(entry, comps, result[1].window if result is not None else "full")
        if comps and result is not None and result[1].window != "quick":  # not what the full window says
            self.store.disk.save(job.prefix, job.suffix, job.params, self.tier, comps, ms)


def identity_of(engine: Backend | None) -> Identity | None:
    """The disk cache's identity of a backend's answers: its model, context block and prompt windows (None:
    not loaded). A suggestion made with another context block is another entry."""
    if engine is None or not engine.model_id:
        return None
    cfg = engine.config
    windows = (cfg.max_prefix_chars, cfg.max_suffix_chars) if cfg is not None else \
        (knobs.MAX_PREFIX_CHARS, knobs.MAX_SUFFIX_CHARS)
    digest = engine.context_digest
    return (f"{engine.model_id}+context:{digest}" if digest else engine.model_id, *windows)
