"""The monitor in the greedy row (engine/decoding/monitored.py, engine/guidance/service.py) with the real
model and real jedi: where the analyser answers, the emitted names are ones that exist; where it cannot
(no environment, a file too large), the output is the model's own, token for token."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from engine.guidance.jedi_analyser import JediAnalyser
from engine.guidance.service import Guidance
from engine.types import DocRef, GenParams

pytestmark = pytest.mark.model

MODELS = '''class Store:
    def __init__(self):
        self.zq_items = []

    def zq_put(self, item):
        self.zq_items.append(item)
'''
MAIN = '''from models import Store


def count(store: Store):
    return len(store.'''


@contextlib.contextmanager
def guided(engine, analyser: JediAnalyser, speculative: bool = True):
    """The session's engine with a monitor over ``analyser`` (and the fast paths as asked), restored after."""
    old_guidance, old_spec = engine.guidance, engine.config.fast.speculative
    g = Guidance(engine.model_dir / "tokenizer.json", engine.manifest.vocab_size, analyser, budget_s=30.0)
    assert g.wait(120)
    engine.guidance, engine.config.fast.speculative = g, speculative
    try:
        yield g
    finally:
        engine.guidance, engine.config.fast.speculative = old_guidance, old_spec
        analyser.close()


def run(engine, prefix: str, suffix: str, params: GenParams):
    engine.reset()
    engine.drafts.forget()
    comps, t = engine.complete(prefix, suffix, params)
    return comps[0], t


def test_names_after_a_dot_are_the_receivers_attributes(engine, tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "main.py").write_text(MAIN + "\n")
    an = JediAnalyser()
    an.add_root(str(tmp_path))
    with guided(engine, an):
        params = GenParams(max_tokens=12, max_lines=1, guidance=True, doc=DocRef(str(tmp_path / "main.py"), 1))
        off, t_off = run(engine, MAIN, "\n", replace(params, guidance=False))
        on, t_on = run(engine, MAIN, "\n", params)
    assert t_off.guidance is None
    assert on.text.startswith(("zq_items", "zq_put")), on.text
    assert not off.text.startswith("zq_")  # the model alone cannot know the other file's names
    assert t_on.guidance is not None and t_on.guidance["constrained"] >= 1
    assert t_on.guidance["changes"][0]["why"] in ("name", "name inside token")


def test_variants_are_guided_too(engine, tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    an = JediAnalyser()
    an.add_root(str(tmp_path))
    with guided(engine, an):
        params = GenParams(max_tokens=12, max_lines=1, n=2, guidance=True, doc=DocRef(str(tmp_path / "main.py"), 1))
        engine.reset()
        comps, t = engine.complete(MAIN, "\n", params)
    assert comps[0].text.startswith(("zq_items", "zq_put")), comps[0].text
    assert all(c.text.startswith("zq_") for c in comps), [c.text for c in comps]
    assert t.guidance is not None


@pytest.mark.parametrize("speculative", [False, True])
def test_no_environment_leaves_the_output_the_models(engine, tmp_path, speculative):
    prefix = "import os\n\n\ndef size(path):\n    st = os.stat(path)\n    return st."
    an = JediAnalyser(environment=str(tmp_path / "no-such-venv"))  # a missing environment: no candidates
    with guided(engine, an, speculative=speculative):
        params = GenParams(max_tokens=16, max_lines=1, doc=DocRef(str(tmp_path / "a.py"), 1))
        off, _ = run(engine, prefix, "\n", params)
        on, t = run(engine, prefix, "\n", replace(params, guidance=True))
    assert on.token_ids == off.token_ids
    assert t.guidance is not None and t.guidance["constrained"] == 0 and t.guidance["asked"] >= 1
    assert t.guidance["unanswered"] == t.guidance["asked"]


def test_a_file_too_large_for_the_analyser_is_the_models(engine, tmp_path):
    filler = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(40))
    prefix = filler + "def g(p):\n    return p."
    an = JediAnalyser(max_chars=len(filler) // 2)
    with guided(engine, an, speculative=False):
        params = GenParams(max_tokens=12, max_lines=1, doc=DocRef(str(tmp_path / "big.py"), 1))
        off, _ = run(engine, prefix, "\n", params)
        on, t = run(engine, prefix, "\n", replace(params, guidance=True))
    assert on.token_ids == off.token_ids
    assert an.stats["skipped"] >= 1 and t.guidance is not None and t.guidance["constrained"] == 0


def test_another_language_is_not_guided(engine, tmp_path):
    an = JediAnalyser()
    with guided(engine, an):
        params = GenParams(max_tokens=8, max_lines=1, guidance=True, language="rust",
                           doc=DocRef(str(tmp_path / "a.rs"), 1))
        _, t = run(engine, "fn main() {\n    let v = vec![1];\n    v.", "\n}\n", params)
    assert t.guidance is None and an.stats["asked"] == 0


@pytest.mark.parametrize("main", [MAIN, MAIN.replace("count(store: Store):\n    return len(store.",
                                                     "add(store: Store, item):\n    result = store.")])
def test_trimmed_head_picks_under_the_monitor_end_as_the_full_heads(engine, tmp_path, main):
    """A constrained step may keep the trimmed head's pick when the monitor allows it; the full head's
    re-check applies the mask where it disagrees, so the output is the full head's masked choice."""
    (tmp_path / "models.py").write_text(MODELS)
    an = JediAnalyser()
    an.add_root(str(tmp_path))
    params = GenParams(max_tokens=16, max_lines=1, guidance=True, doc=DocRef(str(tmp_path / "main.py"), 1))
    old = engine.config.fast.trimmed_head
    try:
        with guided(engine, an, speculative=False):
            engine.config.fast.trimmed_head = True
            lazy, t_lazy = run(engine, main, "\n", params)
            engine.config.fast.trimmed_head = False
            full, _ = run(engine, main, "\n", params)
    finally:
        engine.config.fast.trimmed_head = old
    assert lazy.token_ids == full.token_ids, (lazy.text, full.text)
    assert lazy.text.startswith("zq_") and t_lazy.guidance is not None and t_lazy.guidance["constrained"] >= 1
