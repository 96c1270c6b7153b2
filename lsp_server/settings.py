"""Settings: the client's raw options in, one typed ``Settings`` out (docs/protocol.md, section ``flint``).

Raw options come from ``initializationOptions`` or ``workspace/didChangeConfiguration`` as camelCase
JSON, either bare or under a ``flint`` key. Each field is checked on its own: a bad value costs only
that field (it keeps its current value: a typo in ``model`` must not reload another model) and produces a
warning the server shows to the user. Parsing never raises, and never repeats a secret back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from engine.model.presets import DEFAULT_MODEL
from engine.policy.routing import REMOTE_KINDS, ROUTING_MODES
from engine.remote.wire import FIM_MODES, QWEN_FIM_TEMPLATE, RemoteConfig, parse_endpoint

# definitions (imports, then the file's own beyond the prompt window) beside the other files and edits
CONTEXT_SOURCES: tuple[str, ...] = ("open", "imports", "file", "edits")
# ... and, asked for by name only, "jedi": the definitions jedi resolves for the names used near the cursor
# (engine/context/jedi_source.py; not a default until measured: docs/benchmarks/guidance.md)
KNOWN_SOURCES: tuple[str, ...] = CONTEXT_SOURCES + ("jedi",)
Multiline = Literal["auto", "always", "never"]
MULTILINE_CHOICES: tuple[str, ...] = ("auto", "always", "never")


@dataclass(frozen=True)
class Settings:
    model: str = DEFAULT_MODEL  # preset name or model directory
    max_variants: int = 3  # ranked inline items per request (one batched pass)
    max_lines: int = 8  # longest multi-line suggestion
    multiline: Multiline = "auto"
    cache_size_mb: int = 256  # the on-disk completion cache's cap (0: no disk cache)
    enable: bool = True
    threads: int = 2
    # generation on didChange, idle KV warming and type-through answers (off: every request is its own model call, as a plain server would do it)
    speculation: bool = True
    # hybrid routing (docs/remote.md): a remote OpenAI-compatible server beside the local model
    routing: str = "local"  # local | hybrid | remote (engine/policy/routing.py)
    remote_url: str = ""  # base URL, e.g. http://127.0.0.1:8080/v1
    remote_model: str = ""  # "" = the model the server lists first
    remote_api_key: str = field(default="", repr=False)  # "" = $FLINT_REMOTE_API_KEY; never logged
    remote_fim: str = "template"  # template | suffix | none
    remote_fim_template: str = QWEN_FIM_TEMPLATE
    remote_for: tuple[str, ...] = REMOTE_KINDS  # what hybrid sends to the remote
    remote_timeout_ms: int = 5000  # a remote answer the user waits for: after this, the local model
    remote_allow_insecure_http: bool = False  # plain http:// to a non-loopback host
    # the capable tier on this machine when there is no remote: a second local model (a preset name or a
    # model directory, e.g. qwen2.5-coder-1.5b); remoteUrl takes precedence
    capable_model: str = ""
    # repository context (engine/context/workspace.py): a block of other files' chunks in front of the file window,
    # this many tokens at most (0: none; the KV cache grows by it), from these sources
    # off until a run through the server shows it helps: on a slow-prefill CPU the block's prefill competes
    # with the file window's (docs/benchmarks/context.md)
    context_budget: int = 0
    context_sources: tuple[str, ...] = CONTEXT_SOURCES
    # an automatic suggestion ends before its first token the model gave a lower probability than this (a
    # typist takes a suggestion only when all of it is right; what follows a guess is only as good as the
    # guess); 0: whole lines. Explicit requests are never cut. None: the language's own
    # (items.DOUBT_BY_LANGUAGE: 0.9, chosen on the replay's tuning halves, confirmed once on validation)
    confidence_cut: float | None = None
    # where something is typed on the line, an automatic suggestion whose first visible token the model gave a
    # lower probability than this is not shown (doubt_cut cannot cut before its first character); 0: off.
    # None: the language's own (items.DOUBT_BY_LANGUAGE: Go 0.4, the others off)
    confidence_gate: float | None = None
    # the learned gate (engine/policy/gate.py, lsp_server/gatekeeper.py): an automatic suggestion shown whole, up to
    # its first doubt, or not at all, adjusted to the user's outcomes. None: the language's own
    # (items.GATED_LANGUAGES: those where the replay's tuning half chose it and its validation half confirmed it
    # once, docs/benchmarks/gate.md)
    learned_gate: bool | None = None
    # the learned gate adjusts itself to the user's own outcomes (lsp_server/gate_user.py); off: the model alone,
    # and nothing of the user's is kept
    learned_gate_adapts: bool = True
    # monitor-guided decoding (docs/guidance.md): in Python files, names jedi knows constrain the model's
    # picks after ``obj.``, at names in expressions and call arguments. Off: on held-out lines it changed
    # almost nothing and cost keystroke time (docs/benchmarks/guidance.md)
    guidance: bool = False

    def engine_key(self) -> tuple[str, int]:
        """The settings that need the model reloaded when they change (not the context budget: the KV cache
        grows by the budget the model was loaded with; a larger block then shortens the file window)."""
        return (self.model, self.threads)

    def remote_key(self) -> tuple:
        """The settings that need the capable tier (remote client or local model) rebuilt on change."""
        return (self.remote_url, self.remote_model, self.remote_api_key, self.remote_fim,
                self.remote_fim_template, self.remote_allow_insecure_http, self.capable_model, self.threads)

    def capable_tier(self) -> str | None:
        """``remote`` | ``capable`` (a second local model) | None: what answers routed requests."""
        if self.routing == "local":
            return None
        if self.remote_url:
            return "remote"
        if self.capable_model:
            return "capable"
        return None

    def remote_config(self) -> RemoteConfig | None:
        """The remote client's configuration, or None when no remote is in use."""
        if self.capable_tier() != "remote":
            return None
        return RemoteConfig(url=self.remote_url, model=self.remote_model, api_key=self.remote_api_key,
                            fim=self.remote_fim, fim_template=self.remote_fim_template,
                            allow_insecure_http=self.remote_allow_insecure_http)


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


def _float_in(lo: float, hi: float):
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
            raise ValueError(f"expected a number in {lo}..{hi}, got {v!r}")
        return float(v)
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


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    return v.strip()


def _url(v: Any) -> str:
    v = _str(v)
    if v:
        parse_endpoint(v, allow_insecure_http=True)  # the http-to-remote rule is checked with its switch
    return v


def _template(v: Any) -> str:
    v = _str(v)
    if "{prefix}" not in v:
        raise ValueError("the FIM template must contain {prefix} (and usually {suffix})")
    return v


def _names(known: tuple[str, ...], listed: tuple[str, ...], what: str) -> Callable[[Any], tuple[str, ...]]:
    """A list of some of ``known`` (``listed``: the ones an error names first), kept in ``known``'s order."""
    def parse(v: Any) -> tuple[str, ...]:
        if not isinstance(v, list) or not all(isinstance(k, str) for k in v):
            raise ValueError(f"expected a list of {', '.join(listed)}, got {v!r}")
        bad = [k for k in v if k not in known]
        if bad:
            raise ValueError(f"unknown {what} {bad!r}: expected some of {', '.join(known)}")
        return tuple(k for k in known if k in v)
    return parse


_kinds = _names(REMOTE_KINDS, REMOTE_KINDS, "kinds")
_sources = _names(KNOWN_SOURCES, CONTEXT_SOURCES, "sources")


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


_FIELDS: dict[str, tuple[str, Any]] = {
    "model": ("model", _nonempty_str),
    "maxVariants": ("max_variants", _int_in(1, 8)),
    "maxLines": ("max_lines", _int_in(1, 64)),
    "multiline": ("multiline", _choice(*MULTILINE_CHOICES)),
    "cacheSizeMb": ("cache_size_mb", _int_in(0, 1 << 20)),
    "enable": ("enable", _bool),
    "threads": ("threads", _int_in(1, 256)),
    "speculation": ("speculation", _bool),
    "routing": ("routing", _choice(*ROUTING_MODES)),
    "remoteUrl": ("remote_url", _url),
    "remoteModel": ("remote_model", _str),
    "remoteApiKey": ("remote_api_key", _str),
    "remoteFim": ("remote_fim", _choice(*FIM_MODES)),
    "remoteFimTemplate": ("remote_fim_template", _template),
    "remoteFor": ("remote_for", _kinds),
    "remoteTimeoutMs": ("remote_timeout_ms", _int_in(100, 600_000)),
    "remoteAllowInsecureHttp": ("remote_allow_insecure_http", _bool),
    "capableModel": ("capable_model", _str),
    "contextBudget": ("context_budget", _int_in(0, 4096)),
    "contextSources": ("context_sources", _sources),
    "confidenceCut": ("confidence_cut", _float_in(0.0, 1.0)),
    "confidenceGate": ("confidence_gate", _float_in(0.0, 1.0)),
    "learnedGate": ("learned_gate", _bool),
    "learnedGateAdapts": ("learned_gate_adapts", _bool),
    "guidance": ("guidance", _bool),
}
SECRET_FIELDS = frozenset({"remote_api_key"})
assert {f for f, _ in _FIELDS.values()} == {f.name for f in fields(Settings)}


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Resolve raw client options into Settings, starting from ``base`` (defaults if None).

    Returns the settings and a list of warnings (empty when everything was understood). Fields the client
    did not send, and fields it sent wrong, keep their value from ``base``; ``null`` resets a field to
    its default.
    """
    base = base or Settings()
    defaults = Settings()
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"Flint settings must be an object, got {type(raw).__name__}; keeping the current settings"]
    if isinstance(raw.get("flint"), dict):
        raw = raw["flint"]
    elif "flint" in raw and raw["flint"] is not None:
        return base, [f"Flint settings 'flint' must be an object, got {type(raw['flint']).__name__}; "
                      "keeping the current settings"]
    elif "flint" in raw:
        raw = {}
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    default_values, base_values = asdict(defaults), asdict(base)
    for key, value in raw.items():
        spec = _FIELDS.get(key)
        if spec is None:
            warnings.append(f"Flint: unknown setting {key!r} ignored")
            continue
        name, check = spec
        if value is None:  # null means "not set": the default
            changes[name] = default_values[name]
            continue
        try:
            changes[name] = check(value)
        except ValueError as err:
            secret = name in SECRET_FIELDS  # a secret's value is never repeated back
            msg = "expected a string" if secret else str(err)
            current = base_values[name]
            shown = ("the current key" if current else "none") if secret else repr(current)
            warnings.append(f"Flint: invalid setting {key}: {msg}; keeping {shown}")
    out = replace(base, **changes)
    if out.routing != "local":
        if not out.remote_url and not out.capable_model:
            warnings.append(f"Flint: routing {out.routing!r} needs remoteUrl or capableModel; answering locally")
        else:
            try:
                parse_endpoint(out.remote_url, out.remote_allow_insecure_http)
            except ValueError as e:
                keep = base.remote_url if _endpoint_ok(base.remote_url, out.remote_allow_insecure_http) else ""
                warnings.append(f"Flint: remoteUrl: {e}; " + (f"keeping {keep}" if keep else "answering locally"))
                out = replace(out, remote_url=keep)
    return out, warnings


def _endpoint_ok(url: str, allow_insecure_http: bool) -> bool:
    if not url:
        return False
    try:
        parse_endpoint(url, allow_insecure_http)
    except ValueError:
        return False
    return True


def to_camel(settings: Settings) -> dict[str, Any]:
    """Settings as the client would spell them (for logs and the status notification); secrets masked."""
    values = asdict(settings)
    out = {key: values[name] for key, (name, _) in _FIELDS.items()}
    for key, (name, _) in _FIELDS.items():
        if name in SECRET_FIELDS and out[key]:
            out[key] = "***"
        elif isinstance(out[key], tuple):
            out[key] = list(out[key])
    return out
