"""What one scheduler holds, and which job runs next (the worker's lock guards it; worker.py moves jobs
through it): the pending job per document (its current state), the idle warm-up, the job running, and per
document its newest revision and where the user is (what a job kept through an edit must agree with)."""

from __future__ import annotations

from lsp_server.completion.jobs import SPECULATIVE, USER, Job, Life, State


class JobQueue:
    def __init__(self) -> None:
        self.pending: dict[str, Job] = {}  # the current state's job, per document
        self.warm: Job | None = None  # idle time: the active spot's warm-up
        self.running: Job | None = None
        self.revisions: dict[str, int] = {}  # each document's newest revision, as the loop said
        self.current: dict[str, State] = {}  # where the user is in each document (keeps tracking jobs)

    def heard(self, state: State) -> None:
        """Work for ``state``: its document is at its revision at least."""
        self.revisions[state.uri] = max(self.revisions.get(state.uri, 0), state.revision)

    def follow(self, uri: str, current: State | None) -> None:
        if current is None:
            self.current.pop(uri, None)
        else:
            self.current[uri] = current

    def waiting(self) -> list[Job]:
        return [*self.pending.values(), *([self.warm] if self.warm else [])]

    def __len__(self) -> int:
        """Jobs waiting or running."""
        return len(self.waiting()) + (self.running is not None)

    def joinable(self, state: State) -> Job | None:
        """A job still to finish that does ``state``'s work (running, or the document's pending one)."""
        candidates = (self.running, self.pending.get(state.uri))
        return next((j for j in candidates if j is not None and j.serves(state)), None)

    def next_job(self, now: float, user_gone: bool) -> tuple[Job | None, float]:
        """The job to run now, or None and how long until one may start (negative: nothing waits). Once
        the user has gone (``user_gone``) only what a request waits for runs."""
        jobs = self.waiting()
        if user_gone:
            jobs = [j for j in jobs if not j.idle_work]
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
        elif job is self.warm:
            self.warm = None
        self.running = job

    def older(self, uri: str, revision: int) -> list[Job]:
        """The document's jobs made for a revision before ``revision`` (the running one last)."""
        jobs = [j for j in (self.pending.get(uri),) if j is not None and j.revision < revision]
        r = self.running
        if r is not None and r.uri == uri and r.revision < revision and not r.cancel.cancelled:
            jobs.append(r)
        return jobs

    def remove(self, job: Job) -> None:
        """A waiting job out (it is dropped)."""
        if self.pending.get(job.uri) is job:
            del self.pending[job.uri]

    def clear(self) -> list[Job]:
        """Every waiting job out (they are dropped)."""
        jobs = self.waiting()
        self.pending.clear()
        self.warm = None
        return jobs

    def outranked(self, job: Job) -> str | None:
        """Why the running job stops for ``job`` (None: it goes on): ``job`` replaces it (the same document,
        unless it was kept through the last edit for this very text), or outranks it, or it is speculation
        nobody waits for in another document while the user works in this one."""
        r = self.running
        if r is None or r.cancel.cancelled:
            return None
        if r.uri == job.uri and r.life is Life.TRACKING and r.revision == job.revision:
            return None
        if r.uri == job.uri and r.priority <= SPECULATIVE:
            return "superseded"
        if r.priority != USER and (job.priority < r.priority or (job.priority <= SPECULATIVE and not r.waiters)):
            return "preempted"
        return None
