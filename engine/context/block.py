"""The repository context block: chunks of source, their selection under a token budget, their order and
the block's identity (engine/context/workspace.py gathers the candidates; engine/decoding/layout.py lays the block out in tokens).

Chunk selection follows llama.vim's ring buffer: chunks of at most 64 lines, dropped when > 0.5 word-Dice
similar to the text around the cursor (they make the model copy), merged when > 0.9 similar to a chunk
already taken.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("flint.context")

CHUNK_LINES = 64  # llama.vim's chunk size
DROP_SIMILAR = 0.5  # a chunk this similar to the text around the cursor is dropped
MERGE_SIMILAR = 0.9  # a chunk this similar to one already taken is a duplicate
DEFINITION_SOURCES = ("import", "file", "jedi")  # outlines of definitions: merged into one stub per file

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def approx_tokens(text: str) -> int:
    """A tokenizer-free token estimate for code (~3.3 characters per token)."""
    return len(text) * 3 // 10 + 1


# ---- similarity ---------------------------------------------------------------------------------------
def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    """Word-Dice similarity of two word sets: 2|a & b| / (|a| + |b|)."""
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


# ---- chunks --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chunk:
    path: str  # as shown in the block ("# Path: ..."): relative to the workspace folder
    text: str
    source: str  # "open" | "import" | "file" | "edit" | "jedi"
    line: int = 0  # first line (0-based) of the chunk in its file
    score: float = 0.0  # higher first; set by the source

    @property
    def label(self) -> str:
        """What status / `flint complete --json` shows: path:line (1-based) and the source."""
        return f"{self.path}:{self.line + 1} ({self.source})"

    @property
    def key(self) -> tuple[str, str]:
        return (self.path, self.text)


def split_chunks(text: str, max_lines: int = CHUNK_LINES) -> list[tuple[int, str]]:
    """(first line, text) pieces of at most ``max_lines`` lines, cut preferably where a top-level statement
    starts (a line with no indentation after a blank line), so a chunk tends to hold whole definitions."""
    lines = text.splitlines(keepends=True)
    out: list[tuple[int, str]] = []
    start = 0
    while start < len(lines):
        end = min(len(lines), start + max_lines)
        if end < len(lines):
            # the last top-level start in the second half of the window
            for j in range(end, start + max_lines // 2, -1):
                ln = lines[j]
                if ln[:1] not in (" ", "\t", "\n", "\r", "") and lines[j - 1].strip() == "":
                    end = j
                    break
        piece = "".join(lines[start:end])
        if piece.strip():
            out.append((start, piece))
        start = end
    return out


def select_chunks(candidates: Iterable[Chunk], around: str, budget: int,
                  count: Callable[[str], int] = approx_tokens) -> list[Chunk]:
    """The best-scored chunks that fit ``budget`` tokens: those too similar to ``around`` (the text near the
    cursor) dropped, near-duplicates of a better chunk dropped (the better one stands for both)."""
    near = words(around)
    taken: list[tuple[Chunk, frozenset[str]]] = []
    used = 0
    for c in sorted(candidates, key=lambda c: -c.score):
        w = words(c.text)
        # the file's own definitions share words with the cursor's text by construction (the names used
        # there) and are never in it (they lie outside the window): a short outline next to a short
        # neighbourhood must not count as a copy of it
        if c.source != "file" and dice(w, near) > DROP_SIMILAR:
            log.debug("context: %s dropped, too similar to the cursor's text", c.label)
            continue
        if any(c.key == t.key or dice(w, tw) > MERGE_SIMILAR for t, tw in taken):
            continue
        cost = count(c.path) + count(c.text) + 2
        if used + cost > budget:
            continue  # a smaller, lower-scored chunk may still fit
        taken.append((c, w))
        used += cost
    return [c for c, _ in taken]


def merge_by_file(chunks: list[Chunk]) -> list[Chunk]:
    """Definitions taken from one module (or from the current file, source "file") become one chunk in source
    order (a stub of what is used), so the block names each file once per source; other chunks stay as they
    are."""
    groups: dict[tuple[str, str], list[Chunk]] = {}
    out: list[Chunk] = []
    for c in chunks:
        if c.source in DEFINITION_SOURCES:
            if (c.source, c.path) not in groups:
                groups[(c.source, c.path)] = []
                out.append(c)  # placeholder, replaced below
            groups[(c.source, c.path)].append(c)
        else:
            out.append(c)
    merged = []
    for c in out:
        if c.source not in DEFINITION_SOURCES:
            merged.append(c)
            continue
        parts = sorted(groups[(c.source, c.path)], key=lambda x: x.line)
        text = "\n".join(x.text.rstrip("\n") + "\n" for x in parts)
        merged.append(Chunk(c.path, text, c.source, parts[0].line, max(x.score for x in parts)))
    return merged


def order_stably(previous: Iterable[Chunk], chosen: list[Chunk]) -> list[Chunk]:
    """The block's order: chunks the previous block had keep their order at the front (their KV stays valid
    up to the first change), new ones follow, best last (nearest the file being completed)."""
    keep = {c.key for c in chosen}
    head = [c for c in previous if c.key in keep]
    seen = {c.key for c in head}
    tail = sorted((c for c in chosen if c.key not in seen), key=lambda c: c.score)
    return head + tail


@dataclass(frozen=True)
class ContextBlock:
    """What goes in front of the file window: the chunks, each with its path, for the file ``current_path``
    of the repository ``repo`` (engine/decoding/layout.py's comment_ids / context_ids lay it out in tokens)."""

    repo: str
    chunks: tuple[Chunk, ...]
    current_path: str

    def digest(self) -> str:
        """Identity of the block for caches (a suggestion made with other context is another entry)."""
        h = hashlib.sha256()
        for part in (self.repo, self.current_path, *(f"{c.path}\0{c.text}" for c in self.chunks)):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\1")
        return h.hexdigest()[:16]

    def labels(self) -> list[str]:
        return [c.label for c in self.chunks]

