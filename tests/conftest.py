"""Shared fixtures. Tests marked `model` use the real built default model (scripts/test.sh builds it)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def model_dir():
    from engine.engine import ModelNotBuilt, resolve_model_dir

    try:
        return resolve_model_dir(os.environ.get("FLINT_MODEL"))
    except ModelNotBuilt as e:  # the real path is required: fail loudly, never skip
        pytest.fail(f"the default model must be built for model tests: {e}")


@pytest.fixture(scope="session")
def engine(model_dir):
    from engine.engine import Engine, EngineConfig

    return Engine.load(model_dir, config=EngineConfig(threads=2))
