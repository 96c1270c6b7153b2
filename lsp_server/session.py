"""The server's state as the protocol sees it, with no LSP types (lsp_server/protocol/handlers.py adapts to pygls).

After ruff_server's ``Session``: the event loop mutates documents and settings; each request takes a
read-only snapshot (an immutable ``str`` plus its revision). The session keeps documents (documents.py),
settings, the status board (status.py), telemetry (stats.py), the repository context it feeds when on
(context.py) and item building; what runs when is the completion service's (docs/architecture.md).

Where an answer comes from, cheapest first (the ``source`` reported on items and in flint/status):

1. ``memory`` / ``type-through``: a generation already made (or streaming) for this state, or for an
   earlier state whose text the user has typed since (engine/cache/typethrough.py).
2. ``disk``: the on-disk cache shared by every server on the machine (engine/cache/disk.py).
3. ``model``: the engine. Usually already running: ``did_change`` starts the work for the cursor before
   the editor asks, and a request joins it.

Each request has a deadline: then it gets what exists (possibly a partial suggestion, or none) and the
generation goes on, so the next ask (the next keystroke) is answered from it; idle time warms the KV cache
for the active document. The ``speculation`` setting switches all of that off (every request is then its
own model call, with only the exact-repeat memory and the disk cache).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from engine.guidance.jedi_analyser import forget_parsed
from engine.guidance.service import set_workspace_roots
from engine.remote.client import RemoteBackend
from engine.remote.connection import Until
from lsp_server import convert
from lsp_server.capable import load_remote, tier_key
from lsp_server.completion import Answer, CompletionService, Load, State, Worked, Worker, planner
from lsp_server.context import RepoContext
from lsp_server.documents import Change, Document, DocumentError, DocumentStore, uri_path
from lsp_server.errors import RequestError, request_error
from lsp_server.gatekeeper import GateKeeper
from lsp_server.items import Item, Suggestions, build_items, gate_on, stamp_latency
from lsp_server.logs import register_secret
from lsp_server.nextedit.fills import WorkerFiller
from lsp_server.nextedit.service import Found, NextEdits, to_json
from lsp_server.settings import Settings
from lsp_server.stats import Shown, Stats, work_name
from lsp_server.status import StatusBoard

log = logging.getLogger(__name__)


class Session:
    def __init__(self, load: Load, settings: Settings | None = None,
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 load_remote: Load = load_remote,
                 on_refresh: Callable[[str, int], None] | None = None) -> None:
        self.settings = settings or Settings()
        self.encoding = convert.UTF16
        self.documents = DocumentStore()
        self.stats = Stats()
        self._loaded_key = self.settings.engine_key()
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid():x}"
        self.shown = Shown(self.stats)
        self.gate = GateKeeper.shipped()  # the learned gate on automatic answers (issue 49)
        # speculate on didChange once the client has shown it asks for suggestions as the user types
        self.speculate = False
        self.board = StatusBoard(lambda: self.settings, lambda tier: self.service.engine(tier), on_status)
        self.context = RepoContext(lambda: self.settings, lambda: self.service.windows())
        self._load_remote = load_remote
        self.service = CompletionService(lambda: self.settings, load, self._load_capable, self.documents.revision,
                                         self.board.scheduler, on_refresh or (lambda uri, version: None),
                                         context=self.context.block_for)
        self.service.events.on(Worked, self.stats.worked)
        self.service.store.disk.open(self.settings.cache_size_mb)
        register_secret(self.settings.remote_api_key)
        self.next_edits = NextEdits(self.documents, lambda: self.settings.enable,  # flint/nextEdit
                                    filler=WorkerFiller(self.service))  # arguments at jump targets: the local model

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        return self.board.status

    @property
    def ready(self) -> asyncio.Event:
        return self.board.ready

    @property
    def worker(self) -> Worker:  # the local model's scheduler (tests and the status line look at it)
        return self.service.tiers.local

    @property
    def remote_worker(self) -> Worker | None:
        return self.service.tiers.remote

    @property
    def disk(self):
        return self.service.store.disk.cache

    def start(self) -> None:
        """Start loading the model now (process start), before the client even says hello."""
        self.service.tiers.start()

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.service.events.attach_loop(loop)
        self.next_edits.attach_loop(loop)

    def shutdown(self) -> None:
        self.next_edits.shutdown()
        self.service.tiers.shutdown()
        self.service.store.disk.close()
        self.stats.flush()
        self.gate.flush()

    def _load_capable(self, settings: Settings) -> object:
        """(the capable tier's thread) Its backend; the default loader's model check gives up the moment
        newer settings replace these (the event loop then never waits for it)."""
        if self._load_remote is not load_remote:
            return self._load_remote(settings)  # (a test's loader)
        key = tier_key(settings)
        return load_remote(settings, cancel=Until(lambda: tier_key(self.settings) != key))

    def apply_settings(self, new: Settings) -> bool:
        """Adopt new settings; reload the model when its identity changed. Returns True on reload. Never
        waits on the capable tier: one being replaced is shut first, so what it runs ends at once."""
        old_key = self._loaded_key
        old_cache = self.settings.cache_size_mb
        register_secret(new.remote_api_key)  # before anything can log or show it
        old_tier = self.service.engine("remote")
        if tier_key(new) != tier_key(self.settings) and isinstance(old_tier, RemoteBackend):
            old_tier.shut()
        if new.context_budget > 0 >= self.settings.context_budget:  # turned on: what is open now
            self.context.opened(self.documents.documents(), self.service.docs.active)
        self.settings = new
        if new.cache_size_mb != old_cache:
            self.service.store.disk.open(new.cache_size_mb)
        if not self.service.tiers.sync_remote():
            self.board.remote(None)
        if new.engine_key() != old_key:
            self._loaded_key = new.engine_key()
            self.service.tiers.reload()
            return True
        return False

    def remote_ready(self) -> bool:
        return self.service.tiers.remote_ready()

    def set_workspace_folders(self, uris: list[str]) -> None:
        self.context.set_folders(uris)
        # monitor-guided decoding: each folder a jedi project root (engine/guidance/service.py)
        set_workspace_roots([str(p) for p in (uri_path(u) for u in uris) if p is not None])
        self.next_edits.set_roots([str(p) for p in (uri_path(u) for u in uris) if p is not None])

    # ---- documents ------------------------------------------------------------------------------
    def did_open(self, uri: str, text: str, version: int, language_id: str = "") -> None:
        self.documents.open(uri, text, version, language_id)
        self.did_change(uri)
        self.next_edits.opened(uri)

    def did_edit(self, uri: str, version: int, changes: list[Change]) -> None:
        """A didChange: applied to the document, then ``did_change`` at the cursor the edit left (a lost
        document is ignored until it is opened again). DocumentError: the edit could not be applied."""
        if uri in self.documents.lost:
            return
        if self.documents.revision(uri) is None:  # never opened (a client bug): nothing to diverge from
            log.warning("didChange for %s which is not open: ignored", uri)
            return
        edited = self.documents.edit(uri, version, changes, self.encoding)
        self.did_change(uri, self.cursor_offset(uri) if edited.same else edited.cursor)
        if self.next_edits.asked:  # (a client that never asks for next edits costs nothing per keystroke)
            self.next_edits.changed(uri)

    def did_change(self, uri: str, cursor: int | None = None) -> None:
        """After an edit (or didOpen, ``cursor`` None): the service stops stale work and, when the client
        completes as the user types, starts the work for the spot the edit left the cursor at (a code
        point offset) now; the client's request for that spot then joins it."""
        rev = self.documents.revision(uri)
        if rev is None:
            return
        doc = self.documents.get(uri)
        if self.settings.context_budget > 0:  # off (the default): nothing per keystroke
            self.context.changed(uri, doc.text, cursor is not None, self.service.docs.active)
        if cursor is not None and (gate_on(self.settings.learned_gate, doc.language_id)
                                   or self.gate.records is not None):  # off: nothing per keystroke
            self.gate.edited(uri, doc.text, cursor, time.monotonic())
        state = None
        if cursor is not None and self.settings.enable and not doc.problem():
            state = self.service.state(uri, rev, doc.text, cursor, invoked=False, language=doc.language_id)
        self.service.did_change(uri, rev, state, speculate=self.speculate)

    def did_move_cursor(self, uri: str, line: int, character: int, version: int | None = None) -> bool:
        """flint/didMoveCursor (a file opened or focused, a click, a jump): the spot's work starts before the
        first keystroke there. False when nothing started (the spot already known, or ``version`` not the
        server's text: an edit is on its way). RequestError: a document not open, a position outside it."""
        if uri in self.documents.lost:
            return False
        doc, offset = self._locate(uri, line, character)
        if version is not None and version != doc.version:
            return False
        known = self.service.docs.state(uri)
        if known is not None and known.revision == doc.revision and known.offset == offset \
                and self.service.docs.active == uri:
            return False  # typing put it there (clients also report the moves an edit makes)
        if not self.settings.enable or doc.problem():
            return False
        if self.settings.context_budget > 0:
            self.context.focus(uri)  # the context is gathered for the document the user is in
        self.gate.moved(uri)
        state = self.service.state(uri, doc.revision, doc.text, offset, invoked=False, language=doc.language_id)
        self.service.did_move(uri, state)
        return True

    def _locate(self, uri: str, line: int, character: int) -> tuple[Document, int]:
        """The open document and the code point offset of a position in it (RequestError: InvalidParams)."""
        try:
            doc = self.documents.get(uri)
        except DocumentError as e:
            raise RequestError(RequestError.INVALID_PARAMS, str(e)) from None
        try:
            return doc, doc.offset_at(line, character, self.encoding)
        except convert.PositionError as e:
            raise RequestError(RequestError.INVALID_PARAMS, f"{uri}: {e}") from None

    def cursor_offset(self, uri: str) -> int | None:
        """The offset of the last cursor known in ``uri`` (a request or an edit put it there)."""
        st = self.service.docs.state(uri)
        return st.offset if st is not None else None

    def did_close(self, uri: str) -> bool:
        """The editor closed ``uri``; False when it was lost already (forgotten then)."""
        if self.documents.lost.pop(uri, None) is not None:
            return False
        self._forget(uri, close=True)
        return True

    def lose(self, uri: str, why: str) -> bool:
        """An edit of ``uri`` could not be applied, so Flint's copy differs from the editor's: forget it
        until the editor opens it again. True the first time."""
        first = self.documents.lose(uri, why)
        self._forget(uri, close=False)
        return first

    def _forget(self, uri: str, close: bool) -> None:
        if close:
            self.documents.close(uri)
        path = uri_path(uri)
        if path is not None:
            forget_parsed(str(path))  # jedi's tree of it (it holds up every full collection of the heap)
        self.service.did_close(uri)
        self.gate.forget(uri)
        self.context.close(uri)
        self.next_edits.closed(uri)

    async def next_edit(self, uri: str, version: int | None, line: int, character: int) -> dict[str, Any]:
        """flint/nextEdit (docs/protocol.md): the next edits after the document's last edit, as JSON.
        RequestError: a document lost or not open, a position outside it."""
        if uri in self.documents.lost:
            raise RequestError(RequestError.REQUEST_FAILED, f"Flint lost track of this document's text "
                                                            f"({self.documents.lost[uri]}): close and reopen it")
        try:
            current = self.documents.get(uri).version
        except DocumentError as e:
            raise RequestError(RequestError.INVALID_PARAMS, str(e)) from None
        if version is not None and version != current:  # checked first: the position may not exist any more
            return to_json(Found(uri, current, [], stale=True), lambda off: (0, 0))
        doc, offset = self._locate(uri, line, character)
        found = await self.next_edits.ask(uri, version, offset)
        if found.edits:
            log.info("next edit %s v%d: %d (%s), ready %s ms after the edit", uri.rsplit("/", 1)[-1],
                     found.version, len(found.edits), found.edits[0].source, found.ready_ms)
        return to_json(found, lambda off: doc.position_at(off, self.encoding),
                       self.documents.find, self.encoding)

    # ---- completion -----------------------------------------------------------------------------
    async def suggest(self, uri: str, line: int, character: int, *, invoked: bool,
                      n: int | None = None, variants: bool = False) -> Suggestions:
        """Suggestions at a position. Raises RequestError for anything the client should hear about."""
        t0, since = time.perf_counter(), time.monotonic()
        if uri in self.documents.lost:
            raise RequestError(RequestError.REQUEST_FAILED, f"Flint lost track of this document's text "
                                                            f"({self.documents.lost[uri]}): close and reopen it")
        self.stats.count("requests")
        doc, offset = self._locate(uri, line, character)
        problem = doc.problem()
        if problem:
            raise RequestError(RequestError.REQUEST_FAILED, f"{uri}: {problem}")
        sid = f"{self._id_prefix}-{next(self._ids)}"
        empty = Suggestions(sid, uri, doc.version, [], "single")
        if not self.settings.enable:
            return empty
        if invoked and n is None and not variants and self.service.follow.reasked(uri, doc.version):
            invoked = False  # the client asking again on flint/refresh: the automatic answer, from the store
        self.speculate = self.speculate or not invoked  # a client that asks as the user types: start early
        if self.settings.context_budget > 0:
            self.context.focus(uri)  # asked here: the context is gathered for this document
        revision, text, version = doc.revision, doc.text, doc.version
        state = self.service.request_state(uri, revision, text, offset, invoked=invoked, n=n, variants=variants,
                                           language=doc.language_id)
        if state.skip:
            self.stats.completed(0.0, "skip", 0)
            return empty
        log.debug("suggest %s rev %d %d:%d %s n=%d", uri, revision, line, character, state.mode, state.params.n)
        answer = await self._answer(state, since, invoked)
        if self.documents.revision(uri) != revision:
            self.stats.count("stale")
            raise RequestError(RequestError.CONTENT_MODIFIED, "the document changed")
        items = self._items(answer, state, doc, offset, invoked, sid) if answer else []
        total_ms = (time.perf_counter() - t0) * 1000
        stamp_latency(items, total_ms)
        res = Suggestions(sid, uri, version, items, state.mode, round(total_ms, 1),
                          items[0].source if items else None, answer.origin if answer else None,
                          items[0].backend if items else None, complete=answer is None or answer.complete,
                          asked=state.params.n)
        self._record(res, answer)
        self._follow_up(state, answer, items, version, invoked)
        log.info("%s %s:%d:%d %s -> %d item(s) in %.0f ms [%s%s]", "invoked" if invoked else "auto",
                 uri.rsplit("/", 1)[-1], line, character, state.mode, len(items), total_ms, res.source or "-",
                 f" {res.backend}" if res.backend not in (None, "local") else "")
        return res

    def _items(self, answer: Answer, state: State, doc: Document, offset: int, invoked: bool,
               sid: str = "") -> list[Item]:
        items = build_items(answer.comps, answer.mode, state.prefix, state.suffix, text=doc.text, offset=offset,
                           cursor=doc.position_at(offset, self.encoding), eol=convert.dominant_eol(doc.text),
                           starts=doc.starts, encoding=self.encoding, max_lines=self.settings.max_lines,
                           backend=self.service.backend_name(answer.backend), language=doc.language_id,
                           cut_below=0.0 if invoked else self.settings.confidence_cut,
                           gate_below=0.0 if invoked else self.settings.confidence_gate)
        on = gate_on(self.settings.learned_gate, doc.language_id)
        if invoked or not (on or self.gate.records is not None):  # explicit requests are never gated
            return items
        return self.gate.apply(sid, state.uri, items, answer.comps, state.prefix, state.suffix, offset=offset,
                               language=doc.language_id, source=answer.source, eol=convert.dominant_eol(doc.text),
                               enabled=on, adapt=self.settings.learned_gate_adapts)

    def _record(self, res: Suggestions, answer: Answer | None) -> None:
        """Telemetry and the status board for an answer that goes out."""
        self.stats.completed(res.total_ms, res.source or "model", len(res.items))
        if res.backend is not None and res.backend != "local":
            self.stats.count("remote_answers")
        if answer is not None and "local fallback" in answer.note:
            self.stats.count("remote_fallbacks")
        entry = answer.entry if answer is not None and res.items else None
        work = work_name(answer.backend, entry.work) if answer is not None and entry is not None and entry.work else ""
        if entry is not None and work and not entry.served:
            entry.served = True  # (the accounting: this generation's CPU bought a suggestion)
            self.stats.count(f"work.{work}.served")
        self.shown.remember(res.id, res.uri, [it.text for it in res.items], work=work)
        if res.items:
            self.board.answered(res.items[0].source, res.origin or "model", res.total_ms, res.backend or "local",
                                answer.note if answer else "")

    def _follow_up(self, state: State, answer: Answer | None, items: list[Item], version: int, invoked: bool) -> None:
        """What follows the answer (planner.follow_ups: often nothing), carried out by the service."""
        plan = planner.follow_ups(self.settings, invoked=invoked, shown=bool(items),
                                  complete=answer is not None and answer.complete, quick=answer is not None and answer.quick)
        if plan != planner.FollowUps():
            self.service.follow.carry_out(plan, state, version, invoked=invoked)

    async def _answer(self, state: State, since: float, invoked: bool) -> Answer | None:
        try:
            return await self.service.answer(state, since, invoked)
        except asyncio.CancelledError:
            self.stats.count("cancelled")
            raise
        except RequestError:
            raise
        except Exception as e:
            error, counter = request_error(e)
            self.stats.count(counter)
            if counter == "errors" and "unavailable" not in error.message:
                log.error("completion failed: %r", e)
            raise error from None

    # ---- telemetry (local only: stats.py) --------------------------------------------------------
    def did_show(self, sid: str, index: int) -> bool:
        return self.shown.did_show(sid, index)

    def did_accept(self, sid: str, index: int) -> bool:
        uri = self.shown.uri_of(sid)
        if uri is not None:
            self.gate.accepted(uri)
        return self.shown.did_accept(sid, index, self.encoding)

    def did_partially_accept(self, sid: str, index: int, accepted_length: int) -> bool:
        return self.shown.did_partially_accept(sid, accepted_length)

    def maybe_flush_stats(self, every_s: float = 30.0) -> None:
        if time.monotonic() - self.stats.last_flush >= every_s:
            self.stats.flush()
            self.gate.flush()
