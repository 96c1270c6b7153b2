"""The engine's monitor (``Guidance``): one analyser per process (jedi, one project per workspace root), the
token trie of the model's vocabulary (built on a background thread: ~1 s once), and a ``Guide`` per
generation when the document is Python. Until the trie is ready, or for another language, there is none:
the model decides alone. What the last guided generation's monitor did is kept for the status.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Protocol

from engine.decoding.tokenizer import HFTokenizer
from engine.guidance.guide import Guide
from engine.guidance.jedi_analyser import shared_analyser
from engine.guidance.monitor import DEFAULT_BUDGET_S, Analyser
from engine.guidance.scope import scope_question
from engine.guidance.trie import TokenTrie, load_token_texts, token_texts
from engine.types import DocRef, GenParams

log = logging.getLogger("flint.guidance")

PYTHON_SUFFIXES = (".py", ".pyi")
# the editor's workspace folders (the server sets them at initialize): each a jedi project root for every
# Guidance of the process (one analyser per engine; the roots are the session's)
_workspace_roots: tuple[str, ...] = ()


def set_workspace_roots(roots: list[str]) -> None:
    global _workspace_roots
    _workspace_roots = tuple(roots)


def is_python(language: str | None, path: str | None) -> bool:
    """Whether the monitor applies: the LSP language id says Python, or (none given) the path does."""
    if language is not None:
        return language == "python"
    return path is None or path.endswith(PYTHON_SUFFIXES)


def strip_heal(prefix: str, heal: bytes) -> str:
    """The document prefix without the bytes token healing re-types (the generated text starts with them)."""
    if not heal:
        return prefix
    data = prefix.encode("utf-8")
    if not data.endswith(heal):
        return prefix
    return data[: len(data) - len(heal)].decode("utf-8", errors="ignore")


def whole_document(prefix: str, suffix: str, doc: DocRef) -> tuple[str, str]:
    """(prefix, suffix) extended to the whole document when ``doc.text`` holds the window at ``doc.start``;
    the window alone otherwise."""
    text, start = doc.text, doc.start
    if text is None or text[start:start + len(prefix)] != prefix:
        return prefix, suffix
    cursor = start + len(prefix)
    if not text.startswith(suffix, cursor):
        return prefix, suffix
    return text[:cursor], text[cursor:]


class ProjectAnalyser(Analyser, Protocol):
    """The monitor's analyser, which knows the workspace roots (imports resolve to files under them)."""

    def add_root(self, root: str, environment: str | None = None) -> None: ...


class Guidance:
    def __init__(self, tokenizer: Path | HFTokenizer, n_logits: int, analyser: ProjectAnalyser | None = None, *,
                 budget_s: float = DEFAULT_BUDGET_S, hard_only: bool = True, wait_s: float | None = None) -> None:
        self.analyser: ProjectAnalyser = analyser if analyser is not None else shared_analyser()
        self.budget_s, self.hard_only = budget_s, hard_only
        self.wait_s = 3 * budget_s if wait_s is None else wait_s
        self._trie: TokenTrie | None = None
        self._texts: tuple[str | None, ...] = ()
        self.last: dict[str, object] | None = None  # the last guided generation's summary
        self._roots: tuple[str, ...] = ()  # the workspace roots the analyser has
        self._builder = threading.Thread(target=self._build, args=(tokenizer, n_logits),
                                         name="flint-trie", daemon=True)
        self._builder.start()

    def _build(self, tokenizer: Path | HFTokenizer, n_logits: int) -> None:
        """The token trie, from the engine's tokenizer (its token bytes: no second copy of the vocabulary)
        or a tokenizer.json."""
        t0 = time.perf_counter()
        try:
            if isinstance(tokenizer, HFTokenizer):
                texts = token_texts([tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size)])
                special: frozenset[int] = frozenset(tokenizer.special_ids())
            else:
                texts, special = load_token_texts(str(tokenizer))
            self._trie = TokenTrie(texts, special, n_logits)
            self._texts = texts
        except Exception:  # a vocabulary it cannot read: no monitor, never a failed completion
            log.warning("token trie could not be built: guidance off", exc_info=True)
        log.debug("token trie built in %.2f s", time.perf_counter() - t0)

    @property
    def ready(self) -> bool:
        return self._trie is not None

    def wait(self, timeout: float | None = None) -> bool:
        self._builder.join(timeout)
        return self.ready

    def add_root(self, root: str, environment: str | None = None) -> None:
        self.analyser.add_root(root, environment)

    def guide(self, prefix: str, suffix: str, heal: bytes, *, path: str | None, version: int | None,
              language: str | None) -> Guide | None:
        """One generation's monitor (None: not Python, or the trie is not built yet). The question at the
        cursor is asked now, so jedi works while the prompt is prefilled."""
        if self._trie is None or not is_python(language, path):
            return None
        if self._roots != _workspace_roots:
            self._roots = _workspace_roots
            for root in self._roots:
                self.add_root(root)
        g = Guide(self.analyser, self._trie, self._texts, prefix=strip_heal(prefix, heal), suffix=suffix,
                  path=path, version=version, budget_s=self.budget_s, hard_only=self.hard_only,
                  wait_s=self.wait_s)
        g.prefetch()
        return g

    def warm(self, prefix: str, suffix: str, *, path: str | None, version: int | None,
             language: str | None = None, timeout: float = 0.0) -> bool:
        """Ask the cursor line's scope question (engine/guidance/scope.py) ahead of requests (idle time: jedi
        reads the document and what it imports); wait up to ``timeout``. Whether an answer is in."""
        if self._trie is None or not is_python(language, path):
            return False
        source, offset = scope_question(prefix, suffix)
        got = self.analyser.names_at(source, offset, time.monotonic() + timeout, path=path, version=None)
        return got is not None

    def for_request(self, prefix: str, suffix: str, heal: bytes, params: GenParams) -> Guide | None:
        """The guide for a request: the analyser reads the whole document when the request says which."""
        doc = params.doc or DocRef()
        prefix, suffix = whole_document(prefix, suffix, doc)
        return self.guide(prefix, suffix, heal, path=doc.path, version=doc.version, language=params.language)

    def finished(self, guide: Guide) -> dict[str, object]:
        self.last = guide.summary()
        return self.last
