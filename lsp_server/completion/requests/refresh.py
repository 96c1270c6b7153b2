"""flint/refresh: the client asks again once the store holds what an answer that went out lacked.

An answer went out partial or empty while a generation for that state still runs (a line still
streaming, an explicit request's variants, the whole window after the quick one had nothing): one
watcher per document waits on the store's changes and, once a whole suggestion for a watched state is
there with the document still at it, calls ``on_refresh(uri, version)`` once; the store then answers the
client's new request at once. A newer watch for the document replaces the older one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from lsp_server.completion.jobs import State
from lsp_server.completion.requests.records import DocRecords
from lsp_server.completion.store.store import Store
from lsp_server.completion.store.tickets import Answer


class Refresher:
    def __init__(self, store: Store, docs: DocRecords, revision_of: Callable[[str], int | None],
                 on_refresh: Callable[[str, int], None]) -> None:
        self._store = store
        self._docs = docs  # each document's watcher (DocRecord.watcher)
        self._revision_of = revision_of
        self._on_refresh = on_refresh

    def watch(self, watched: list[State], version: int, within: float) -> None:
        """(event loop) Refresh ``watched[0]``'s document when any of ``watched`` has a whole suggestion
        within ``within`` seconds; stop when all of them finished with nothing, or the document moved on."""
        record = self._docs[watched[0].uri]
        if record.watcher is not None:
            record.watcher.cancel()
        record.watcher = asyncio.get_running_loop().create_task(self._when_done(watched, version, within))

    async def _when_done(self, watched: list[State], version: int, within: float) -> None:
        state = watched[0]
        gone = Answer([], "memory", state.mode, complete=True)  # moved on, or finished with nothing to show

        def done() -> Answer | None:
            if self._revision_of(state.uri) != state.revision:
                return gone
            found = [self._store.lookup(st, None, partial=False, disk=False) for st in watched]
            whole = next((f for f in found if f is not None and f.complete and f.comps), None)
            if whole is not None:
                return whole
            return gone if all(f is not None and f.complete for f in found) else None

        found = await self._store.wait(lambda now: done(), time.monotonic() + within)
        if found is not None and found is not gone:
            self._on_refresh(state.uri, version)
