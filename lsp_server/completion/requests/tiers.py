"""The backend tiers: the local model's scheduler, and the capable tier's (a remote server or a second local
model) when the settings name one, each its own worker writing into the one store."""

from __future__ import annotations

from collections.abc import Callable

from lsp_server.completion.events import Events
from lsp_server.completion.scheduler.runner import Loader
from lsp_server.completion.scheduler.worker import Worker
from lsp_server.completion.store.store import Store
from lsp_server.settings import Settings

# load(settings): what answers completions (a Backend, or a bare engine wrapped as a local one)
Load = Callable[[Settings], object]


class Tiers:
    def __init__(self, store: Store, settings: Callable[[], Settings], events: Events, load: Load,
                 load_remote: Load) -> None:
        self._store = store
        self._settings = settings
        self._events = events
        self._load = load
        self._load_remote = load_remote
        self.local = self._worker("local", self._loader(load))
        self.remote: Worker | None = None  # the capable tier: its own thread, never holds the local model
        self.workers = [self.local]  # both (the capable tier's last), as data: a keystroke reads it
        self._remote_key: tuple | None = None
        self._started = False

    def _worker(self, tier: str, load: Loader) -> Worker:
        worker = Worker(load, self._store, self._events, tier)
        self._store.attach(worker)  # the store's tickets submit this tier's work to it
        return worker

    def _loader(self, load: Load) -> Loader:
        """``load`` with the settings of now (the engine thread calls it, and reads no live settings)."""
        settings = self._settings()
        return lambda: load(settings)

    def start(self) -> None:
        self._started = True
        self.local.start()
        self.sync_remote()

    def reload(self) -> None:
        self.local.reload(self._loader(self._load))

    def sync_remote(self) -> bool:
        """Start, replace or stop the capable tier to match the settings; False when there is none."""
        s = self._settings()
        key = s.remote_key() if s.capable_tier() is not None else None
        if key == self._remote_key and (key is None) == (self.remote is None):
            return self.remote is not None
        old, self.remote = self.remote, None
        self.workers = [self.local]
        self._remote_key = key
        if old is not None:
            _stop_worker(old)
        if key is None or not self._started:
            return False
        self.remote = self._worker("remote", self._loader(self._load_remote))
        self.workers = [self.local, self.remote]
        self.remote.start()
        return True

    def shutdown(self) -> None:
        self.local.stop()
        if self.remote is not None:
            _stop_worker(self.remote)

    def remote_ready(self) -> bool:
        """Is a capable tier configured, loaded and not backing off after a failure?"""
        eng = self.remote.engine if self.remote is not None else None
        return eng is not None and eng.ready()

    def remote_name(self) -> str:
        """The capable tier's name on items and in the status: ``remote`` or ``capable`` (a local model)."""
        eng = self.remote.engine if self.remote is not None else None
        return eng.kind if eng is not None else self._settings().capable_tier() or "remote"


def _stop_worker(w: Worker) -> None:
    w.stop(timeout=2.0)
    if w.engine is not None:
        w.engine.close()
