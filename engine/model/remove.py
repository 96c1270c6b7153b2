"""`flint model remove`: model directories Flint built, and the GGUFs it downloaded, deleted on request.

Flint only ever deletes its own files: a directory goes only when it sits directly in the models directory and
holds the flint.json a build writes last (never a link, never a path elsewhere). It is renamed aside first (a
dot name, which nothing lists or loads), then deleted, so a removal cut short leaves nothing that looks like a
model; what such a cut left behind is deleted by the next removal."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from engine import paths
from engine.model.export import BuildError
from engine.model.manifest import MANIFEST_NAME
from engine.model.publish import process_alive

GGUF_SUFFIXES = (".gguf", ".sha256")


def built_dirs() -> list[Path]:
    """The model directories a build finished (their flint.json written), by name."""
    root = paths.models_dir()
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir()
                  if not d.name.startswith(".") and not d.is_symlink() and (d / MANIFEST_NAME).is_file())


def find_model_dir(target: str) -> Path:
    """The model directory ``target`` names: a directory name as `flint model list` shows it
    (``qwen2.5-coder-0.5b-fp32``) or its path. A BuildError says why anything else is not removed."""
    root = paths.models_dir()
    looks_like_path = Path(target).is_absolute() or target.startswith((".", "~")) or "/" in target or os.sep in target
    d = Path(target).expanduser() if looks_like_path else root / target
    names = [b.name for b in built_dirs()]
    if d.is_symlink():
        raise BuildError(f"{d} is a link: Flint removes only the model directories it built in {root}")
    if not d.is_dir():
        of_preset = [n for n in names if n.startswith(f"{target}-")]
        hint = f"the built directories of {target!r}: {', '.join(of_preset)}" if of_preset else \
            f"the built ones: {', '.join(names) or 'none'}"
        raise BuildError(f"no model directory {target!r} in {root} ({hint}; `flint model list` shows them)")
    if d.resolve().parent != root.resolve():
        raise BuildError(f"{d} is not in Flint's models directory {root}: Flint removes only the models it built")
    if not (d / MANIFEST_NAME).is_file():
        raise BuildError(f"{d} has no {MANIFEST_NAME}, so it is not a model Flint built: Flint leaves it alone")
    return d


def remove_dir(d: Path) -> None:
    """Delete a model directory ``find_model_dir`` returned: renamed aside, then deleted; the leftovers of
    removals and rebuilds cut short (their process gone) go too."""
    trash = d.with_name(f".old-{d.name}-{os.getpid()}-{int(time.time())}")
    os.replace(d, trash)
    for old in d.parent.glob(".old-*"):
        pid = old.name.rsplit("-", 2)[-2] if old.name.count("-") >= 2 else ""
        if old == trash or (pid.isdigit() and not process_alive(int(pid))):
            shutil.rmtree(old)


def downloaded_ggufs() -> list[Path]:
    """The GGUF files (and their checksums) builds downloaded and kept (`--keep-gguf`, or an older Flint)."""
    g = paths.gguf_dir()
    if not g.is_dir():
        return []
    return sorted(f for f in g.iterdir() if f.suffix in GGUF_SUFFIXES and f.is_file() and not f.is_symlink())
