"""Settings: the client's raw options in, one typed ``Settings`` out (docs/protocol.md, section ``flint``).

Raw options come from ``initializationOptions`` or ``workspace/didChangeConfiguration`` as camelCase
JSON, either bare or under a ``flint`` key. Each field is checked on its own: a bad value costs only
that field (it keeps its default) and produces a warning the server shows to the user. Parsing never
raises.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from engine.presets import DEFAULT_MODEL

Multiline = Literal["auto", "always", "never"]
MULTILINE_CHOICES: tuple[str, ...] = ("auto", "always", "never")


@dataclass(frozen=True)
class Settings:
    model: str = DEFAULT_MODEL  # preset name or model directory
    max_variants: int = 3  # ranked inline items per request (one batched pass)
    max_lines: int = 8  # longest multi-line suggestion
    multiline: Multiline = "auto"
    # 0: Flint answers at once; its own cancellation and newest-wins scheduling replace a debounce
    debounce_ms: int = 0
    cache_size_mb: int = 256  # the on-disk completion cache's cap (0: no disk cache)
    enable: bool = True
    threads: int = 2
    # pre-generation on didChange, futures after a shown suggestion, idle KV warming and type-through
    # answers (off: every request is its own model call, as a plain server would do it)
    speculation: bool = True

    def engine_key(self) -> tuple[str, int]:
        """The settings that need the model reloaded when they change."""
        return (self.model, self.threads)


# camelCase name -> (field name, checker). Each checker returns the parsed value or raises ValueError
# with a message fit for the user.
def _int_in(lo: int, hi: int):
    def check(v: Any) -> int:
        # bool is an int subclass in Python; JSON true is not a number
        if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
            raise ValueError(f"expected an integer, got {v!r}")
        if not lo <= v <= hi:
            raise ValueError(f"expected {lo}..{hi}, got {v!r}")
        return int(v)
    return check


def _nonempty_str(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"expected a preset name or a model directory, got {v!r}")
    return v.strip()


def _choice(*choices: str):
    def check(v: Any) -> str:
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
        return str(v)
    return check


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


_FIELDS: dict[str, tuple[str, Any]] = {
    "model": ("model", _nonempty_str),
    "maxVariants": ("max_variants", _int_in(1, 8)),
    "maxLines": ("max_lines", _int_in(1, 64)),
    "multiline": ("multiline", _choice(*MULTILINE_CHOICES)),
    "debounceMs": ("debounce_ms", _int_in(0, 5000)),
    "cacheSizeMb": ("cache_size_mb", _int_in(0, 1 << 20)),
    "enable": ("enable", _bool),
    "threads": ("threads", _int_in(1, 256)),
    "speculation": ("speculation", _bool),
}
assert {f for f, _ in _FIELDS.values()} == {f.name for f in fields(Settings)}


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Resolve raw client options into Settings, starting from ``base`` (defaults if None).

    Returns the settings and a list of warnings (empty when everything was understood). Fields the client
    did not send keep their value from ``base``; fields it sent wrong fall back to the default.
    """
    base = base or Settings()
    defaults = Settings()
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"Flint settings must be an object, got {type(raw).__name__}; using defaults"]
    if isinstance(raw.get("flint"), dict):
        raw = raw["flint"]
    elif "flint" in raw and raw["flint"] is not None:
        return base, [f"Flint settings 'flint' must be an object, got {type(raw['flint']).__name__}; "
                      "using defaults"]
    elif "flint" in raw:
        raw = {}
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        spec = _FIELDS.get(key)
        if spec is None:
            warnings.append(f"Flint: unknown setting {key!r} ignored")
            continue
        name, check = spec
        if value is None:  # null means "not set": the default
            changes[name] = getattr(defaults, name)
            continue
        try:
            changes[name] = check(value)
        except ValueError as e:
            changes[name] = getattr(defaults, name)
            warnings.append(f"Flint: invalid setting {key}: {e}; using {getattr(defaults, name)!r}")
    return replace(base, **changes), warnings


def to_camel(settings: Settings) -> dict[str, Any]:
    """Settings as the client would spell them (for logs and the status notification)."""
    return {key: getattr(settings, name) for key, (name, _) in _FIELDS.items()}
