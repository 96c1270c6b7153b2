"""Quality against references, on the real model: fp32 ONNX greedy == an independent numpy forward's, and the
default quantised model's greedy text == fp32's on most prompts (the figure is asserted and reported
in docs/benchmarks/quality.md by scripts/bench_quality.py)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from engine import paths
from engine.config import EngineConfig, resolve_model_dir
from engine.engine import Engine
from engine.model.presets import DEFAULT_MODEL
from engine.text.window import line_start, seen_from_cursor
from engine.types import GenParams

pytestmark = pytest.mark.model

PROMPTS = json.loads(resources.files("engine").joinpath("data/eval_prompts.json").read_text())
MAX_NEW = 24
# The default (int8 body in blocks of 128, int8 head) reproduces fp32's greedy text on most of the prompts
# Flint serves (anchored FIM, token healing on); where it parts, it is at a token between two plausible
# lines. Blocks of 32 show no quality difference these samples can see, and blocks of 128 decode faster
# (docs/benchmarks/quality.md); int4 agrees far less often, and this bound still tells them apart.
MIN_AGREEMENT = 0.75


def _engine_texts(model_dir, heal: bool) -> list[str]:
    eng = Engine.load(model_dir, config=EngineConfig(threads=2), warm=False)
    out = []
    for p in PROMPTS:
        eng.reset()
        c, _ = eng.complete(p["prefix"], p["suffix"], GenParams(max_tokens=MAX_NEW, token_healing=heal))
        out.append(c[0].text)
    return out


@pytest.fixture(scope="module")
def fp32_texts():
    """Without healing: transformers' generate() can reproduce exactly these (no constrained first token)."""
    return _engine_texts(resolve_model_dir(paths.models_dir() / f"{DEFAULT_MODEL}-fp32"), heal=False)


def test_fp32_onnx_equals_an_independent_numpy_forward(fp32_texts):
    """The fp32 build's ONNX graph (engine/model/qwen2_graph.py) against a plain numpy Qwen2 forward over gguf's
    own dequantisation of the same file (tests/qwen2_numpy.py): the graph's wiring (rotary, attention, norms)."""
    from engine.model.presets import PRESETS
    from tests.qwen2_numpy import Qwen2Numpy

    gguf = paths.gguf_dir() / PRESETS[DEFAULT_MODEL].gguf_name
    assert gguf.exists(), "scripts/test.sh builds with --keep-gguf: the reference reads the file"
    ref = Qwen2Numpy(gguf)
    eng = Engine(resolve_model_dir(paths.models_dir() / f"{DEFAULT_MODEL}-fp32"), EngineConfig(threads=2))
    same = 0
    for p, ours in zip(PROMPTS, fp32_texts, strict=True):
        base, indent = line_start(p["prefix"], p["suffix"])  # the prompt complete() runs
        ids = eng.build(base, p["suffix"], heal=False).ids
        new = ref.greedy(list(ids), MAX_NEW, set(eng.stop_ids))
        text = seen_from_cursor(eng.tok.decode_bytes(new).decode("utf-8", errors="replace"), indent)[0]
        same += text == ours
    assert same == len(PROMPTS), f"fp32 ONNX matched the numpy forward on {same}/{len(PROMPTS)} prompts"


def test_default_quantised_model_keeps_fp32_greedy_text():
    """As served: the default model and fp32 on the same prompts, token healing on."""
    ref = _engine_texts(resolve_model_dir(paths.models_dir() / f"{DEFAULT_MODEL}-fp32"), heal=True)
    q = _engine_texts(resolve_model_dir(DEFAULT_MODEL), heal=True)
    same = sum(a == b for a, b in zip(q, ref, strict=True))
    assert same / len(PROMPTS) >= MIN_AGREEMENT, f"default model equals fp32 on {same}/{len(PROMPTS)}"
