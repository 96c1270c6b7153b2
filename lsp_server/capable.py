"""The capable tier a session's settings ask for: loading it (a remote server's client, or a second local model)
and what identifies it (a settings change that keeps the key keeps the loaded tier)."""

from __future__ import annotations

from engine.remote.connection import Cancellable
from lsp_server.settings import Settings


def load_remote(settings: Settings, cancel: Cancellable | None = None) -> object:
    """The capable tier for these settings: the remote server's client (asked for the name of the model
    it serves, best effort, until ``cancel.cancelled``) or a second local model (``capableModel``, loaded
    and warmed)."""
    from engine.backends import LocalBackend, LocalSpec, load_backend
    from engine.remote.client import RemoteBackend

    cfg = settings.remote_config()
    if cfg is not None:
        backend = RemoteBackend(cfg)
        backend.probe(cancel=cancel)  # the served model's name, for the cache identity
        return backend
    if settings.capable_tier() == "capable":
        local = load_backend(LocalSpec(settings.capable_model, threads=settings.threads, kind="capable"))
        assert isinstance(local, LocalBackend)
        return local
    raise ValueError("no capable tier configured (routing with remoteUrl or capableModel)")


def tier_key(s: Settings) -> tuple | None:
    """What identifies the capable tier (as the service compares it)."""
    return s.remote_key() if s.capable_tier() is not None else None
