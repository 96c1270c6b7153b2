"""The disk cache as a server uses it (lsp_server/completion/store/store.py holds one): the on-disk cache
shared by every server on the machine (disk.py), keyed per backend tier by that backend's identity (its model
id, context block and prompt windows: entries.cache_key), and a short memory of keys just looked up in vain
(the didChange and the request for one keystroke ask for the same key).

Each tier's identity arrives as data (``identify``), from its engine thread when it changes (a model
loaded, another context block admitted): nobody asks for it per lookup."""

from __future__ import annotations

import threading
from collections import OrderedDict

from engine.cache.disk import CompletionCache, is_complete
from engine.cache.entries import cache_key
from engine.types import Completion, GenParams

DISK_MISS_MEMORY = 64  # recent disk misses not asked again (this server fills the entries it misses)

# (model id with its context block's digest, max prefix chars, max suffix chars) of a backend tier (its
# engine thread says: lsp_server/completion/scheduler/hooks.py identity_of)
Identity = tuple[str, int, int]


class DiskAnswers:
    def __init__(self) -> None:
        self._identities: dict[str, Identity] = {}  # tier -> its identity now (identify)
        self.cache: CompletionCache | None = None
        self._misses: OrderedDict[str, None] = OrderedDict()  # keys just looked up in vain
        self._lock = threading.Lock()  # the engine threads look up and fill entries too

    def identify(self, tier: str, identity: Identity | None) -> None:
        """(a tier's engine thread) What its answers are keyed by from now on (None: no model loaded)."""
        if identity is None:
            self._identities.pop(tier, None)
        else:
            self._identities[tier] = identity

    def open(self, size_mb: int) -> None:
        self.close()
        self.cache = CompletionCache(size_mb=size_mb) if size_mb > 0 else None

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    def key(self, prefix: str, suffix: str, params: GenParams, tier: str = "local") -> str | None:
        """The disk entry's key: the backend's model id is part of it (local and remote never mix)."""
        ident = self._identities.get(tier)
        if self.cache is None or ident is None or not ident[0]:
            return None
        model_id, max_p, max_s = ident
        return cache_key(model_id, params, prefix, suffix, max_p, max_s)

    def get(self, prefix: str, suffix: str, params: GenParams, tier: str = "local") -> list[Completion] | None:
        key = self.key(prefix, suffix, params, tier)
        cache = self.cache
        if key is None or cache is None:
            return None
        with self._lock:
            if key in self._misses:
                return None
        found = cache.get(key)
        if found is None:
            with self._lock:
                self._misses[key] = None
                if len(self._misses) > DISK_MISS_MEMORY:
                    self._misses.popitem(last=False)
        return found

    def save(self, prefix: str, suffix: str, params: GenParams, tier: str, comps: list[Completion],
             ms: float) -> None:
        """A finished generation onto disk (a greedy one cut off too, as a start: cache.put_partial)."""
        cache = self.cache
        if not comps or cache is None or not (is_complete(comps) or params.temperature == 0):
            return
        key = self.key(prefix, suffix, params, tier)
        put = cache.put if is_complete(comps) else cache.put_partial
        if key is not None and put(key, comps, ms):
            with self._lock:
                self._misses.pop(key, None)
