"""Prompt building (pure given a tokenizer): FIM or prefix-only, windows, and token healing.

Token healing: when the cursor sits inside a word, the prefix's last token is usually a fragment the
model would never have produced there ("re" of "return"). We back off that token and constrain the
first generated token to start with its text, so the model re-chooses the whole token.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
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
    heal: bytes = b""  # bytes already typed that the generated text must start with (token healing)
    anchor: tuple[str, str] | None = None  # FIM: (prefix-slot text, suffix), see choose_anchor
    head: int = 0  # leading ids a window cut must keep (BOS, the FIM prefix token, the context block)


# Repository-level FIM markers, per model family: Qwen2.5-Coder's (its report's "repo-level FIM format"),
# StarCoder2's. A tokenizer with neither pair gets no context block.
REPO_MARKERS = (("<|repo_name|>", "<|file_sep|>"), ("<repo_name>", "<file_sep>"))


class ChunkLike(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def text(self) -> str: ...


def context_ids(tok: Tok, repo: str, chunks: Sequence[ChunkLike], current_path: str) -> list[int]:
    """The repository context block in tokens: ``<|repo_name|>`` repo, then ``<|file_sep|>`` path + text
    per chunk, then ``<|file_sep|>`` current_path (each name on its own line); the FIM block follows. Each
    piece is encoded on its own, so the ids of a chunk never depend on its neighbours (a block that keeps its
    first chunks keeps their KV). Empty when the tokenizer has no repository markers."""
    rid = sid = None
    for repo_mark, sep_mark in REPO_MARKERS:
        rid, sid = tok.special_id(repo_mark), tok.special_id(sep_mark)
        if rid is not None and sid is not None:
            break
    if rid is None or sid is None:
        return []
    ids = [rid] + tok.encode(repo + "\n")
    for c in chunks:
        text = c.text if c.text.endswith("\n") else c.text + "\n"
        ids += [sid] + tok.encode(c.path + "\n" + text)
    return ids + [sid] + tok.encode(current_path + "\n")


# The comments layout (EngineConfig.context_layout's default): each chunk as a comment at the start of the
# FIM prefix, as Copilot lays out its snippets; the 0.5B model loses exact lines with the repository format
# and none with this (docs/benchmarks/archive/context.comment.md). Comment marks by the current file's extension
# (the comments sit in that file's text): ``//`` for the C family, ``--`` for a few, ``#`` for the rest.
_LINE_COMMENT = {
    **dict.fromkeys(("c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "java", "kt", "kts", "scala", "groovy",
                     "js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts", "go", "rs", "swift", "dart", "php",
                     "zig", "proto", "m", "mm", "v", "sv"), "//"),
    **dict.fromkeys(("lua", "sql", "hs", "elm", "ada", "adb", "ads"), "--"),
}


def comment_mark(path: str) -> str:
    """The line-comment mark for a file, by its extension (``#`` when unknown: Python, shell, YAML, ...)."""
    name = path.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return _LINE_COMMENT.get(ext, "#")


def comment_text(chunk: ChunkLike, mark: str = "#") -> str:
    """A chunk as comments: ``# Path: <path>``, each line behind ``# `` (an empty one as ``#``), then a blank
    line. Always ends with a newline, so the file text after it starts a line."""
    lines = chunk.text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join(f"{mark} {ln}\n" if ln.strip() else f"{mark}\n" for ln in lines)
    return f"{mark} Path: {chunk.path}\n{body}\n"


def comment_ids(tok: Tok, chunks: Sequence[ChunkLike], current_path: str) -> list[int]:
    """The context block in the comments layout (see comment_text), in the current file's comment syntax.
    Each chunk is encoded on its own, as in context_ids; the ids end on a line break, and the prompt's file
    text is encoded on its own after them (its ids are those of a prompt without the block)."""
    mark = comment_mark(current_path)
    ids: list[int] = []
    for c in chunks:
        ids += tok.encode(comment_text(c, mark))
    return ids


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


_HEADER = re.compile(r"\s*(?:export\s+|pub(?:\([^)]*\))?\s+|async\s+|static\s+)*"
                     r"(?:def|class|function|fn|func|fun|impl|struct|interface|module)\b")


def header_start(prefix: str, lo: int = 0) -> int | None:
    """Start of the line that opens the definition the cursor is in (a less indented ``def``/``class``/
    ``function``/... line, or the top-level line the cursor's block hangs from), searching back to ``lo``;
    None when there is none that far."""
    end = len(prefix)
    line_start = prefix.rfind("\n", 0, end) + 1
    line = prefix[line_start:end]
    ind = len(line) - len(line.lstrip(" \t"))
    if not line.strip():  # a line just begun (its indentation not typed yet): it can go one level deeper
        prev = prefix[:line_start].rstrip()
        last = prev[prev.rfind("\n") + 1:]
        ind = max(ind, len(last) - len(last.lstrip(" \t")) + 1) if prev else ind
    pos = line_start
    while pos > lo:
        start = prefix.rfind("\n", 0, pos - 1) + 1
        text = prefix[start:pos - 1]
        if start < lo:
            return None
        if text.strip():
            i = len(text) - len(text.lstrip(" \t"))
            if i < ind:
                if _HEADER.match(text) or i == 0:
                    return start
                ind = i
        pos = start
    return None


def sticky_cut(prefix: str, max_chars: int, slack: int, head: str | None, reach: int = 0) -> int:
    """Where a short window's prefix starts: where ``head`` (the start of the last such window) is, while
    the window from there is at most ``max_chars + slack`` long (``reach + slack`` if larger) and starts a
    line; else the line start nearest ``max_chars`` before the cursor — or, within ``reach`` characters,
    the line that opens the definition the cursor is in (its name and parameters matter more than any
    other text; header_start). Typing then keeps the start (and its KV cache) for ``slack`` characters at
    least, whichever keystroke the window was first made at (a fixed grid moves it at an arbitrary point,
    right after the first request as often as not)."""
    longest = max(max_chars, reach)
    if head:
        i = prefix.find(head, max(0, len(prefix) - longest - slack))
        if i >= 0 and (i == 0 or prefix[i - 1] == "\n"):
            return i
    if len(prefix) <= max_chars:
        return 0
    cut = len(prefix) - max_chars
    nl = prefix.find("\n", cut)
    cut = nl + 1 if 0 <= nl < len(prefix) - 1 else cut
    if reach > max_chars:
        h = header_start(prefix, max(0, len(prefix) - reach))
        if h is not None and h < cut:
            return h
    return cut


def should_heal(prefix: str) -> bool:
    """Heal when the cursor follows a word character or an operator (not after whitespace)."""
    return bool(prefix) and not prefix[-1].isspace()


# Most of the prefix goes before the suffix (FIM's usual prefix slot); the text typed since the *anchor*
# goes after the middle token, as if the model had written it itself. Typing then only appends tokens
# after the cached suffix: a keystroke costs its own token(s), not a re-run of the suffix (which PSM order
# puts after the prefix). A new anchor inside a line goes FRESH_MIDDLE_CHARS back (at a line start), not at
# the cursor's line: with a middle between FRESH_MIDDLE_CHARS and MAX_MIDDLE_CHARS long the model completes
# more held-out lines exactly than with the cursor's line alone in the same window (scripts/bench_layout.py,
# docs/benchmarks/layout.md).
# The anchor is kept until the middle passes MAX_MIDDLE_CHARS: every re-anchor re-runs the suffix and the
# fresh middle (slow on a slow CPU), so it happens once per MAX_MIDDLE_CHARS - FRESH_MIDDLE_CHARS typed
# characters at most.
FRESH_MIDDLE_CHARS = 480
MAX_MIDDLE_CHARS = 1440


AUTO_CLOSERS = frozenset(")]}\"'`")


def choose_anchor(prefix: str, suffix: str, previous: tuple[str, str] | None,
                  max_middle: int = MAX_MIDDLE_CHARS, fresh_middle: int = FRESH_MIDDLE_CHARS) -> tuple[int, str]:
    """(anchor, suffix for the prompt): how many characters of ``prefix`` go into the FIM prefix slot (the
    rest is the typed-so-far middle), and the suffix text the prompt carries.

    ``previous`` is the (prefix-slot text, suffix) the KV cache holds. It is kept while the new prompt
    extends it: the prefix still starts with the slot's text, the middle is short, and the suffix is the
    same — or the same after a few characters an editor auto-closes (typing ``(`` inserts ``)`` after the
    cursor: the prompt keeps its suffix; post-processing merges the closers). Otherwise the new anchor is,
    inside a line, the start of the line ``fresh_middle`` characters back (the prefix's start if it is
    shorter), and on a blank line the cursor's line (a line boundary: the same cursor state always gives the
    same prompt)."""
    if previous is not None:
        head, prev_suffix = previous
        if prefix.startswith(head) and len(prefix) - len(head) <= max_middle and suffix.endswith(prev_suffix):
            extra = suffix[: len(suffix) - len(prev_suffix)]
            if len(extra) <= 4 and all(c in AUTO_CLOSERS for c in extra):
                return len(head), prev_suffix
    nl = prefix.rfind("\n")
    if prefix[nl + 1:].strip():  # inside a line (what was measured); at a line's start the model, "having
        # written" the lines before, tends to open a docstring where code was due
        back = len(prefix) - fresh_middle
        nl = prefix.rfind("\n", 0, back) if back > 0 else -1
    anchor = nl + 1
    if len(prefix) - anchor > max_middle:  # a very long line: anchor inside it
        anchor = len(prefix) - max_middle // 2
    return anchor, suffix


CONTEXT_LAYOUTS = ("comments", "repository")


def build_prompt(tok: Tok, prefix: str, suffix: str, fim: Fim | None, *, bos_id: int | None = None,
                 heal: bool = True, anchor: int | None = None, context: Sequence[int] = (),
                 layout: str = "repository") -> Prompt:
    """FIM: ``<prefix> P[:anchor] <suffix> S <middle> P[anchor:]`` (``anchor`` None: the whole prefix in
    the prefix slot, plain PSM). Prefix-only models: the prefix. With ``heal``, the last token of the text
    the model continues is backed off and the generation must reproduce its bytes (see Healer).
    ``context``: the block's ids, a stable prefix whose KV every keystroke reuses, kept by a window cut
    (``Prompt.head``). ``layout`` "repository" (context_ids): right after BOS; "comments" (comment_ids):
    right after the FIM prefix token, before the file text (prefix-only models: right after BOS)."""
    assert layout in CONTEXT_LAYOUTS, layout
    bos = [bos_id] if bos_id is not None else []
    inner = list(context) if layout == "comments" and fim is not None else []  # after the FIM prefix token
    ids: list[int] = bos + ([] if inner else list(context))
    head = len(ids) + (1 + len(inner) if fim is not None else 0)
    flow = prefix
    if fim is not None:
        fp, fs, fm = (tok.special_id(fim.prefix), tok.special_id(fim.suffix), tok.special_id(fim.middle))
        assert fp is not None and fs is not None and fm is not None, "FIM tokens missing from the tokenizer"
        cut = len(prefix) if anchor is None else max(0, min(anchor, len(prefix)))
        slot, flow = prefix[:cut], prefix[cut:]
        slot_ids = tok.encode(slot) if slot else []
        healed = b""
        if anchor is None and heal and slot_ids and should_heal(slot):  # PSM: only a partial word heals
            last = tok.token_bytes(slot_ids[-1])
            if last and b"\n" not in last:
                healed, slot_ids = last, slot_ids[:-1]
        ids = ids + [fp] + inner + slot_ids + [fs] + (tok.encode(suffix) if suffix else []) + [fm]
        if anchor is None:
            return Prompt(ids, healed, head=head)
    flow_ids = tok.encode(flow) if flow else []
    healed = b""
    if heal and flow_ids:
        # the text after the prompt's last special token reads as the model's own output: its last token
        # is whatever the tokenizer cut at the cursor ("re" of "return", a trailing space, a newline and
        # indentation the next word would absorb), so it is always backed off and re-chosen
        healed = tok.token_bytes(flow_ids[-1])
        flow_ids = flow_ids[:-1]
        if len(healed) > 1 and healed[-1:] in (b" ", b"\t") and not healed.strip():
            # indentation (the cursor on an emptied indented line): byte-level BPE writes `        x` as
            # `       ` + ` x` (the last blank goes with the word), so only that last blank is re-chosen. Healing
            # the whole run lets the model pick a run of blanks no text tokenizes to, after which it keeps
            # writing blanks until its token limit
            flow_ids = flow_ids + tok.encode(healed[:-1].decode("utf-8"))
            healed = healed[-1:]
    return Prompt(ids + flow_ids, healed, head=head)


class Healer:
    """Token healing over several tokens: the generated bytes must start with ``heal``. While they do not
    yet cover it, the next token must either start with the rest of it or be a prefix of that rest."""

    def __init__(self, index: PrefixIndex, heal: bytes) -> None:
        self.index = index
        self.heal = heal

    def allowed(self, produced: bytes) -> list[int] | None:
        """Token ids allowed next after ``produced`` bytes, or None when healing is done."""
        if len(produced) >= len(self.heal):
            return None
        rest = self.heal[len(produced):]
        return self.index.starting_with(rest) + self.index.prefixes_of(rest)


class PrefixIndex:
    """Which token ids start with given bytes (for token healing), by bisect over sorted token bytes."""

    def __init__(self, token_bytes: list[bytes], skip: set[int] | None = None) -> None:
        skip = skip or set()
        order = sorted((i for i in range(len(token_bytes)) if token_bytes[i] and i not in skip),
                       key=lambda i: token_bytes[i])
        self._keys = [token_bytes[i] for i in order]
        self._ids = order
        self._exact: dict[bytes, int] = {}
        for i in order:
            self._exact.setdefault(token_bytes[i], i)

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
        self._byte_decoder = {v: k for k, v in _bytes_to_unicode().items()}
        # str.translate table: byte-level characters to the bytes they stand for (as latin-1 characters);
        # any other character of the first 256 becomes one latin-1 cannot encode, so a token holding it takes
        # the general path, exactly as the per-character check would
        self._byte_table = {i: "\u0100" for i in range(256)}
        self._byte_table.update({ord(c): chr(b) for c, b in self._byte_decoder.items()})
        # the decoder's repr names its parts ("ByteLevel(...)" or "Sequence(decoders=[..., ByteLevel(...)])");
        # serialising the tokenizer to JSON to read its type would cost much of the cold start
        # (docs/benchmarks/engine.md, session 5)
        self.byte_level = self.tk.decoder is not None and "ByteLevel(" in repr(self.tk.decoder)

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


def safe_decode(data: bytes) -> str:
    """Decode UTF-8, holding back an incomplete multi-byte sequence at the end (streaming)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start >= len(data) - 3:
            return data[: e.start].decode("utf-8", errors="replace")
        return data.decode("utf-8", errors="replace")
