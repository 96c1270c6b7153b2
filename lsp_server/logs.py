"""Logging for `flint serve`: secrets redacted from every record, and log lines sent to the client.

- Redaction: ``RedactFilter`` sits on every handler, so no record reaches stderr, a log file or the
  client with a secret in it, whatever logger made it and at whatever level (pygls logs whole
  ``InitializeParams`` and pulled settings with ``-v``). ``redact`` (engine/remote/secrets.py, the one
  redaction every exit uses) removes the values Flint knows to be secret (``register_secret``: the remote
  API key from the settings or the environment) and anything shaped like one: ``apiKey=…`` /
  ``"remoteApiKey": "…"`` pairs, ``Bearer …`` tokens, provider-prefixed keys, credentials in URLs.
  ``redact`` is also applied to every window/showMessage, window/logMessage and error answer, and
  ``redact_obj`` to every flint/status (lsp_server/status.py).
- The client's log: ``ClientLogHandler`` sends records as LSP ``window/logMessage`` with their level
  (error, warning, info, log), so an editor shows info as info instead of every stderr line as an error.
  Debug lines go when the server runs with ``-v`` or the client asked for a verbose trace
  (``initialize.trace`` / ``$/setTrace``). A record the client received is not repeated on stderr unless
  stderr logging was asked for (``flint serve --log-stderr``): stdio debugging keeps everything there.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import threading
from typing import Any

# one redaction for every exit (re-exported: the protocol layer and the status board use it from here)
from engine.remote.secrets import redact, redact_obj  # noqa: F401
from engine.remote.secrets import register as register_secret  # noqa: F401
from engine.remote.secrets import register_env as register_env_secrets  # noqa: F401


class RedactFilter(logging.Filter):
    """On every handler: the record's message (arguments merged) and traceback, redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string: still log something, redacted
            msg = f"{record.msg!r} {record.args!r}"
        record.msg = redact(msg)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class OneLineParseErrors(logging.Filter):
    """pygls logs a body that is not JSON with a traceback; the client gets a ParseError answer, the log one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ValueError) and type(exc).__name__ == "JSONDecodeError":
            record.msg, record.args, record.exc_info, record.exc_text = f"a message is not valid JSON: {exc}", None, \
                None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_LEVELS = ((logging.ERROR, 1), (logging.WARNING, 2), (logging.INFO, 3))  # LSP MessageType: Error, Warning, Info


def message_type(levelno: int) -> int:
    """The LSP MessageType for a logging level (below INFO: Log)."""
    for level, kind in _LEVELS:
        if levelno >= level:
            return kind
    return 4


class _Sending(threading.local):
    on = False  # this thread is sending a log line to the client right now


class ClientLogHandler(logging.Handler):
    """Sends records to the client as window/logMessage once ``attach`` gave it a server and its loop.

    Records from other threads (the engine's) are handed to the event loop: the transport is not
    thread-safe. A record emitted while sending one (pygls logs its own sends) is not sent again."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__(logging.DEBUG)
        self.verbose = verbose
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sending = _Sending()
        self.addFilter(OneLineParseErrors())
        self.addFilter(RedactFilter())
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def attach(self, server: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._server, self._loop = server, loop

    def detach(self) -> None:
        self._server = self._loop = None

    @property
    def active(self) -> bool:
        return self._server is not None

    def threshold(self) -> int:
        trace = self._server.protocol.trace if self._server is not None else None
        value = trace.value if isinstance(trace, enum.Enum) else trace
        return logging.DEBUG if self.verbose or str(value) == "verbose" else logging.INFO

    def accepts(self, record: logging.LogRecord) -> bool:
        """Would this record reach the client (so stderr need not repeat it)?"""
        return self.active and record.levelno >= self.threshold() and not self._sending.on

    def refresh_level(self) -> None:
        """Debug records are made only when someone reads them: with -v or a verbose client trace."""
        if self.threshold() <= logging.DEBUG:
            logging.getLogger().setLevel(logging.DEBUG)
        elif not self.verbose:
            logging.getLogger().setLevel(logging.INFO)

    def filter(self, record: logging.LogRecord) -> bool:
        return self.accepts(record) and bool(super().filter(record))  # cheap check first: redaction costs

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        kind = message_type(record.levelno)
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is not None and running is loop:
            self._send(kind, text)
        elif loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._send, kind, text)
            except RuntimeError:  # the loop closed meanwhile: nobody to send to
                pass

    def _send(self, kind: int, text: str) -> None:
        server = self._server
        if server is None:
            return
        from lsprotocol import types

        self._sending.on = True
        try:
            server.window_log_message(types.LogMessageParams(type=types.MessageType(kind), message=text))
        except Exception:  # a closed transport: the line is lost, the server goes on
            pass
        finally:
            self._sending.on = False


class _NotSentToClient(logging.Filter):
    def __init__(self, client: ClientLogHandler) -> None:
        super().__init__()
        self.client = client

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.client.accepts(record)


def setup(verbose: bool, *, stderr_always: bool = True, client: ClientLogHandler | None = None,
          log_file: str | None = None) -> None:
    """Configure the root logger: stderr (all records, or only those the client does not get), an
    optional log file, the client handler; every one of them redacting."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.DEBUG if verbose else logging.INFO)
    err.setFormatter(fmt)
    err.addFilter(OneLineParseErrors())
    err.addFilter(RedactFilter())
    if client is not None and not stderr_always:
        err.addFilter(_NotSentToClient(client))
    root.addHandler(err)
    if log_file:
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setLevel(logging.DEBUG if verbose else logging.INFO)
        fh.setFormatter(fmt)
        fh.addFilter(OneLineParseErrors())
        fh.addFilter(RedactFilter())
        root.addHandler(fh)
    if client is not None:
        root.addHandler(client)
