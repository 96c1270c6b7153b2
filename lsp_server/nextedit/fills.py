"""The model's argument at jump targets, in the server (issue 50; engine/edits/fill.py says what).

After a plan with jump targets is made (a parameter added without a default: where each call needs the new
argument), a ``FillRun`` asks the model for the argument at one target at a time, the one nearest after
the cursor first, and files each answer in the plan (``Part.planned``: it travels with the jump as the
user applies or writes at the others). A ``flint/nextEdit`` whose first offer is a jump whose argument is
not written yet answers at once with the jump alone and ``pending`` (a prompt pass takes a second or more
on two cores; the jump itself is known at once): the client asks again and shows the argument when it
comes, or keeps the jump alone when the model was unsure (below ``fill.FLOOR``) or had nothing.

The model runs on the engine's own thread: ``WorkerFiller`` hands the prompt to the completion service's
local worker as a state of the document (its current revision: an edit stops it, as it stops any stale
generation) at a request's priority (speculation's is stopped by the idle watchdog before a cold
prompt pass ends), so a completion the user asks for in that document replaces it; it waits for its
outcome in the store, as a completion request does. A hook in lsp_server/completion would be neater: a
``fill(uri, revision, prefix, suffix, params)`` that runs one prompt on the local tier at the lowest
priority a user waits for, without the type-through and disk entries (see docs/next_edits.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from engine.edits import fill
from engine.edits.common import NextEdit, by_cursor
from engine.edits.fill import FILL_PARAMS, answer, fill_prompt
from engine.edits.plan import unapplied
from engine.edits.scope import SCOPE_WAIT_S, question
from engine.types import Doubts
from lsp_server.documents import uri_path
from lsp_server.nextedit.records import Signature

if TYPE_CHECKING:
    from lsp_server.documents import DocumentStore
    from lsp_server.nextedit.records import Part, Plan

__all__ = ["FillRun", "FillRuns", "Filler", "Signature", "WorkerFiller", "untried"]


class Owner(Protocol):
    """What a fill run reads of the next-edit service that started it (service.py's NextEdits)."""

    documents: DocumentStore
    filler: Filler | None
    plan: Plan | None

    def part(self, uri: str) -> Part | None: ...

    def cursor(self, uri: str) -> int: ...

    def analyser(self) -> Any: ...

log = logging.getLogger(__name__)

FILL_BUDGET_S = 4.0  # one argument's generation, from when it starts (a cold prompt pass included)
MAX_FILLS = 16  # arguments asked for in one plan (many call sites: the nearest ones)
MAX_DROPS = 4  # a target's generation replaced by other work this often: the run stops
DROP_PAUSE_S = 0.2  # before asking again (the work that replaced it starts at once)

# (uri, revision, prefix, suffix) -> the model's (text, doubts, finish reason), or None (no model); Dropped:
# the document changed, or other work for it replaced the generation (asked again either way)
Filler = Callable[[str, int, str, str], Awaitable[tuple[str, Doubts, str] | None]]


class Dropped(Exception):
    """The argument's generation was replaced by other work for its document (the spot a cursor move or a
    file's opening starts): asking again is worth it."""


def untried(jump: NextEdit) -> bool:
    """A jump target whose argument the model has not been asked for yet."""
    return jump.jump and jump.fill is not None and jump.fill.confidence is None


class FillRun:
    """The arguments of one plan's jump targets in ``uri`` (the plan's part made from ``base``)."""

    def __init__(self, owner: Owner, filler: Filler, uri: str, base: str, sig: Signature,
                 on_end: Callable[[], None] | None = None) -> None:
        self.owner, self.filler, self.uri, self.base, self.sig = owner, filler, uri, base, sig
        self.on_end = on_end  # (the service starts the next document's run: one at a time)
        self.over = False
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    def cancel(self) -> None:
        self.on_end = None  # stopped by the service: it says what runs next
        if self.task is not None:
            self.task.cancel()
        self._end()

    def _end(self) -> None:
        if self.over:
            return
        self.over = True
        if self.on_end is not None:
            asyncio.get_running_loop().call_soon(self.on_end)

    def _part(self) -> Any:
        part = self.owner.part(self.uri)
        return part if part is not None and part.base is self.base else None

    def _next(self, part: Any) -> int | None:
        """The index in ``part.planned`` of the untried jump nearest after the user's cursor."""
        left = unapplied(part.base, part.planned, part.text) or []
        jumps = [e for _, e in left if untried(e)]
        if not jumps:
            return None
        first = by_cursor(jumps, self.owner.cursor(self.uri))[0]
        return next(i for i, e in left if e is first)

    async def _names(self, jump: NextEdit) -> list[str]:
        """The caller's own names in scope at ``jump`` (engine/edits/scope.py), from jedi on its thread; []
        when jedi is slow or fails (the prompt goes without them)."""
        path, at = uri_path(self.uri), jump.range_start
        try:
            a = self.owner.analyser()
            q = question(self.base, at, fill.def_line(self.base, at), lead=jump.fill.lead if jump.fill else "",
                         path=str(path) if path else None, analyser=a)
            names: list[str] = await asyncio.wait_for(asyncio.wrap_future(a.submit(q)), SCOPE_WAIT_S)
            return names
        except Exception:  # (a timeout included)
            return []

    async def run(self) -> None:
        try:
            drops = 0
            for _ in range(2 * MAX_FILLS + MAX_DROPS):  # a dropped generation is asked again
                part = self._part()
                i = self._next(part) if part is not None else None
                if i is None or sum(not untried(e) and e.jump for e in part.planned) >= MAX_FILLS:
                    return
                jump = part.planned[i]
                names = await self._names(jump) if fill.SCOPE_NAMES else []
                prefix, suffix = fill_prompt(self.base, jump, self.sig.text, def_at=self.sig.def_at, names=names)
                revision = self.owner.documents.revision(self.uri)
                t0 = time.monotonic()
                try:
                    got = await self.filler(self.uri, revision or 0, prefix, suffix)
                except Dropped:
                    if self.owner.documents.revision(self.uri) == revision:  # replaced, not stale
                        drops += 1
                        if drops > MAX_DROPS:
                            return
                        await asyncio.sleep(DROP_PAUSE_S)
                    continue
                part = self._part()
                if part is None:
                    return
                if got is None:
                    if self.owner.documents.revision(self.uri) == revision:
                        return  # no model (or it failed): the jumps stay as they are
                    continue  # the document changed under it: ask again at the new revision
                # (on jedi's thread, as every ast.parse of next edits: engine/edits/common.py parse_on)
                after = self.base[jump.range_start:jump.range_start + 200]
                check = partial(answer, jump, *got, after=after, text=self.base)  # (bound.py: its names)
                done = await asyncio.wrap_future(self.owner.analyser().submit(check))
                log.debug("argument at %d: %r (p=%.2f) in %.0f ms", jump.range_start, got[0][:40],
                          done.fill.confidence if done.fill else 0.0, (time.monotonic() - t0) * 1000)
                part.planned[i] = done
                left = unapplied(part.base, part.planned, part.text)
                if left is not None:
                    part.edits = [e for _, e in left]
        except Exception as e:  # a bug here must not cost the user the jumps themselves
            log.warning("next edit arguments failed on %s: %r", self.uri, e)
        finally:
            self._end()


class FillRuns:
    """The plan's fill runs by document: one under way at a time (the plan's origin first, then the open
    documents by URI; a file on disk once it is opened), and the document the user asks in at once."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.runs: dict[str, FillRun] = {}

    def start(self, uri: str) -> None:
        """Have the model write the arguments at ``uri``'s jump targets (the plan's part there), unless a run
        for that part is under way or done."""
        o = self.owner
        plan, part = o.plan, o.part(uri)
        if plan is None or part is None or plan.sig is None or o.filler is None or part.on_disk:
            return
        run = self.runs.get(uri)
        if (run is not None and run.base is part.base) or not any(untried(e) for e in part.planned):
            return
        self.stop(uri)
        # another document's window never holds the def: its signature always goes in front as a stub
        sig = plan.sig if uri == plan.origin else Signature(plan.sig.text, -1)
        run = self.runs[uri] = FillRun(o, o.filler, uri, part.base, sig, on_end=self.next)
        run.start()

    def next(self) -> None:
        """Start the next document's run, if none is under way."""
        plan = self.owner.plan
        if plan is None or plan.sig is None or any(not r.over for r in self.runs.values()):
            return
        for uri in [plan.origin] + sorted(u for u in plan.parts if u != plan.origin):
            part = plan.parts.get(uri)
            if part is None or part.on_disk or self.owner.documents.revision(uri) != part.revision:
                continue
            run = self.runs.get(uri)
            if (run is None or run.base is not part.base) and any(untried(e) for e in part.planned):
                self.start(uri)
                return

    def stop(self, uri: str) -> None:
        run = self.runs.pop(uri, None)
        if run is not None:
            run.cancel()

    def stop_all(self) -> None:
        for uri in list(self.runs):
            self.stop(uri)


class WorkerFiller:
    """A ``Filler`` on the completion service's local worker (module docstring)."""

    def __init__(self, service: Any) -> None:
        self.service = service

    async def __call__(self, uri: str, revision: int, prefix: str, suffix: str) -> tuple[str, Doubts, str] | None:
        from lsp_server.completion.jobs import State

        state = State(uri, revision, -1, prefix, suffix, "single", FILL_PARAMS, route="local")
        got = await self._ask(state, anew=False)
        if got is not None and got[2] in ("cancelled", "partial"):
            # the store's text of an earlier generation of this prompt that other work stopped (a cursor move's
            # speculation replaced it): not the model's answer; the model writes it again
            got = await self._ask(state, anew=True)
        return got

    async def _ask(self, state: Any, anew: bool) -> tuple[str, Doubts, str] | None:
        from lsp_server.completion.jobs import JobDropped, Work
        from lsp_server.completion.policy.planner import Waiting

        store, uri = self.service.store, state.uri
        since = time.monotonic()
        # a request's priority: speculation's is stopped 1.5 s after the user's last keystroke (the worker's
        # idle watchdog), and a cold prompt pass can take longer; a completion the user asks for in this
        # document still replaces it (one job per document), in another it waits at most FILL_BUDGET_S
        ticket = store.submit(state, Work(budget_s=FILL_BUDGET_S, anew=anew))
        try:
            waited = await ticket.wait(Waiting(since + FILL_BUDGET_S + 2.0, None, since))
        except asyncio.CancelledError:
            ticket.release()
            raise
        except JobDropped as e:  # stale, or replaced by other work for the document (the run tells which)
            raise Dropped from e
        except Exception as e:  # no engine
            log.debug("argument for %s not written: %r", uri, e)
            return None
        finally:
            ticket.detach()
        ans = waited.answer
        if ans is None or not ans.comps:
            return None
        c = ans.comps[0]
        return c.text, c.doubts, c.finish_reason
