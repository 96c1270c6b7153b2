"""One record per open document (ruff_server's one controller per document): everything the service keeps
about it on the event loop, dropped by one ``close``. The schedulers keep their own copy of what they need.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from lsp_server.completion.jobs import State
from lsp_server.completion.policy import knobs


@dataclass
class DocRecord:
    state: State | None = None  # where the user is: the state an edit, a cursor move or a request put them at
    window: tuple[int, float] | None = None  # the prompt window's start (kept while it fits) and since when
    keystrokes: deque[float] = field(default_factory=lambda: deque(maxlen=knobs.TYPING_HISTORY))
    asked: asyncio.Event | None = None  # set when a newer request for the document comes (Superseded)
    watch_auto: bool = True  # the answer watched for a refresh was an automatic request's
    refreshed: tuple[int, float, bool] | None = None  # the last refresh sent: (version, when, watch_auto)
    watcher: asyncio.Task | None = None  # the refresh watch (followups.FollowUps.watch)

    def close(self) -> None:
        """The document closed: a request still waiting there is answered (Superseded), the watch stops."""
        if self.asked is not None:
            self.asked.set()
        if self.watcher is not None:
            self.watcher.cancel()


class DocRecords(dict[str, DocRecord]):
    """The open documents' records, each made at its first use; ``active``: where the user typed or moved last."""

    def __init__(self) -> None:
        super().__init__()
        self.active: str | None = None

    def __missing__(self, uri: str) -> DocRecord:
        record = self[uri] = DocRecord()
        return record

    def state(self, uri: str) -> State | None:
        record = self.get(uri)
        return record.state if record is not None else None

    def active_state(self) -> State | None:
        return self.state(self.active) if self.active is not None else None

    def close(self, uri: str) -> None:
        record = self.pop(uri, None)
        if record is not None:
            record.close()
        if self.active == uri:
            self.active = None
