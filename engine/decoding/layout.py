"""The repository context block laid out in tokens (engine/context/ gathers it): the "comments" layout
(``comment_ids``: each chunk as comments at the start of the FIM prefix, the default) or the "repository"
layout (``context_ids``: the model's repository-level FIM format after BOS, kept for measurement), and the
identity of a block in a layout (``layout_digest``). Each chunk is encoded on its own, so the ids of a chunk
never depend on its neighbours (a block that keeps its first chunks keeps their KV)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from engine.decoding.tokenizer import Tok

log = logging.getLogger("flint.engine")

CONTEXT_LAYOUTS = ("comments", "repository")

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


def layout_digest(layout: str, digest: str) -> str:
    """The block's identity in a layout: the block's own digest in the repository layout (what caches knew it
    by before the comments layout), another 16 hex digits in the comments layout (a suggestion made from
    another prompt is another cache entry)."""
    if layout == "repository":
        return digest
    return hashlib.sha256(f"{layout}\0{digest}".encode()).hexdigest()[:16]


def block_ids(tok: Tok, block: Any, layout: str) -> list[int]:
    """A context block's ids in ``layout`` ("comments", or the repository layout)."""
    if layout == "comments":
        return comment_ids(tok, block.chunks, block.current_path)
    return context_ids(tok, block.repo, block.chunks, block.current_path)


class PromptBlock:
    """The block in front of every prompt as the engine holds it: its ids, the layout they were laid out in,
    its identity (``digest``: "" when none) and what it holds (``labels``, path:line (source) per chunk)."""

    def __init__(self, layout: str) -> None:
        self.ids: list[int] = []
        self.layout = layout
        self.key: tuple[str, str] = (layout, "")  # (layout, the block's own digest)
        self.digest = ""
        self.labels: tuple[str, ...] = ()

    def set(self, tok: Tok, block: Any, layout: str, room: int) -> bool:
        """Lay ``block`` (None: none) out in ``layout``; a block of more than ``room`` tokens is not used.
        Returns whether the ids or their layout changed."""
        digest = block.digest() if block is not None and block.chunks else ""
        if (layout, digest) == self.key:
            return False
        if not digest and not self.ids:  # none before, none now: only the layout of a future block
            self.layout, self.key = layout, (layout, "")
            return False
        ids = block_ids(tok, block, layout) if digest else []
        if len(ids) > room:
            log.debug("context block of %d tokens exceeds %d: not used", len(ids), room)
            ids = []
        self.ids, self.layout, self.key = ids, layout, (layout, digest if ids else "")
        self.digest = layout_digest(layout, digest) if ids else ""
        self.labels = tuple(block.labels()) if ids else ()
        return True

    def starts(self, ids: list[int], bos: bool, fim: bool) -> bool:
        """Do these ids (a prompt, or a row's cached tokens) start with the block (True: no block)? It follows
        BOS (``bos``: the model has one), and in the comments layout of a FIM model (``fim``) the FIM prefix."""
        if not self.ids:
            return True
        start = int(bos) + int(self.layout == "comments" and fim)
        return ids[start:start + len(self.ids)] == self.ids
