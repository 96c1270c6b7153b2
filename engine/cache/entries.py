"""The disk cache's entries (engine/cache/disk.py stores them): the key of a prompt, which generations are
complete enough to store, and the value format (our own JSON, not pickle: a format version, the key the
value was stored under, so a garbled or misplaced row is rejected, and per variant the text, token ids,
finish reason and doubts).

Keyed by model id, generation parameters (``GenParams.key()``) and the prompt window exactly as the engine
windows it (prefix **and** suffix, through engine/text/window.py's ``clip_window``): two prompts the engine
would see as the same text share an entry, anything else that changes the output does not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

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
