"""Shared fixtures. Tests marked `model` use the real built default model (scripts/test.sh builds it)."""

from __future__ import annotations

import os

import pytest

from engine.guidance.jedi_analyser import JediAnalyser


@pytest.fixture(autouse=True)
def _root_logging_restored():
    """A test that runs the CLI in-process (``cli.main``) sets the root logger up on the stderr pytest gave that
    test, which pytest closes after it: later tests' log records then hit a closed file. Handlers a test added
    (pytest's own excepted) are taken off and closed after it, and the root level restored."""
    import logging

    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in before and not type(h).__module__.startswith("_pytest"):
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


@pytest.fixture(scope="session")
def model_dir():
    from engine.config import ModelNotBuilt, resolve_model_dir

    try:
        return resolve_model_dir(os.environ.get("FLINT_MODEL"))
    except ModelNotBuilt as e:  # the real path is required: fail loudly, never skip
        pytest.fail(f"the default model must be built for model tests: {e}")


@pytest.fixture(scope="session")
def engine(model_dir):
    from engine.config import EngineConfig
    from engine.engine import Engine

    return Engine.load(model_dir, config=EngineConfig(threads=2))


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test is checked, whatever the tier
def pytest_collection_modifyitems(config, items):
    # the fast tier (scripts/test_fast.sh) leaves out tests by their `model` marker: one that uses the model
    # without it would fail there (its FLINT_HOME is empty), so it is refused here, on every run
    unmarked = [it.nodeid for it in items
                if "model_dir" in getattr(it, "fixturenames", ()) and it.get_closest_marker("model") is None]
    if unmarked:
        raise pytest.UsageError("tests that load the real model (fixture model_dir or engine) must be marked "
                                "`model`:\n  " + "\n  ".join(unmarked))


@pytest.fixture
async def start_session(tmp_path, monkeypatch):
    """Starts a Session on a given engine (no LSP, no model) with its FLINT_HOME in tmp_path, and shuts every
    one it started down at the end: ``start_session(eng, settings=None, **Session keywords)``."""
    import asyncio

    from lsp_server.session import Session

    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    sessions = []

    def start(eng, settings=None, **kw):
        s = Session(lambda _settings: eng, settings, **kw)
        s.attach_loop(asyncio.get_running_loop())
        s.start()
        assert s.worker.loaded.wait(5)
        sessions.append(s)
        return s

    yield start
    for s in sessions:
        s.shutdown()


@pytest.fixture
async def variants_session(start_session):
    """A session (three variants) on a given engine; the flint/refresh notifications it sent, by URI."""
    from lsp_server.settings import Settings

    def make(eng):
        refreshed: list[str] = []
        s = start_session(eng, Settings(max_variants=3), on_refresh=lambda uri, version: refreshed.append(uri))
        return s, refreshed

    return make


@pytest.fixture(scope="module")
def analyser(tmp_path_factory):
    """A real jedi analyser with a workspace root of its own, one per test module."""
    a = JediAnalyser()
    a.add_root(str(tmp_path_factory.mktemp("ws")))
    yield a
    a.close()
