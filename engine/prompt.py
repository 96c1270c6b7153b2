"""Prompt building (pure given a tokenizer): FIM or prefix-only, windows, and token healing.

Token healing: when the cursor sits inside a word, the prefix's last token is usually a fragment the
model would never have produced there ("re" of "return"). We back off that token and constrain the
first generated token to start with its text, so the model re-chooses the whole token.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol


class Tok(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode_bytes(self, ids: list[int]) -> bytes: ...
    def token_bytes(self, i: int) -> bytes: ...
    def special_id(self, text: str) -> int | None: ...
    @property
    def vocab_size(self) -> int: ...


@dataclass(frozen=True)
class Fim:
    prefix: str
    suffix: str
    middle: str


@dataclass
class Prompt:
    ids: list[int]
    heal: bytes = b""  # bytes already typed that the first generated token must start with


def clip_window(prefix: str, suffix: str, max_prefix_chars: int, max_suffix_chars: int) -> tuple[str, str]:
    """Keep the text nearest the cursor: the prefix's tail and the suffix's head, cut at line bounds."""
    if len(prefix) > max_prefix_chars:
        cut = len(prefix) - max_prefix_chars
        nl = prefix.find("\n", cut)
        prefix = prefix[nl + 1:] if 0 <= nl < len(prefix) - 1 else prefix[cut:]
    if len(suffix) > max_suffix_chars:
        nl = suffix.rfind("\n", 0, max_suffix_chars)
        suffix = suffix[: nl + 1] if nl > 0 else suffix[:max_suffix_chars]
    return prefix, suffix


def should_heal(prefix: str) -> bool:
    """Heal when the cursor follows a word character or an operator (not after whitespace)."""
    return bool(prefix) and not prefix[-1].isspace()


def build_prompt(tok: Tok, prefix: str, suffix: str, fim: Fim | None, *, bos_id: int | None = None,
                 heal: bool = True) -> Prompt:
    head: list[int] = [bos_id] if bos_id is not None else []
    pre_ids = tok.encode(prefix) if prefix else []
    healed = b""
    if heal and pre_ids and should_heal(prefix):
        last = tok.token_bytes(pre_ids[-1])
        # back off one token; keep it only if its bytes are a complete string ending (valid UTF-8)
        if last and b"\n" not in last:
            healed = last
            pre_ids = pre_ids[:-1]
    if fim is None:
        return Prompt(head + pre_ids, healed)
    fp, fs, fm = (tok.special_id(fim.prefix), tok.special_id(fim.suffix), tok.special_id(fim.middle))
    assert fp is not None and fs is not None and fm is not None, "FIM tokens missing from the tokenizer"
    # PSM order: <prefix> P <suffix> S <middle>. The suffix sits after the prefix, so a keystroke at the
    # cursor re-runs the (windowed) suffix too; the suffix window is kept short for that reason.
    suf_ids = tok.encode(suffix) if suffix else []
    return Prompt(head + [fp] + pre_ids + [fs] + suf_ids + [fm], healed)


class PrefixIndex:
    """Which token ids start with given bytes (for token healing), by bisect over sorted token bytes."""

    def __init__(self, token_bytes: list[bytes]) -> None:
        order = sorted(range(len(token_bytes)), key=lambda i: token_bytes[i])
        self._keys = [token_bytes[i] for i in order]
        self._ids = order

    def starting_with(self, prefix: bytes) -> list[int]:
        lo = bisect.bisect_left(self._keys, prefix)
        out = []
        for j in range(lo, len(self._keys)):
            if not self._keys[j].startswith(prefix):
                break
            out.append(self._ids[j])
        return out


class HFTokenizer:
    """tokenizers.Tokenizer wrapper with byte-level token strings (GPT-2 byte mapping)."""

    def __init__(self, path: str) -> None:
        import json

        from tokenizers import Tokenizer

        self.tk = Tokenizer.from_file(path)
        self._byte_decoder = {v: k for k, v in _bytes_to_unicode().items()}
        dec = json.loads(self.tk.to_str()).get("decoder") or {}
        kinds = {dec.get("type")} | {d.get("type") for d in dec.get("decoders", []) or []}
        self.byte_level = "ByteLevel" in kinds

    @property
    def vocab_size(self) -> int:
        return self.tk.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tk.encode(text, add_special_tokens=False).ids

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
            if self.byte_level and all(c in self._byte_decoder for c in s):
                out[i] = bytes(self._byte_decoder[c] for c in s)
            else:  # sentencepiece-style vocab (e.g. Gemma): '▁' is a space, <0xNN> a byte
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
        return PrefixIndex(self._token_bytes)

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


def safe_decode(data: bytes) -> str:
    """Decode UTF-8, holding back an incomplete multi-byte sequence at the end (streaming)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start >= len(data) - 3:
            return data[: e.start].decode("utf-8", errors="replace")
        return data.decode("utf-8", errors="replace")
