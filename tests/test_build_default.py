"""The per-machine default precision and the int8-dyn recipe (pure: no model, no build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.build import PRECISIONS, is_current, rebuild_command, weight_recipe
from engine.manifest import Manifest
from engine.presets import cpu_flags, default_precision_for, precision_preference


@pytest.mark.parametrize(("flags", "expected"), [
    ({"fpu", "sse4_2", "avx2", "fma"}, "int8-dyn"),  # AVX2 only (this project's AMD EPYC machine)
    ({"avx2", "avx512f", "avx512bw"}, "int8-dyn"),  # AVX-512 without VNNI
    ({"avx2", "avx512f", "avx512_vnni"}, "int8"),
    ({"avx2", "avx_vnni"}, "int8"),  # Alder Lake and later: VNNI on AVX2
    (None, "int8"),  # flags unknown (not x86 Linux)
])
def test_default_precision_follows_vnni(flags, expected):
    assert default_precision_for(flags) == expected
    assert expected in PRECISIONS


def test_cpu_flags_reads_the_flags_line(tmp_path: Path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\n")
    assert cpu_flags(x86) == {"fpu", "avx2", "avx512_vnni"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert cpu_flags(arm) is None and default_precision_for(cpu_flags(arm)) == "int8"
    assert cpu_flags(tmp_path / "missing") is None


def _manifest(precision: str, quant: dict[str, str]) -> Manifest:
    return Manifest(name="m", source={"sha256": "0" * 64}, precision=precision, bos_token_id=None,
                    eos_token_ids=[1], stop_token_ids=[1], context_length=64, num_layers=1, num_kv_heads=1,
                    head_dim=8, hidden_size=8, vocab_size=16, fim=None, quant=quant)


def test_int8_dyn_records_its_recipe_and_an_other_recipe_is_not_current(tmp_path: Path):
    recipe = weight_recipe("int8-dyn")
    assert recipe and recipe != weight_recipe("fp32") and weight_recipe("int8") == {"block_size": "128"}
    d = tmp_path / "qwen2.5-coder-0.5b-int8-dyn"
    d.mkdir()
    _manifest("int8-dyn", recipe).write(d)
    assert is_current(d, "int8-dyn")
    _manifest("int8-dyn", {}).write(d)  # a plain fp32 export under this name: rebuilt
    assert not is_current(d, "int8-dyn")
    assert _manifest("int8-dyn", recipe).model_id != _manifest("int8", weight_recipe("int8")).model_id
    assert rebuild_command(d) == "flint model build qwen2.5-coder-0.5b --precision int8-dyn --force"


def test_a_preset_name_prefers_the_default_then_the_other_int8_and_fp32_last():
    assert precision_preference("int8-dyn")[:2] == ("int8-dyn", "int8")
    assert precision_preference("int8")[:2] == ("int8", "int8-dyn")
    for d in ("int8", "int8-dyn"):
        order = precision_preference(d)
        assert order[-1] == "fp32" and sorted(order) == sorted(PRECISIONS)
