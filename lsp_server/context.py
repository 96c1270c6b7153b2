"""The repository context the session feeds (engine/context/workspace.py): the open documents' texts as
the user edits them, the workspace folders, the document the user is in; and, in idle time on a worker
thread (never the engine's), the newest context block for the spot the user is at."""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine.context.workspace import ContextBlock, Workspace
from lsp_server.completion.jobs import State
from lsp_server.documents import uri_path
from lsp_server.settings import Settings

log = logging.getLogger(__name__)


class RepoContext:
    def __init__(self, settings: Callable[[], Settings], windows: Callable[[], tuple[int, int]]) -> None:
        self._settings = settings
        self._windows = windows  # the local model's prompt windows (the "file" source adds what they lack)
        self.workspace = Workspace(roots=[])  # snapshots its documents under its own lock
        self._block: ContextBlock | None = None  # the last block gathered (for the engine)

    def set_folders(self, uris: list[str]) -> None:
        """The client's workspace folders (initialize): imports resolve to files under them."""
        roots = [p for p in (uri_path(u) for u in uris) if p is not None]
        self.workspace.set_roots(roots)
        self.workspace.resolver = None  # the "jedi" source's projects are the folders: made anew when asked
        log.debug("workspace folders: %s", [str(r) for r in roots])

    def changed(self, uri: str, text: str, typed: bool, active: str | None) -> None:
        """A document's new text (``typed``: an edit, not an open); ``active``: the document typed in before."""
        path = uri_path(uri)
        if path is None:
            return
        if typed and active is not None and active != uri:  # the user left a document: its edit is done
            old = uri_path(active)
            if old is not None:
                self.workspace.checkpoint(old)
        self.workspace.change(path, text)

    def opened(self, documents: list, active: str | None) -> None:
        """The context was turned on: the open documents (documents.Document) are its documents now (while it
        is off the session feeds it nothing), the one the user is in (``active``) focused last."""
        for doc in documents:
            path = uri_path(doc.uri)
            if path is not None:
                self.workspace.open(path, doc.text)
        if active is not None:
            self.focus(active)

    def focus(self, uri: str) -> None:
        """The user is in this document: the context is gathered for it."""
        path = uri_path(uri)
        if path is not None:
            self.workspace.focus(path)

    def close(self, uri: str) -> None:
        path = uri_path(uri)
        if path is not None:
            self.workspace.close(path)

    def block_for(self, state: State) -> ContextBlock | None:
        """(a worker thread, idle) The newest context block for the spot the user is at, or None."""
        s = self._settings()
        if s.context_budget <= 0 or not s.context_sources:
            self._block = None
            return None
        path = uri_path(state.uri)
        text = self.workspace.text(path) if path is not None else None
        if path is None or text is None:
            return self._block  # not a file (untitled): keep what the engine has
        self.workspace.sources = s.context_sources
        if "jedi" in s.context_sources and self.workspace.resolver is None:
            self.workspace.resolver = _jedi_context(self.workspace.roots)
        self.workspace.checkpoint(path)  # the user paused: the edit so far becomes a recent-edit diff
        before, after = self._windows()
        block = self.workspace.gather(path, text, min(state.offset, len(text)), budget=s.context_budget,
                                      previous=self._block, window_before=before, window_after=after)
        self._block = block
        log.debug("context for %s: %s", state.uri.rsplit("/", 1)[-1],
                  ", ".join(block.labels()) if block is not None else "nothing")
        return block


def _jedi_context(roots: list) -> object:
    """The "jedi" source's resolver on the process's jedi analyser (the one next edits use: jedi runs on
    one thread), each workspace folder a project root."""
    from engine.context.jedi_source import JediContext
    from engine.guidance.jedi_analyser import shared_analyser

    analyser = shared_analyser()
    for r in roots:
        analyser.add_root(str(r))
    return JediContext(analyser)
