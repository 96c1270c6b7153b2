"""Where Flint keeps its files: FLINT_HOME (default ~/.cache/flint)."""

from __future__ import annotations

import os
from pathlib import Path


def flint_home() -> Path:
    env = os.environ.get("FLINT_HOME")
    home = Path(env).expanduser() if env else Path.home() / ".cache" / "flint"
    return home


def models_dir() -> Path:
    return flint_home() / "models"


def gguf_dir() -> Path:
    return flint_home() / "gguf"


def cache_dir() -> Path:
    return flint_home() / "cache"


def stats_path() -> Path:
    return flint_home() / "stats.json"
