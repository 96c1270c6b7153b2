"""Reliability promises that need no server process (docs/reliability.md): secrets redacted, log levels,
loopback names, lone surrogates, messages that name the problem, `flint --version` / `serve --stdio`."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import ModelNotBuilt, resolve_model_dir
from engine.remote import wire as remote_protocol
from lsp_server import logs
from lsp_server.documents import Change, DocumentStore

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ secrets


@pytest.mark.parametrize("text,secret", [
    ("InitializeParams(initialization_options={'remoteApiKey': 'sk-A1B2C3D4', 'maxLines': 3})", "sk-A1B2C3D4"),
    ('{"jsonrpc": "2.0", "result": [{"remoteApiKey": "gsk_live_998877", "model": "x"}]}', "gsk_live_998877"),
    ("remoteUrl: https://gpu.example/v1?api-key=K3Y-IN-URL&model=q", "K3Y-IN-URL"),
    ("headers {'Authorization': 'Bearer tok.abc-123'}", "tok.abc-123"),
    ("proxy https://alice:hunter22@proxy.example:8080/", "hunter22"),
    ("env FLINT_REMOTE_API_KEY=abcd1234", "abcd1234"),
    ("x-api-key: QWERTY99", "QWERTY99"),
])
def test_secret_shapes_are_redacted(text, secret):
    out = logs.redact(text)
    assert secret not in out and "***" in out


def test_ordinary_numbers_and_names_survive_redaction():
    text = "GenParams(max_tokens=64, n=3) prompt_tokens=120 token_ids=[1, 2] model=qwen remoteModel=qwen"
    assert logs.redact(text) == text


def test_a_registered_key_is_redacted_anywhere_at_every_level():
    logs.register_secret("plainvalue-7731")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logs.RedactFilter())
    logger = logging.getLogger("test.reliability.secrets")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        logger.debug("debug %s", "plainvalue-7731")
        logger.info("info %r", {"k": "plainvalue-7731"})
        logger.warning("warning plainvalue-7731")
        try:
            raise RuntimeError("failed with plainvalue-7731")
        except RuntimeError:
            logger.exception("error")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "plainvalue-7731" not in out and out.count("***") >= 4 and "RuntimeError: failed with ***" in out


def test_log_levels_map_to_lsp_message_types():
    assert [logs.message_type(lv) for lv in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO,
                                              logging.DEBUG)] == [1, 1, 2, 3, 4]


# ---------------------------------------------------------------------------------------------- loopback


def test_loopback_addresses_and_localhost_that_resolves_to_loopback():
    assert remote_protocol.is_loopback("127.0.0.1") and remote_protocol.is_loopback("::1") and remote_protocol.is_loopback("[::1]")
    assert remote_protocol.is_loopback("localhost")  # /etc/hosts maps it to 127.0.0.1 here
    assert not remote_protocol.is_loopback("10.0.0.1") and not remote_protocol.is_loopback("example.com")


def test_a_localhost_name_counts_only_if_it_resolves_to_loopback(monkeypatch):
    # a name that does not resolve at all
    assert not remote_protocol.is_loopback("no-such-host-7f3a.localhost")
    # /etc/hosts or DNS pointing a localhost name elsewhere cannot be set up on a shared machine: stand in
    # for the resolver's answer
    monkeypatch.setattr(remote_protocol, "_resolve", lambda host, timeout=1.0: ["192.0.2.10"])
    assert not remote_protocol.is_loopback("localhost") and not remote_protocol.is_loopback("api.localhost")
    with pytest.raises(ValueError, match="unencrypted"):
        remote_protocol.parse_endpoint("http://api.localhost:8080/v1")
    monkeypatch.setattr(remote_protocol, "_resolve", lambda host, timeout=1.0: ["127.0.0.1", "::1"])
    assert remote_protocol.is_loopback("api.localhost")


# --------------------------------------------------------------------------------------------- surrogates


def test_lone_surrogates_are_replaced_and_positions_stay_right():
    store = DocumentStore()
    doc = store.open("file:///s.py", 'x = "\ud800"\ny = "😀\udc00" + z', 1)
    assert "\ud800" not in doc.text and "\udc00" not in doc.text
    # UTF-16: line 1 is y, space, =, space, ", 😀 (2 units), lone (1 unit), ", space, +, space, z
    assert doc.text[doc.offset_at(1, 12, "utf-16")] == "z"
    doc = store.change("file:///s.py", 2, [Change("\udbff", (0, 5, 0, 5))], "utf-16")
    assert doc.text.split("\n")[0] == 'x = "\ufffd\ufffd"'
    doc.text.encode("utf-8")  # what the tokenizer needs: no exception


# ------------------------------------------------------------------------------------- problem messages


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_missing_model_path_says_it_does_not_exist(home, tmp_path):
    with pytest.raises(ModelNotBuilt) as ei:
        resolve_model_dir(tmp_path / "nowhere" / "model")
    msg = str(ei.value)
    assert "does not exist" in msg and "flint model build" in msg and "Non-relative" not in msg


def test_a_broken_manifest_names_the_file_and_the_command(home):
    d = home / "models" / "qwen2.5-coder-0.5b-int8"
    d.mkdir(parents=True)
    (d / "flint.json").write_text("{ broken")
    for model in ("qwen2.5-coder-0.5b", str(d)):
        with pytest.raises(ModelNotBuilt) as ei:
            resolve_model_dir(model)
        msg = str(ei.value)
        assert str(d / "flint.json") in msg and "line 1 column 3" in msg
        assert "flint model build qwen2.5-coder-0.5b --precision int8 --force" in msg
    from engine.model.build import list_models

    assert list_models() == []  # listed models skip it (with a warning), `flint model list` does not crash


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=dict(os.environ, FLINT_HOME=str(home)))


def test_flint_complete_on_a_broken_model_prints_one_line_not_a_traceback(home, tmp_path):
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    d = home / "models" / "qwen2.5-coder-0.5b-int8"
    d.mkdir(parents=True)
    (d / "flint.json").write_text('{"name": 1}')  # JSON, but not a manifest
    for model in ("qwen2.5-coder-0.5b", str(tmp_path / "missing"), str(src)):
        r = _cli("complete", f"{src}:1:6", "--model", model, home=home)
        assert r.returncode == 2 and "Traceback" not in r.stderr and "flint model build" in r.stderr, r.stderr


@pytest.mark.model
def test_flint_complete_on_truncated_weights_prints_one_line_not_a_traceback(model_dir, tmp_path, home):
    d = tmp_path / "damaged"
    d.mkdir()
    for f in Path(model_dir).iterdir():
        (d / f.name).symlink_to(f)
    (d / "model.onnx.data").unlink()
    (d / "model.onnx.data").write_bytes(b"\0" * 4096)  # a download or build cut short
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    r = _cli("complete", f"{src}:1:6", "--model", str(d), home=home)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert str(d) in r.stderr and "flint model build" in r.stderr


# ----------------------------------------------------------------------------------------- switches


def test_version_and_serve_stdio(home):
    r = _cli("--version", home=home)
    assert r.returncode == 0 and r.stdout.startswith("flint ")
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    down = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    bye = json.dumps({"jsonrpc": "2.0", "method": "exit"})
    data = "".join(f"Content-Length: {len(m)}\r\n\r\n{m}" for m in (init, down, bye))
    for argv in (["serve", "--stdio"], ["serve"]):
        r = subprocess.run([sys.executable, "-m", "lsp_server.cli", *argv, "--model", "no-such-model"], input=data,
                           capture_output=True, text=True, cwd=ROOT, timeout=120,
                           env=dict(os.environ, FLINT_HOME=str(home)))
        assert r.returncode == 0, r.stderr[-2000:]
        assert '"id": 1' in r.stdout and '"capabilities"' in r.stdout and '"id": 2' in r.stdout


def test_nothing_is_sent_after_exit_and_a_late_line_costs_no_traceback(caplog):
    """A status or log line another thread queued just before `exit` reaches the loop after the transport
    closed: it is dropped (it used to put pygls' 'write to closed file' traceback in the log)."""
    from lsprotocol import types
    from pygls.io_ import StdoutWriter

    from lsp_server.protocol.handlers import create_server

    server = create_server()
    out = io.BytesIO()
    server.protocol.set_writer(StdoutWriter(out))
    server.protocol.notify("flint/status", {"state": "ready", "message": "before"})
    assert b"before" in out.getvalue()
    exiting = server.protocol.lsp_exit()
    with pytest.raises(SystemExit):
        next(exiting)  # pygls closes the stream, then exits
    assert out.closed
    with caplog.at_level(logging.DEBUG):
        server.protocol.notify("flint/status", {"state": "ready", "message": "after"})
        server.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message="late line"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text
