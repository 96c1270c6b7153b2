"""`flint model remove` as a user runs it: it deletes the model directories Flint built that the user names (and,
with --gguf, the GGUFs it downloaded), keeps the default model unless forced, and refuses anything else with a
clear message, deleting nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.model.manifest import MANIFEST_NAME, Manifest
from engine.model.presets import DEFAULT_MODEL, PRESETS


def _flint(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server.cli", "model", *args], capture_output=True, text=True,
                          env=dict(os.environ, FLINT_HOME=str(home)), timeout=120)


def _built(home: Path, name: str, precision: str, weights: int = 3000) -> Path:
    """A model directory as a finished build leaves it: files, then flint.json."""
    d = home / "models" / f"{name}-{precision}"
    d.mkdir(parents=True)
    (d / "decoder.onnx").write_bytes(b"\0" * weights)
    Manifest(name=name, source={"kind": "test"}, precision=precision, bos_token_id=None, eos_token_ids=[0],
             stop_token_ids=[0], context_length=32, num_layers=1, num_kv_heads=1, head_dim=2, hidden_size=2,
             vocab_size=4, fim=None).write(d)
    return d


def _listed(home: Path) -> list[str]:
    r = _flint(home, "list", "--json")
    assert r.returncode == 0, r.stderr
    return sorted(Path(m["path"]).name for m in json.loads(r.stdout))


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    default = PRESETS[DEFAULT_MODEL].default_precision
    _built(tmp_path, DEFAULT_MODEL, default)
    _built(tmp_path, DEFAULT_MODEL, "fp32")
    _built(tmp_path, DEFAULT_MODEL, "gguf" if default != "gguf" else "int4")
    return tmp_path


def test_a_named_model_directory_is_removed_and_the_others_stay(home):
    before = _listed(home)
    fp32 = home / "models" / f"{DEFAULT_MODEL}-fp32"
    other = next(n for n in before if n != fp32.name and n != f"{DEFAULT_MODEL}-{PRESETS[DEFAULT_MODEL].default_precision}")
    r = _flint(home, "remove", fp32.name, str(home / "models" / other))
    assert r.returncode == 0, r.stderr
    assert f"removed {fp32}" in r.stdout and "MB)" in r.stdout
    assert not fp32.exists() and not (home / "models" / other).exists()
    assert _listed(home) == [n for n in before if n not in (fp32.name, other)]
    assert not list((home / "models").glob(".old-*")), "nothing of a finished removal is left"


def test_the_default_model_is_kept_unless_forced(home):
    default = home / "models" / f"{DEFAULT_MODEL}-{PRESETS[DEFAULT_MODEL].default_precision}"
    fp32 = home / "models" / f"{DEFAULT_MODEL}-fp32"
    r = _flint(home, "remove", fp32.name, default.name)
    assert r.returncode == 2 and "loads by default" in r.stderr and "--force" in r.stderr
    assert (default / MANIFEST_NAME).is_file() and (fp32 / MANIFEST_NAME).is_file(), "nothing was removed"
    r = _flint(home, "remove", "--force", default.name)
    assert r.returncode == 0, r.stderr
    assert not default.exists() and fp32.is_dir()


def test_what_flint_did_not_build_is_refused_and_kept(home, tmp_path_factory):
    models = home / "models"
    fp32 = models / f"{DEFAULT_MODEL}-fp32"
    mine = models / "my-notes"  # the user's own directory in the models directory: no flint.json
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    outside = tmp_path_factory.mktemp("elsewhere") / "model"  # a model directory elsewhere
    outside.mkdir()
    (outside / MANIFEST_NAME).write_text((fp32 / MANIFEST_NAME).read_text())
    link = models / "linked"
    link.symlink_to(outside, target_is_directory=True)
    for name, says in ((mine.name, "not a model Flint built"), (str(outside), "not in Flint's models directory"),
                       (link.name, "is a link"), ("no-such-model", "no model directory"),
                       (DEFAULT_MODEL, f"{DEFAULT_MODEL}-fp32")):
        r = _flint(home, "remove", fp32.name, name)
        assert r.returncode == 2 and says in r.stderr, (name, r.stderr)
        assert (fp32 / MANIFEST_NAME).is_file(), f"{name}: a refusal removes nothing"
    assert (mine / "keep.txt").read_text() == "mine" and (outside / MANIFEST_NAME).is_file() and link.is_symlink()
    r = _flint(home, "remove")
    assert r.returncode == 2 and "flint model list" in r.stderr


def test_gguf_removes_the_downloaded_files_only(home):
    g = home / "gguf"
    g.mkdir()
    (g / "model.gguf").write_bytes(b"GGUF" + b"\0" * 100)
    (g / "model.sha256").write_text("0" * 64)
    (g / "notes.txt").write_text("not Flint's")
    r = _flint(home, "remove", "--gguf")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in g.iterdir()) == ["notes.txt"]
    assert len(_listed(home)) == 3, "--gguf alone removes no model"
    r = _flint(home, "remove", "--gguf")
    assert r.returncode == 0 and "no downloaded GGUF" in r.stdout


def test_leftovers_of_a_removal_cut_short_go_with_the_next_one(home):
    models = home / "models"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    cut = models / f".old-{DEFAULT_MODEL}-int4-{dead}-1700000000"  # its process is gone
    cut.mkdir()
    live = models / f".old-{DEFAULT_MODEL}-int4-{os.getpid()}-1700000000"  # a replacement still under way
    live.mkdir()
    r = _flint(home, "remove", f"{DEFAULT_MODEL}-fp32")
    assert r.returncode == 0, r.stderr
    assert not cut.exists() and live.is_dir()
