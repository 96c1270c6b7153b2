"""The disk cache's entries (engine/cache/disk.py stores them): the key of a prompt, which generations are
complete enough to store, and the value format (our own JSON, not pickle: a format version, the key the
value was stored under, so a garbled or misplaced row is rejected, and per variant the text, token ids,
finish reason and doubts).

Keyed by model id, generation parameters (``GenParams.key()``) and the prompt window exactly as the engine
windows it (prefix **and** suffix, through engine/text/window.py's ``clip_window``): two prompts the engine
would see as the same text share an entry, anything else that changes the output does not. A server keys each
backend tier's answers by that backend's identity (``DiskAnswers``: lsp_server/completion/store/store.py holds
one; each tier's identity arrives as data from its engine thread when it changes, nobody asks per lookup).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from engine.text.window import clip_window, line_start
from engine.types import COMPLETE_REASONS, Completion, GenParams

FORMAT = 1  # bump when the key material or the value layout changes: old entries stop matching


def cache_key(model_id: str, params: GenParams, prefix: str, suffix: str,
              max_prefix_chars: int, max_suffix_chars: int) -> str:
    """The key for a prompt: the windows the engine would use, not the raw strings around the cursor."""
    p, s = clip_window(prefix, suffix, max_prefix_chars, max_suffix_chars)
    # a line of whitespace only is asked from its start (text.window.line_start): entries stored from a prompt
    # that ended in the indentation are not its answers
    moved = ["line start"] if line_start(p, s)[1] else []
    material = json.dumps([FORMAT, model_id, list(params.key()), p, s, *moved], ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


def is_complete(comps: Sequence[Completion]) -> bool:
    return bool(comps) and all(c.finish_reason in COMPLETE_REASONS for c in comps)


def encode(key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bytes:
    return json.dumps({"v": FORMAT, "k": key, "ms": round(gen_ms, 1),
                       "c": [{"t": c.text, "i": list(c.token_ids), "f": c.finish_reason,
                              **({"d": [list(d) for d in c.doubts]} if c.doubts else {})} for c in comps]},
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


def decode(key: str, data: Any) -> list[Completion] | None:
    """Completions from a stored value, or None when the value is not what ``put`` wrote for ``key``."""
    try:
        if not isinstance(data, bytes | bytearray):
            return None
        obj = json.loads(bytes(data).decode("utf-8", "surrogatepass"))
        if not isinstance(obj, dict) or obj.get("v") != FORMAT or obj.get("k") != key:
            return None
        out = []
        for i, c in enumerate(obj["c"]):
            text, ids, finish = c["t"], c["i"], c["f"]
            if not isinstance(text, str) or not isinstance(finish, str) or not isinstance(ids, list) or \
                    not all(isinstance(t, int) for t in ids):
                return None
            doubts = tuple((int(at), float(p)) for at, p in c.get("d", ()))
            out.append(Completion(text=text, token_ids=ids, finish_reason=finish, variant=i, source="disk",
                                  doubts=doubts))
        return out or None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


DISK_MISS_MEMORY = 64  # recent disk misses not asked again (this server fills the entries it misses)

# (model id with its context block's digest, max prefix chars, max suffix chars) of a backend tier (its
# engine thread says: lsp_server/completion/scheduler/runner.py identity_of)
Identity = tuple[str, int, int]


class Cache(Protocol):
    """What the front asks of the disk cache (disk.CompletionCache)."""

    def get(self, key: str) -> list[Completion] | None: ...

    def put(self, key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bool: ...

    def put_partial(self, key: str, comps: Sequence[Completion], gen_ms: float = 0.0) -> bool: ...

    def close(self) -> None: ...


class DiskAnswers:
    """The disk cache as a server uses it: per backend tier, keyed by that backend's identity (its model id,
    context block and prompt windows), with a short memory of keys just looked up in vain (the didChange and
    the request for one keystroke ask for the same key). ``opener(size_mb)``: the cache (disk.CompletionCache)."""

    def __init__(self, opener: Callable[[int], Cache]) -> None:
        self._opener = opener
        self._identities: dict[str, Identity] = {}  # tier -> its identity now (identify)
        self.cache: Cache | None = None
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
        self.cache = self._opener(size_mb) if size_mb > 0 else None

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
