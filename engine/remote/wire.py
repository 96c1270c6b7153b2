"""The wire side of the remote client (engine/remote/client.py): its configuration, the checks on the server's base
URL (plain HTTP only to a loopback address unless ``allow_insecure_http`` says otherwise; no credentials,
query or fragment in it, and none shown in a message), the JSON body of a ``/completions`` request, and the
parsing of the server-sent event stream that answers it. No connection here: the backend owns that.

- FIM: ``fim="suffix"`` sends the text after the cursor in the request's ``suffix`` field (Ollama, and
  servers whose model supports it); ``fim="template"`` builds the model's FIM prompt as raw text
  (``<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>`` by default: Qwen2.5-Coder; vLLM and
  llama-cpp-python, whose ``suffix`` handling is not FIM); ``fim="none"``: the prefix alone.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from engine.remote.secrets import API_KEY_ENV, excerpt, redact
from engine.text.window import MAX_PREFIX_CHARS, MAX_SUFFIX_CHARS
from engine.types import GenParams

FIM_MODES = ("template", "suffix", "none")
QWEN_FIM_TEMPLATE = "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"
# text that ends a completion whatever the server thinks (FIM models' control tokens, if a server lets
# them through as text)
DEFAULT_STOP_TEXTS = ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|fim_prefix|>",
                      "<|fim_suffix|>", "<|fim_middle|>", "<|im_end|>")
ERROR_BODY_CHARS = 300
# what one answer may bring (a hostile or broken server may send anything, forever): past a cap the
# connection is closed and the request fails with the cap named
MAX_ERROR_BODY_BYTES = 4096  # of an error answer, for its message
MAX_MODELS_BYTES = 256 * 1024  # GET /models
MAX_LINE_BYTES = 64 * 1024  # one line of the event stream
MAX_STREAM_BYTES = 4 * 1024 * 1024  # one streamed answer, all lines
MAX_TEXT_CHARS = 64 * 1024  # one completion's text
READ_IDLE_S = 10.0  # per read: a connection silent this long is dead, whatever the deadline says
REQUEST_CAP_S = 60.0  # the overall deadline of a request made without one


class RemoteError(RuntimeError):
    """The remote server did not give a usable answer (an expected failure: the caller falls back). Its
    message often quotes the server: it is redacted here, once, whatever the server sent."""

    quiet = True  # logged as one line, not a traceback

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True)
class RemoteConfig:
    url: str  # base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1
    model: str = ""  # "" asks the server (GET {url}/models) for the model it serves
    api_key: str = field(default="", repr=False)  # "" falls back to $FLINT_REMOTE_API_KEY
    fim: str = "template"
    fim_template: str = QWEN_FIM_TEMPLATE
    allow_insecure_http: bool = False
    connect_timeout_s: float = 3.0
    max_prefix_chars: int = MAX_PREFIX_CHARS
    max_suffix_chars: int = MAX_SUFFIX_CHARS
    stop_texts: tuple[str, ...] = DEFAULT_STOP_TEXTS
    backoff_base_s: float = 0.5
    # a remote that recovers is tried again within this (plus one request timeout): under 30 s in all
    backoff_cap_s: float = 20.0


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    path: str  # base path without a trailing slash ("/v1")

    @property
    def label(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


LOCAL_NAMES = ("localhost", "localhost.localdomain")
RESOLVE_TIMEOUT_S = 1.0


def _resolve(host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str]:
    """The addresses ``host`` resolves to ([] when it does not, or not within ``timeout``: getaddrinfo has
    no timeout of its own, so it runs on a helper thread)."""
    out: list[str] = []

    def look() -> None:
        try:
            out.extend(str(info[4][0]) for info in socket.getaddrinfo(host, None))
        except (OSError, UnicodeError):
            pass

    t = threading.Thread(target=look, name="flint-resolve", daemon=True)
    t.start()
    t.join(timeout)
    return [] if t.is_alive() else list(out)


def is_loopback(host: str) -> bool:
    """A loopback IP address, or a ``localhost`` name that resolves to loopback addresses only (a name is
    just a name: /etc/hosts or DNS may point ``localhost`` or ``*.localhost`` anywhere)."""
    h = host.strip("[]").lower().rstrip(".")
    try:
        return ipaddress.ip_address(h.split("%")[0]).is_loopback
    except ValueError:
        pass
    if h not in LOCAL_NAMES and not h.endswith(".localhost"):
        return False
    addrs = _resolve(h)
    try:
        return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)
    except ValueError:
        return False


def safe_url(url: str) -> str:
    """``url`` fit for a message or a log: credentials, query and fragment (where keys get pasted) hidden."""
    try:
        parts = urlsplit(url.strip())
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = "?***" if parts.query else ""
        fragment = "#***" if parts.fragment else ""
        return f"{parts.scheme}://{netloc}{parts.path}{query}{fragment}" if parts.scheme else \
            (url.split("?", 1)[0].split("#", 1)[0] + query + fragment)
    except ValueError:
        return "<unreadable URL>"


def parse_endpoint(url: str, allow_insecure_http: bool = False) -> Endpoint:
    """Check and split a base URL. Raises ValueError with a message fit for the user (and never repeats a
    key the URL may carry)."""
    shown = repr(safe_url(url))
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"remote URL must start with http:// or https://, got {shown}")
    if parts.username or parts.password:
        raise ValueError("remote URL must not carry credentials: use remoteApiKey or $" + API_KEY_ENV)
    if not parts.hostname:
        raise ValueError(f"remote URL has no host: {shown}")
    if parts.query or parts.fragment:
        raise ValueError(f"remote URL must be a base URL without query or fragment (a key goes in remoteApiKey "
                         f"or ${API_KEY_ENV}), got {shown}")
    host = parts.hostname
    if parts.scheme == "http" and not is_loopback(host) and not allow_insecure_http:
        raise ValueError(f"plain http:// to {host} would send code unencrypted: use https://, a loopback "
                         "address, or set remoteAllowInsecureHttp")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        raise ValueError(f"remote URL has a bad port: {shown}") from e
    path = parts.path.rstrip("/")
    for tail in ("/completions", "/chat/completions"):  # a full endpoint URL given: take its base
        if path.endswith(tail):
            path = path[: -len(tail)]
    return Endpoint(parts.scheme, host, port, path)


def fim_prompt(template: str, prefix: str, suffix: str) -> str:
    """The template with ``{prefix}`` and ``{suffix}`` filled (in one pass: code may contain either)."""
    i, j = template.find("{prefix}"), template.find("{suffix}")
    if i < 0:
        raise ValueError("the FIM template must contain {prefix}")
    if j < 0:
        return template[:i] + prefix + template[i + 8:]
    if i < j:
        return template[:i] + prefix + template[i + 8: j] + suffix + template[j + 8:]
    return template[:j] + suffix + template[j + 8: i] + prefix + template[i + 8:]


def request_body(cfg: RemoteConfig, model: str, prefix: str, suffix: str, params: GenParams,
                 variant: int, max_tokens: int | None = None) -> dict[str, Any]:
    """The JSON body of one ``/completions`` request for one variant."""
    if cfg.fim == "template":
        prompt = fim_prompt(cfg.fim_template, prefix, suffix)
    else:
        prompt = prefix
    greedy = variant == 0 and params.temperature == 0
    body: dict[str, Any] = {
        "prompt": prompt,
        "max_tokens": int(max_tokens if max_tokens is not None else params.max_tokens),
        "temperature": 0.0 if greedy else (params.temperature if variant == 0 else params.variant_temperature),
        "top_p": 1.0 if greedy else params.top_p,
        "seed": params.seed + variant,
        "stream": True,
    }
    if model:
        body["model"] = model
    if cfg.fim == "suffix":
        body["suffix"] = suffix
    stop = list(params.stop)
    if params.max_lines == 1 and "\n" not in stop:
        stop.insert(0, "\n")  # one line: the server stops there (and the connection stays usable)
    if stop:
        body["stop"] = stop[:4]  # the OpenAI API takes at most 4
    return body


def parse_event(line: bytes) -> dict[str, Any] | str | None:
    """One line of a server-sent event stream: a JSON object (``data: {...}``), ``"done"``
    (``data: [DONE]``), or None (blank lines, comments, other fields). Raises RemoteError when a data
    line is not JSON."""
    line = line.rstrip(b"\r\n")
    if not line.startswith(b"data:"):
        return None
    data = line[5:].strip()
    if data == b"[DONE]":
        return "done"
    try:
        obj = json.loads(data)
    except ValueError:
        raise RemoteError(f"malformed event from the server: {excerpt(data, 80)!r}") from None
    if not isinstance(obj, dict):
        raise RemoteError(f"malformed event from the server: {excerpt(data, 80)!r}")
    if "error" in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise RemoteError(f"server error: {excerpt(str(msg), ERROR_BODY_CHARS)}")
    return obj


def event_text(obj: dict[str, Any]) -> tuple[str, str | None]:
    """(text, finish_reason) of a completion chunk. Raises RemoteError for a chunk without choices."""
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        if "usage" in obj:  # a final usage-only chunk
            return "", None
        raise RemoteError("malformed event from the server: no choices")
    c = choices[0]
    text = c.get("text")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise RemoteError("malformed event from the server: text is not a string")
    fr = c.get("finish_reason")
    return text, fr if isinstance(fr, str) else None
