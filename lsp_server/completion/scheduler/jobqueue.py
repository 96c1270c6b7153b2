"""What one scheduler holds (under the worker's lock) and which job runs next: per document its pending job,
newest revision and the user's state; the warm-up; the job running."""

from __future__ import annotations

from lsp_server.completion.jobs import SPECULATIVE, USER, WARM, Job, Life, State
from lsp_server.completion.policy import knobs
from lsp_server.completion.scheduler.clock import Clock


class JobQueue:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.pending: dict[str, Job] = {}  # the current state's job, per document
        self.warm: Job | None = None  # idle time: the active spot's warm-up
        self.running: Job | None = None
        self.revisions: dict[str, int] = {}  # each document's newest revision, as the loop said
        self.current: dict[str, State] = {}  # where the user is in each document (keeps tracking jobs)
        self.last_active = clock()  # the user's last action the worker heard of
        self.idle_asked = False  # idle work is asked for once per quiet period

    def touch(self) -> Job | None:
        """The user acted: a pending warm-up is pointless now, and the one running (returned) stops."""
        self.last_active = self.clock()
        self.idle_asked = False
        self.warm = None
        return self.running if self.running is not None and self.running.priority == WARM else None

    def idle_wait(self) -> tuple[float, bool]:
        """Nothing queued: how long to sleep (negative: until woken), and whether to say it is idle now (once
        per quiet period, ``knobs.IDLE_WARM_S`` after the user's last action)."""
        if self.idle_asked:
            return -1.0, False
        left = self.last_active + knobs.IDLE_WARM_S - self.clock()
        if left > 0:
            return left, False
        self.idle_asked = True
        return -1.0, True

    def idle_from(self) -> float:
        """When work nobody waits for stops: ``knobs.IDLE_WORK_S`` after the user's last action."""
        return self.last_active + knobs.IDLE_WORK_S

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

    def __len__(self) -> int:  # waiting or running
        return len(self.waiting()) + (self.running is not None)

    def joinable(self, state: State) -> Job | None:
        """A job still to finish that does ``state``'s work (running, or the document's pending one)."""
        candidates = (self.running, self.pending.get(state.uri))
        return next((j for j in candidates if j is not None and j.serves(state)), None)

    def next_job(self, now: float) -> tuple[Job | None, float]:
        """The job to run now, or None and how long until one may (negative: nothing waits). Once the user has
        gone (``knobs.IDLE_WORK_S``) only what a request waits for runs."""
        jobs = self.waiting()
        if now >= self.idle_from():
            jobs = [j for j in jobs if not j.idle_work]
        ready = [j for j in jobs if j.not_before <= now]
        if ready:
            return min(ready, key=lambda j: (j.priority, j.seq)), 0.0
        if jobs:
            return None, min(j.not_before for j in jobs) - now
        return None, -1.0

    def put(self, job: Job) -> list[Job]:
        """``job`` is its document's pending job now; returned, what it replaces (Superseded): the pending one,
        and the one running when a newer request replaces a request's (the editor asked again at once)."""
        old = self.pending.pop(job.state.uri, None)
        replaced = [old] if old is not None else []
        r = self.running
        if job.priority == USER and r is not None and r.state.uri == job.state.uri and r.waiters and \
                not r.cancel.cancelled:
            replaced.append(r)
        if job.priority == USER:
            job.waiters = 1
        self.pending[job.state.uri] = job
        return replaced

    def take(self, job: Job) -> None:
        if not self.remove(job) and job is self.warm:
            self.warm = None
        self.running = job

    def older(self, uri: str, revision: int) -> list[Job]:
        """The document's jobs made for a revision before ``revision`` (the running one last)."""
        jobs = [j for j in (self.pending.get(uri),) if j is not None and j.state.revision < revision]
        r = self.running
        if r is not None and r.state.uri == uri and r.state.revision < revision and not r.cancel.cancelled:
            jobs.append(r)
        return jobs

    def remove(self, job: Job) -> bool:
        """A pending job out; False when it was not pending."""
        if self.pending.get(job.state.uri) is not job:
            return False
        del self.pending[job.state.uri]
        return True

    def clear(self) -> list[Job]:
        jobs = self.waiting()
        self.pending.clear()
        self.warm = None
        return jobs

    def outranked(self, job: Job) -> str | None:
        """Why the running job stops for ``job`` (None: it goes on): replaced (the same document, unless kept
        through the edit for this very text), outranked, or unwaited speculation in another document."""
        r = self.running
        if r is None or r.cancel.cancelled:
            return None
        if r.state.uri == job.state.uri and r.life is Life.TRACKING and r.state.revision == job.state.revision:
            return None
        if r.state.uri == job.state.uri and r.priority <= SPECULATIVE:
            return "superseded"
        if r.priority != USER and (job.priority < r.priority or (job.priority <= SPECULATIVE and not r.waiters)):
            return "preempted"
        return None
