"""What one scheduler holds, and which job runs next (the worker's lock guards it; worker.py moves jobs
through it): the pending job per document (its current state), the futures (states the user may reach
next), the idle warm-up, and the job running."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lsp_server.completion.jobs import SPECULATIVE, USER, Job, State


class JobQueue:
    def __init__(self) -> None:
        self.pending: dict[str, Job] = {}  # the current state's job, per document
        self.futures: list[Job] = []  # pre-generation for states the user may reach next
        self.warm: Job | None = None  # idle time: the active spot's warm-up
        self.running: Job | None = None

    def waiting(self) -> list[Job]:
        return [*self.pending.values(), *self.futures, *([self.warm] if self.warm else [])]

    def __len__(self) -> int:
        """Jobs waiting or running."""
        return len(self.waiting()) + (self.running is not None)

    def job_for(self, state: State) -> Job | None:
        """The job (running or waiting) whose result answers ``state``."""
        return next((j for j in (self.running, *self.pending.values(), *self.futures)
                     if j is not None and not j.ended and j.state.serves(state)), None)

    def joinable(self, state: State, *, pending: bool = True) -> Job | None:
        """A job still to finish that does ``state``'s work (running, the document's pending one, a future)."""
        candidates = (self.running, self.pending.get(state.uri) if pending else None, *self.futures)
        return next((j for j in candidates if j is not None and j.serves(state)), None)

    def next_job(self, now: float, user_gone: bool) -> tuple[Job | None, float]:
        """The job to run now, or None and how long until one may start (negative: nothing waits). Once
        the user has gone (``user_gone``) only what a request waits for runs."""
        jobs = self.waiting()
        if user_gone:
            jobs = [j for j in jobs if j.waiters or j.awaited]
        ready = [j for j in jobs if j.not_before <= now]
        if ready:
            return min(ready, key=lambda j: (j.priority, j.seq)), 0.0
        if jobs:
            return None, min(j.not_before for j in jobs) - now
        return None, -1.0

    def take(self, job: Job) -> None:
        """``job`` starts: out of the waiting ones."""
        if self.pending.get(job.uri) is job:
            del self.pending[job.uri]
        elif job in self.futures:
            self.futures.remove(job)
        elif job is self.warm:
            self.warm = None
        self.running = job

    def older(self, uri: str, revision: int) -> list[Job]:
        """The document's jobs made for a revision before ``revision`` (the running one last)."""
        jobs = [j for j in (self.pending.get(uri), *self.futures) if j is not None and j.revision < revision]
        r = self.running
        if r is not None and r.uri == uri and r.revision < revision and not r.cancel.cancelled:
            jobs.append(r)
        return jobs

    def remove(self, job: Job) -> None:
        """A waiting job out (it is dropped)."""
        if self.pending.get(job.uri) is job:
            del self.pending[job.uri]
        elif job in self.futures:
            self.futures.remove(job)

    def plan_futures(self, states: Sequence[State], not_before: float,
                     new: Callable[[State], Job]) -> tuple[list[Job], list[Job]]:
        """The futures for these states, best first: a future already queued or running for a state is
        kept (still waiting for the pause), else ``new(state)`` queues one. Returns (the new jobs, the
        futures planned before and not kept: they are dropped)."""
        keep: list[Job] = []
        added: list[Job] = []
        for st in states:
            same = self.joinable(st, pending=False)
            if same is None:
                added.append(new(st))
                keep.append(added[-1])
            elif same is not self.running:
                same.not_before = max(same.not_before, not_before)
                keep.append(same)
        old, self.futures = self.futures, keep
        return added, [j for j in old if j not in keep]

    def clear(self) -> list[Job]:
        """Every waiting job out (they are dropped)."""
        jobs = self.waiting()
        self.pending.clear()
        self.futures.clear()
        self.warm = None
        return jobs

    def outranked(self, job: Job) -> str | None:
        """Why the running job stops for ``job`` (None: it goes on): ``job`` replaces it (the same document,
        unless it was kept through the last edit for this very text), or outranks it, or it is speculation
        nobody waits for in another document while the user works in this one."""
        r = self.running
        if r is None or r.cancel.cancelled:
            return None
        if r.uri == job.uri and r.tracking and r.revision == job.revision:
            return None
        if r.uri == job.uri and r.priority <= SPECULATIVE:
            return "superseded"
        if r.priority != USER and (job.priority < r.priority or (job.priority <= SPECULATIVE and not r.waiters)):
            return "preempted"
        return None
