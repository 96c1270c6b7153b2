"""`flint model build --from-hf` (the export path: torch, transformers, onnxruntime-genai) end to end on a tiny
Qwen2 model this test makes (random weights, the real Qwen tokenizer): the pipeline, FIM detection, the manifest,
atomicity, and that the built ONNX model's greedy tokens equal transformers' for it. Marked ``export``: the full
suite needs no torch; `bash scripts/test_export.sh` runs these with the export extra installed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from engine.model.manifest import MANIFEST_NAME, load_manifest
from engine.model.presets import DEFAULT_MODEL
from tests.fakes import wait_for

pytestmark = [pytest.mark.model, pytest.mark.export]  # the built default model's tokenizer; the export extra


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory):
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from engine.config import resolve_model_dir

    tok = PreTrainedTokenizerFast(tokenizer_file=str(resolve_model_dir(DEFAULT_MODEL) / "tokenizer.json"),
                                  eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=True, eos_token_id=151643, bos_token_id=151643)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).eval()
    d = tmp_path_factory.mktemp("tiny") / "tiny-qwen"
    model.save_pretrained(str(d))
    tok.save_pretrained(str(d))
    return d


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_from_hf_builds_a_complete_model_directory(tiny_hf, home):
    from engine.model.hf_build import build_from_hf

    out = build_from_hf(tiny_hf, name="tiny", precision="fp32")
    m = load_manifest(out)
    assert m is not None and m.name == "tiny" and m.precision == "fp32"
    assert m.fim == {"prefix": "<|fim_prefix|>", "suffix": "<|fim_suffix|>", "middle": "<|fim_middle|>"}
    assert 151643 in m.stop_token_ids and m.num_layers == 2 and m.hidden_size == 64
    assert (out / "model.onnx").exists() and (out / "tokenizer.json").exists() and (out / "lm_head.onnx").exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".build-")], "temporary build left behind"
    # idempotent: a second call returns at once without rebuilding
    t0 = time.perf_counter()
    assert build_from_hf(tiny_hf, name="tiny", precision="fp32") == out
    assert time.perf_counter() - t0 < 2.0


def test_built_tiny_model_matches_transformers_greedy(tiny_hf, home):
    import torch
    from transformers import AutoModelForCausalLM

    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.model.hf_build import build_from_hf
    from engine.types import GenParams

    out = build_from_hf(tiny_hf, name="tiny", precision="fp32")
    eng = Engine(out, EngineConfig(threads=1, capacity=256))
    eng.config.fast.speculative = False
    model = AutoModelForCausalLM.from_pretrained(str(tiny_hf), dtype=torch.float32).eval()
    for prefix in ("def add(a, b):\n    return", "import os\n"):
        eng.reset()
        c, _ = eng.complete(prefix, "\n", GenParams(max_tokens=12, token_healing=False))
        ids = torch.tensor([eng.build(prefix, "\n", heal=False).ids])
        with torch.no_grad():
            g = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False,
                               eos_token_id=sorted(eng.stop_ids), pad_token_id=151643)
        ref = [t for t in g[0, ids.shape[1]:].tolist() if t not in eng.stop_ids]
        assert c[0].token_ids == ref


def test_killed_build_leaves_nothing_that_looks_complete(tiny_hf, home):
    env = dict(os.environ, FLINT_HOME=str(home))
    p = subprocess.Popen([sys.executable, "-m", "lsp_server.cli", "model", "build", "--from-hf", str(tiny_hf),
                          "--name", "killed", "-p", "fp32"], env=env, stderr=subprocess.PIPE, text=True)
    # wait until the build has started writing, then kill -9 it mid-way
    models = home / "models"
    assert wait_for(lambda: models.exists() and any(models.glob(".build-*")), 120, every=0.05)
    time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    final = models / "killed-fp32"
    assert not (final / MANIFEST_NAME).exists()
    from engine.model.build import list_models

    assert all(m.name != "killed" for m in list_models())


def test_an_int8_build_with_an_older_weight_recipe_is_rebuilt_and_never_shares_cache_keys(tiny_hf, home):
    """int8 weights changed recipe (blocks of 128): a directory built before is not current, `flint model
    build` replaces it, and its completions are cached under another model id."""
    from engine.model.hf_build import build_from_hf
    from engine.model.recipes import PRECISIONS, is_current

    out = build_from_hf(tiny_hf, name="tiny", precision="int8")
    m = load_manifest(out)
    assert m is not None and m.quant == PRECISIONS["int8"][1] == {"block_size": "128"} and is_current(out, "int8")
    assert m.source["kind"] == "hf-dir"
    new_id = m.model_id
    data = json.loads((out / MANIFEST_NAME).read_text())
    data.pop("quant")  # as written before the recipe was recorded
    (out / MANIFEST_NAME).write_text(json.dumps(data))
    old = load_manifest(out)
    assert old is not None and not is_current(out, "int8") and old.model_id != new_id
    built_at = old.built_at
    time.sleep(1.1)
    assert build_from_hf(tiny_hf, name="tiny", precision="int8") == out
    again = load_manifest(out)
    assert again is not None and again.quant == {"block_size": "128"} and again.built_at != built_at
    assert again.model_id == new_id


def test_int8_dyn_quantises_the_decoder_dynamically_with_the_int8_head(tiny_hf, home):
    """int8-dyn: the fp32 export's MatMuls but down_proj become MatMulInteger (int8 per channel); the LM head and the
    embedding table are int8's (MatMulNBits head, int8 embedding rows), and the recipe is recorded."""
    import onnx

    from engine.config import EngineConfig
    from engine.engine import Engine
    from engine.model.hf_build import build_from_hf
    from engine.model.recipes import is_current, weight_recipe
    from engine.types import GenParams

    out = build_from_hf(tiny_hf, name="tiny", precision="int8-dyn")
    m = load_manifest(out)
    assert m is not None and m.precision == "int8-dyn" and m.quant == weight_recipe("int8-dyn")
    assert is_current(out, "int8-dyn")
    ops = {n.op_type for n in onnx.load(str(out / "model.onnx"), load_external_data=False).graph.node}
    assert "MatMulInteger" in ops and "MatMul" in ops, ops  # the MLP down projections stay fp32
    down = [n for n in onnx.load(str(out / "model.onnx"), load_external_data=False).graph.node if "down_proj" in n.name
            and n.op_type in ("MatMul", "MatMulInteger")]
    assert down and all(n.op_type == "MatMul" for n in down)
    assert m.lm_head["bits"] == 8 and "q" in m.lm_head["embed"] and not (out / "embed_f32.npy").exists()
    assert not [p for p in out.iterdir() if p.name.startswith("_work")]
    eng = Engine(out, EngineConfig(threads=1, capacity=256))
    c, _ = eng.complete("def add(a, b):\n    return", "\n", GenParams(max_tokens=6, token_healing=False))
    assert len(c[0].token_ids) > 0
