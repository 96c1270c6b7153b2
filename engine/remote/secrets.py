"""Secrets out of every text Flint logs, shows or stores: one registry and one ``redact`` for every exit (the
log handlers, window/logMessage and window/showMessage, flint/status, error answers, a ``RemoteError``'s
message, the disk cache). It lives in the engine because the engine makes the texts a remote sends back;
lsp_server/logs.py re-exports it.

- Known values (``register``): the remote API key from the settings and from ``$FLINT_REMOTE_API_KEY``, whole,
  and a piece of one cut off at either end of a text (a body read up to a byte cap, an excerpt).
- Shapes (``redact`` only): ``apiKey=…`` / ``"remoteApiKey": "…"`` pairs, ``Bearer …`` / ``Basic …``, credentials
  in URLs, ``key …`` / ``API key provided: …`` phrases, and the prefixes providers give their keys
  (``sk-``, ``gsk_``, ``hf_``, ``ghp_``, ``AKIA``, JWTs …).
- Code (``scrub``): a completion's text loses known values only; shapes there are ordinary code
  (``api_key = os.environ[…]``). ``held`` says how much of a streamed text's tail to hold back because it
  could be the start of a known value.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

API_KEY_ENV = "FLINT_REMOTE_API_KEY"
MASK = "***"
_MIN_SECRET = 4  # shorter values would blank out ordinary words
_MIN_PIECE = 6  # a cut-off piece of a known value this long at a text's end is removed too

_secrets: set[str] = set()
_lock = threading.Lock()

_NAME = (r"[A-Za-z0-9_.-]*(?:[Aa][Pp][Ii][-_]?[Kk][Ee][Yy]|[Ss][Ee][Cc][Rr][Ee][Tt]|[Pp][Aa][Ss][Ss][Ww](?:[Oo][Rr])?[Dd]"
         r"|[Cc]redentials?)"
         r"|(?:[A-Za-z0-9]+[-_.])*(?:[Tt]oken|TOKEN|[Kk]ey|KEY|[Aa]uthorization|AUTHORIZATION|[Aa]uth)"
         r"|[a-z0-9]+(?:Token|Key|Auth)")
# name = value, name: value, 'name': 'value', "name": "value", ?name=value&
_PAIR = re.compile(r"""(?<![A-Za-z0-9_-])(["']?)(""" + _NAME + r""")\1(\s*[:=]\s*)(?:"[^"]*"|'[^']*'|[^\s"',;&)}\]<]+)""")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@:]*:[^/\s@]*@")
# "rate limit reached for key sk-…", "Incorrect API key provided: …", "token abc123…": a key-like word
_PHRASE = re.compile(r"(?i)\b((?:api[ _-]?)?(?:key|token|secret))\b((?:\s+provided)?(?:\s*[:=]\s*|\s+))([\"']?)"
                     r"([A-Za-z0-9][A-Za-z0-9_.~+/=-]{11,})")
_PREFIXED = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_-]{12,}|\bgsk_[A-Za-z0-9]{12,}|\bhf_[A-Za-z0-9]{12,}"
                       r"|\bgh[pousr]_[A-Za-z0-9]{16,}|\bgithub_pat_[A-Za-z0-9_]{16,}|\bglpat-[A-Za-z0-9_-]{12,}"
                       r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{30,}"
                       r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+")


def register(value: str | None) -> None:
    """Remember a secret value: it is replaced wherever it appears in a text that leaves Flint."""
    if value and len(value.strip()) >= _MIN_SECRET:
        with _lock:
            _secrets.add(value.strip())


def register_env() -> None:
    register(os.environ.get(API_KEY_ENV))


def known() -> list[str]:
    with _lock:
        return sorted(_secrets, key=len, reverse=True)


def _cut_pieces(text: str, secrets: list[str]) -> str:
    """``text`` without a piece of a known value at its end (a cut-off start) or its start (a cut-off end)."""
    for s in secrets:
        for n in range(min(len(s) - 1, len(text)), _MIN_PIECE - 1, -1):
            if text.endswith(s[:n]):
                text = text[:-n] + MASK
                break
        for n in range(min(len(s) - 1, len(text)), _MIN_PIECE - 1, -1):
            if text.startswith(s[-n:]):
                text = MASK + text[n:]
                break
    return text


def scrub(text: str) -> str:
    """``text`` (code: a completion) with every known secret replaced; nothing else is touched."""
    if not text:
        return text
    for s in known():
        if s in text:
            text = text.replace(s, MASK)
    return text


def held(text: str) -> int:
    """How many characters at the end of a streamed ``text`` could be the start of a known secret (held back
    until the next piece says whether they are)."""
    best = 0
    for s in known():
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:n]):
                best = n
                break
    return best


def redact(text: str) -> str:
    """``text`` with every known secret (whole or cut off at an end) and anything shaped like one replaced."""
    if not text:
        return text
    secrets = known()
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    text = _cut_pieces(text, secrets)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _PREFIXED.sub(MASK, text)

    def phrase(m: re.Match[str]) -> str:
        word = m.group(4)
        if not (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
            return m.group(0)  # an ordinary word ("key provided: something_else")
        return f"{m.group(1)}{m.group(2)}{m.group(3)}{MASK}"

    text = _PHRASE.sub(phrase, text)

    def pair(m: re.Match[str]) -> str:
        q = m.group(1)
        return f"{q}{m.group(2)}{q}{m.group(3)}{MASK}"

    return _PAIR.sub(pair, text)


def excerpt(text: str | bytes, limit: int) -> str:
    """At most ``limit`` characters of a remote's ``text`` for a message: redacted first, then cut (cutting
    first could leave a piece of a key that no longer matches)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    out = redact(text.strip())
    return out if len(out) <= limit else out[:limit] + "…"


def redact_obj(obj: Any) -> Any:
    """Every string in a JSON-like value (flint/status) redacted; the structure kept."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj
