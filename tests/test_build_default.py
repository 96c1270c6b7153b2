"""Weight recipes (the GGUF builder's and the export path's) and which built precision a preset name resolves
to (pure: no model, no build)."""

from __future__ import annotations

from pathlib import Path

from engine.model.gguf_build import GGUF_RECIPES
from engine.model.manifest import Manifest
from engine.model.presets import PRESETS, precision_preference
from engine.model.recipes import ALL_PRECISIONS, is_current, rebuild_command, weight_recipe


def _manifest(precision: str, quant: dict[str, str]) -> Manifest:
    return Manifest(name="m", source={"kind": "pypi-gguf", "sha256": "0" * 64}, precision=precision, bos_token_id=None,
                    eos_token_ids=[1], stop_token_ids=[1], context_length=64, num_layers=1, num_kv_heads=1,
                    head_dim=8, hidden_size=8, vocab_size=16, fim=None, quant=quant)


def test_int8_dyn_records_its_recipe_and_an_other_recipe_is_not_current(tmp_path: Path):
    recipe = weight_recipe("int8-dyn")
    assert recipe and recipe != weight_recipe("fp32") and weight_recipe("int8") == GGUF_RECIPES["int8"]
    assert weight_recipe("int8", "hf-dir") == {"block_size": "128"} != weight_recipe("int8")
    d = tmp_path / "qwen2.5-coder-0.5b-int8-dyn"
    d.mkdir()
    _manifest("int8-dyn", recipe).write(d)
    assert is_current(d, "int8-dyn")
    _manifest("int8-dyn", {}).write(d)  # a plain fp32 export under this name: rebuilt
    assert not is_current(d, "int8-dyn")
    assert _manifest("int8-dyn", recipe).model_id != _manifest("int8", weight_recipe("int8")).model_id
    assert rebuild_command(d) == "flint model build qwen2.5-coder-0.5b --precision int8-dyn --force"


def test_a_preset_name_prefers_the_default_then_the_files_own_blocks_and_fp32_last():
    # gguf keeps fp32's text more often but decodes slower; int8-dyn loses quality: both opt-in
    assert all(p.default_precision == "int8" for p in PRESETS.values())
    assert precision_preference("int8-dyn")[:2] == ("int8-dyn", "int8")
    assert precision_preference("int8")[:3] == ("int8", "gguf", "int8-dyn")
    for d in ("int8", "int8-dyn"):
        order = precision_preference(d)
        assert order[-1] == "fp32" and sorted(order) == sorted(ALL_PRECISIONS)


def test_an_int8_directory_from_the_export_path_is_not_current_for_a_preset_and_never_shares_cache_keys(tmp_path):
    """A preset's int8 built before the GGUF builder (transformers + onnxruntime-genai: the same recipe dict
    without "from") keeps loading, but `flint model build` replaces it, and its completions are cached under
    another model id."""
    d = tmp_path / "qwen2.5-coder-0.5b-int8"
    d.mkdir()
    old = Manifest(name="m", source={"kind": "pypi-gguf", "sha256": "0" * 64}, precision="int8", bos_token_id=None,
                   eos_token_ids=[1], stop_token_ids=[1], context_length=64, num_layers=1, num_kv_heads=1,
                   head_dim=8, hidden_size=8, vocab_size=16, fim=None, quant={"block_size": "128"})
    old.write(d)
    assert not is_current(d, "int8")
    new = Manifest(**{**old.__dict__, "quant": weight_recipe("int8")})
    new.write(d)
    assert is_current(d, "int8") and new.model_id != old.model_id
