"""The tokenizer as the engine uses it: ``Tok`` (what prompt building needs), ``HFTokenizer`` (a
tokenizers.Tokenizer with byte-level token strings and the token byte table), ``PrefixIndex`` (which tokens
start with given bytes: token healing's lookup) and ``safe_decode`` (UTF-8 while streaming)."""

from __future__ import annotations

import bisect
import threading
from functools import cached_property
from typing import Protocol


class Tok(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode_bytes(self, ids: list[int]) -> bytes: ...
    def token_bytes(self, i: int) -> bytes: ...
    def special_id(self, text: str) -> int | None: ...
    @property
    def vocab_size(self) -> int: ...


class PrefixIndex:
    """Which token ids start with given bytes (for token healing), by bisect over sorted token bytes."""

    def __init__(self, token_bytes: list[bytes], skip: set[int] | None = None) -> None:
        skip = skip or set()
        # (built on the cold start's loader thread, holding the GIL: C-level key and dict building)
        order = sorted((i for i in range(len(token_bytes)) if token_bytes[i] and i not in skip),
                       key=token_bytes.__getitem__)
        self._keys = [token_bytes[i] for i in order]
        self._ids = order
        # the first id in sorted order for each byte string: written last when the pairs run backwards
        self._exact: dict[bytes, int] = dict(zip(reversed(self._keys), reversed(order), strict=True))

    def starting_with(self, prefix: bytes) -> list[int]:
        lo = bisect.bisect_left(self._keys, prefix)
        out = []
        for j in range(lo, len(self._keys)):
            if not self._keys[j].startswith(prefix):
                break
            out.append(self._ids[j])
        return out

    def prefixes_of(self, data: bytes) -> list[int]:
        """Tokens whose bytes are a proper prefix of ``data`` (the first piece of a multi-token heal)."""
        return [i for n in range(1, len(data)) if (i := self._exact.get(data[:n])) is not None]


class HFTokenizer:
    """tokenizers.Tokenizer wrapper with byte-level token strings (GPT-2 byte mapping)."""

    def __init__(self, path: str) -> None:
        from tokenizers import Tokenizer

        self.tk = Tokenizer.from_file(path)
        self._encoded: dict[str, tuple[int, ...]] = {}  # text -> ids, oldest first
        self._encoded_lock = threading.Lock()
        self._byte_decoder = {v: k for k, v in _bytes_to_unicode().items()}
        self._byte_table = byte_level_table()
        # the decoder's repr names its parts ("ByteLevel(...)" or "Sequence(decoders=[..., ByteLevel(...)])");
        # serialising the tokenizer to JSON to read its type would cost much of the cold start
        # (docs/benchmarks/engine.md, session 5)
        self.byte_level = self.tk.decoder is not None and "ByteLevel(" in repr(self.tk.decoder)

    @property
    def vocab_size(self) -> int:
        return self.tk.get_vocab_size(with_added_tokens=True)

    # texts encoded lately: a keystroke's prompt building encodes the same prefix slot and suffix for every
    # KV row it tries (full window, quick window), and again at the next keystroke while the anchor stays
    ENCODED_KEPT = 16

    def encode(self, text: str) -> list[int]:
        if len(text) < 64:
            return self.tk.encode(text, add_special_tokens=False).ids
        with self._encoded_lock:
            known = self._encoded.pop(text, None)
            if known is not None:
                self._encoded[text] = known  # the newest again
                return list(known)
        ids: list[int] = self.tk.encode(text, add_special_tokens=False).ids
        with self._encoded_lock:
            self._encoded[text] = tuple(ids)
            while len(self._encoded) > self.ENCODED_KEPT:
                del self._encoded[next(iter(self._encoded))]
        return ids

    def special_id(self, text: str) -> int | None:
        return self.tk.token_to_id(text)

    @cached_property
    def _token_bytes(self) -> list[bytes]:
        added = {i: t.content for i, t in self.tk.get_added_tokens_decoder().items()}
        n = self.vocab_size
        out: list[bytes] = [b""] * n
        for s, i in self.tk.get_vocab(with_added_tokens=True).items():
            if i >= n:
                continue
            if i in added:
                out[i] = added[i].encode("utf-8")
                continue
            if self.byte_level:
                # the whole token in C, not a generator over its characters (part of the cold start); it
                # fails exactly when a character is outside the byte-level alphabet
                try:
                    out[i] = s.translate(self._byte_table).encode("latin-1")
                    continue
                except UnicodeEncodeError:
                    pass
            # sentencepiece-style vocab (e.g. Gemma): '▁' is a space, <0xNN> a byte
            if s.startswith("<0x") and s.endswith(">") and len(s) == 6:
                out[i] = bytes([int(s[3:5], 16)])
            else:
                out[i] = s.replace("\u2581", " ").encode("utf-8")
        return out

    def token_bytes(self, i: int) -> bytes:
        return self._token_bytes[i]

    def decode_bytes(self, ids: list[int]) -> bytes:
        tb = self._token_bytes
        return b"".join(tb[i] for i in ids)

    @cached_property
    def prefix_index(self) -> PrefixIndex:
        # special tokens never heal text (their bytes would spell "<|fim_middle|>" as text)
        return PrefixIndex(self._token_bytes, self.special_ids())

    def special_ids(self) -> set[int]:
        return set(self.tk.get_added_tokens_decoder().keys())


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte <-> unicode mapping used by byte-level BPE vocabularies."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def byte_level_table() -> dict[int, str]:
    """str.translate table from byte-level characters to the bytes they stand for (as latin-1 characters);
    any other character of the first 256 becomes one latin-1 cannot encode, so a token holding it fails
    the encode (its caller takes the general path)."""
    table = {i: "\u0100" for i in range(256)}
    table.update({ord(c): chr(b) for b, c in _bytes_to_unicode().items()})
    return table


def safe_decode(data: bytes) -> str:
    """Decode UTF-8, holding back an incomplete multi-byte sequence at the end (streaming)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start >= len(data) - 3:
            return data[: e.start].decode("utf-8", errors="replace")
        return data.decode("utf-8", errors="replace")
