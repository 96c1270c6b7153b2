"""Weight recipes: what each precision's build does to the weights, recorded in a directory's manifest
(``quant``), so that a directory built with another recipe is not current (`flint model build` replaces it) and
its cache entries are never shared; and reading a directory's manifest with a message that says how to rebuild it.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.model.gguf_build import GGUF_RECIPES
from engine.model.manifest import Manifest, load_manifest
from engine.model.presets import PRESETS

# precision name -> (builder precision, extra builder options)
PRECISIONS: dict[str, tuple[str, dict[str, str]]] = {
    "int4": ("int4", {}),  # round-to-nearest int4 blocks of 32, int8 compute (accuracy_level 4)
    "int4-mixed": ("int4", {"algo_config": "k_quant_mixed"}),  # k-quant int4, sensitive layers int8
    # int8 blocks of 128 (not the builder's 32): decode is faster (fewer scales to read and apply) and greedy
    # text equals fp32's as often as with blocks of 32, within what the samples show
    # (docs/benchmarks/quality.md, docs/benchmarks/engine.md)
    "int8": ("int8", {"block_size": "128"}),
    "fp32": ("fp32", {}),
    # the fp32 export, its decoder's MatMuls (but the MLP down projections) then quantised by onnxruntime's
    # quantize_dynamic (int8 weights per output channel, activations per tensor per call: MatMulInteger); head
    # and embeddings are int8's. Where the CPU lacks VNNI it prefills faster than MatMulNBits
    # (docs/benchmarks/forward.md), but keeps fp32's greedy text less often than int8 does
    # (docs/benchmarks/quality.md): opt-in, not a default.
    "int8-dyn": ("fp32", {}),
}

# precisions whose decoder is re-quantised after the export -> that step's recipe (recorded in the manifest's
# ``quant`` with the builder options, so a build made with another recipe is not current)
DYNAMIC_QUANT: dict[str, dict[str, str]] = {
    "int8-dyn": {"quantize_dynamic": "qint8-per-channel-matmul-constb-fp32-down-proj"},
}


# every precision a preset builds (the GGUF builder's, then the export path's)
ALL_PRECISIONS = ("gguf", "int8", "int4", "fp32", "int4-mixed", "int8-dyn")


def weight_recipe(precision: str, source_kind: str = "pypi-gguf") -> dict[str, str]:
    """What the manifest records as ``quant`` for a precision: the GGUF builder's recipe for a preset's
    GGUF, else the export path's builder options + any re-quantisation."""
    if source_kind != "hf-dir" and precision in GGUF_RECIPES:
        return dict(GGUF_RECIPES[precision])
    return {**PRECISIONS[precision][1], **DYNAMIC_QUANT.get(precision, {})}


def read_manifest(model_dir: Path) -> tuple[Manifest | None, str | None]:
    """``(manifest, None)``, ``(None, None)`` when there is no flint.json, or ``(None, problem)`` when it cannot
    be read: the problem names the file and the command that rebuilds it."""
    path = Path(model_dir) / "flint.json"
    try:
        return load_manifest(Path(model_dir)), None
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as e:
        what = f"{type(e).__name__}: {e}" if not isinstance(e, json.JSONDecodeError) else \
            f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
        return None, f"{path} is damaged ({what}): rebuild the model with `{rebuild_command(Path(model_dir))}`"


def rebuild_command(model_dir: Path) -> str:
    """The command that rebuilds ``model_dir``: a preset's ``NAME-PRECISION`` directory, else a generic hint."""
    name = Path(model_dir).name
    for preset in sorted(PRESETS, key=len, reverse=True):
        for precision in ALL_PRECISIONS:
            if name == f"{preset}-{precision}":
                return f"flint model build {preset} --precision {precision} --force"
    return "flint model build --from-hf HF_DIR --name NAME --force"


def is_current(model_dir: Path, precision: str) -> bool:
    """A complete build made with the current weight recipe for its precision (an older recipe is rebuilt:
    ``flint model build`` after an upgrade replaces it, atomically, as any build does). A damaged
    flint.json is not current: it is rebuilt."""
    m, _ = read_manifest(model_dir)
    if m is None or precision not in ALL_PRECISIONS or m.precision != precision:
        return False
    return m.quant == weight_recipe(precision, str(m.source.get("kind", "")))
