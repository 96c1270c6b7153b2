"""Backends: what answers a completion request. ``Backend`` is the one contract the server codes
against, implemented fully by both: ``model_id``, ``config`` (the prompt windows: ``max_prefix_chars``,
``max_suffix_chars``), ``kind`` (``local`` | ``capable`` | ``remote``, reported as an answer's backend),
``ready()`` (may it be asked now: a remote backs off after failures), ``complete(prefix, suffix, params,
cancel, on_token)``, ``prefill(prefix, suffix, cancel)`` (idle warm-up; a no-op where there is no KV
cache to warm), ``set_context(block)`` / ``context_digest`` / ``context_labels`` (the repository context
block in front of prompts: engine/context/workspace.py; a remote ignores it) and ``close()``. Each backend clips the prompt window itself.

- ``LocalBackend``: an in-process ONNX model (``engine.engine.Engine``): the fast default, or the
  Qwen2.5-Coder-1.5B preset as the capable tier on one machine.
- ``RemoteBackend`` (engine/remote/client.py): an OpenAI-compatible ``/v1/completions`` server.

``load_backend`` is the registry: a spec names the kind and its settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.remote.client import RemoteBackend
from engine.remote.wire import RemoteConfig
from engine.types import CancelToken, Completion, GenParams, Timings, TokenCallback

# the capable local model's prefill chunk: it shares the cores with the fast model, which answers the
# keystrokes, so its prompt pass stops sooner when one comes (half the default chunk: a bigger model's
# chunk takes longer; docs/benchmarks/archive/forward.1_5b.md)
CAPABLE_CHUNK = 32


class Backend(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    @property
    def config(self) -> Any: ...

    def ready(self) -> bool: ...

    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: TokenCallback | None = None
                 ) -> tuple[list[Completion], Timings]: ...

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> Timings | None:
        """Warm the KV cache for a prompt (idle time): what it ran, or None when there is nothing to warm (no
        KV cache, or it holds the prompt already: the backend knows, nobody mirrors it)."""
        ...

    def prefill_seconds(self, prefix: str, suffix: str = "") -> float | None:
        """How long the prompt pass of the full window would take now (None: not known; a remote's is its own)."""
        ...

    def set_context(self, block: Any) -> bool:
        """Put a repository context block (engine.context.block.ContextBlock or None) in front of prompts from now
        on; True when it changed what the backend holds."""
        ...

    @property
    def context_digest(self) -> str:
        """The identity of the context block in use ("" when none): part of the cache identity."""
        ...

    @property
    def context_labels(self) -> tuple[str, ...]:
        """The context chunks (path:line (source)) in front of the prompt the backend ran last."""
        ...

    def close(self) -> None: ...


class LocalEngine(Protocol):
    """What ``LocalBackend`` forwards to: ``engine.engine.Engine`` (or the tests' stand-in, tests/fakes.py)."""

    @property
    def model_id(self) -> str: ...

    @property
    def context_digest(self) -> str: ...

    config: Any  # EngineConfig: the prompt windows
    last_context: tuple[str, ...]  # the context chunks in front of the prompt run last
    guidance: Any  # the monitor (engine/guidance/service.py Guidance), once a guided request built it

    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: TokenCallback | None = None
                 ) -> tuple[list[Completion], Timings]: ...

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> Timings | None: ...

    def prefill_seconds(self, prefix: str, suffix: str = "") -> float | None: ...

    def set_context(self, block: Any) -> bool: ...


class LocalBackend:
    """An ``Engine`` as a backend (it forwards everything; ``prefill`` warms its KV cache when idle)."""

    def __init__(self, engine: LocalEngine, kind: str = "local") -> None:
        self.engine = engine
        self.kind = kind  # "local" (the fast model) or "capable" (a second local model as the capable tier)

    @classmethod
    def load(cls, model: str | Path | None = None, threads: int | None = None, warm: bool = True,
             kind: str = "local", context_tokens: int = 0) -> LocalBackend:
        from engine.config import EngineConfig
        from engine.engine import Engine

        config = EngineConfig(context_tokens=context_tokens)
        if kind == "capable":  # (no step session: a second copy of a 1.5B model's weights is a gigabyte)
            config = EngineConfig(context_tokens=context_tokens, prefill_chunk=CAPABLE_CHUNK, warm_chunk=CAPABLE_CHUNK,
                                  step_session=False)
        return cls(Engine.load(model, threads=threads, warm=warm, config=config), kind)

    @property
    def model_id(self) -> str:
        return self.engine.model_id

    @property
    def config(self) -> Any:
        return self.engine.config

    def ready(self) -> bool:
        return True

    def complete(self, prefix: str, suffix: str = "", params: GenParams | None = None,
                 cancel: CancelToken | None = None, on_token: TokenCallback | None = None
                 ) -> tuple[list[Completion], Timings]:
        return self.engine.complete(prefix, suffix, params, cancel=cancel, on_token=on_token)

    def prefill(self, prefix: str, suffix: str = "", cancel: CancelToken | None = None) -> Timings | None:
        return self.engine.prefill(prefix, suffix, cancel)

    def prefill_seconds(self, prefix: str, suffix: str = "") -> float | None:
        return self.engine.prefill_seconds(prefix, suffix)

    def set_context(self, block: Any) -> bool:
        return bool(self.engine.set_context(block))

    @property
    def context_digest(self) -> str:
        return self.engine.context_digest

    @property
    def context_labels(self) -> tuple[str, ...]:
        return tuple(self.engine.last_context)

    def guidance_summary(self) -> dict[str, object] | None:
        """What the monitor did in the last guided generation (engine/guidance/guide.py ``summary``)."""
        g = self.engine.guidance
        return g.last if g is not None else None

    def close(self) -> None:
        pass  # the model's memory goes with the object


@dataclass(frozen=True)
class LocalSpec:
    model: str | None = None
    threads: int | None = None
    warm: bool = True
    kind: str = "local"


def load_backend(spec: LocalSpec | RemoteConfig) -> LocalBackend | RemoteBackend:
    """A backend from its spec: a local model (loaded and warmed) or a remote server (no network until
    the first request)."""
    if isinstance(spec, RemoteConfig):
        return RemoteBackend(spec)
    return LocalBackend.load(spec.model, threads=spec.threads, warm=spec.warm, kind=spec.kind)


def as_backend(obj: Any) -> LocalBackend | RemoteBackend:
    """The Backend for what a loader returned: a backend as is, a bare engine (``Engine``, a test's
    stand-in) wrapped as a local one. The one place an engine-shaped object is adapted."""
    if isinstance(obj, LocalBackend | RemoteBackend):
        return obj
    return LocalBackend(obj)
