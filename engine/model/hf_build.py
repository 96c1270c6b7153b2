"""`flint model build` on the export path: a float32 Hugging Face directory (a local one with ``--from-hf``, or
a preset's GGUF dequantised by transformers for the ``int4-mixed`` / ``int8-dyn`` recipes) -> onnxruntime-genai's
builder -> a Flint model directory, published as build.py publishes the GGUF builder's. Needs the ``export``
extra (torch, transformers, onnxruntime-genai), imported inside functions only.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import paths
from engine.model.export import (
    BuildError,
    quantize_decoder_dynamic,
    require_export_deps,
    run_builder,
    special_ids,
)
from engine.model.manifest import Manifest
from engine.model.presets import FimTemplate
from engine.model.publish import _atomic_replace_dir, _progress, building
from engine.model.recipes import DYNAMIC_QUANT, PRECISIONS, is_current, weight_recipe


def build_model_dir(
    *,
    name: str,
    hf_dir_factory: Callable[[Path], None],
    source: dict[str, Any],
    fim: FimTemplate | None,
    precision: str,
    extra_stop_tokens: tuple[str, ...] = (),
    bos_required: bool = False,
    min_kv_capacity: int = 0,
    extra_builder_options: dict[str, str] | None = None,
    force: bool = False,
) -> Path:
    """``NAME-PRECISION`` under the models directory, built from the float32 Hugging Face directory
    ``hf_dir_factory`` writes (a current build is kept unless ``force``): in a temporary directory, the
    manifest written last, then renamed into place."""
    if precision not in PRECISIONS:
        raise BuildError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    final = paths.models_dir() / f"{name}-{precision}"
    if not force and is_current(final, precision):
        return final
    bar = _progress(4 + (precision in DYNAMIC_QUANT), f"flint: building {name} ({precision})")
    with building(final, bar) as tmp:
        work = tmp / "_work"
        hf_dir = work / "hf"
        heads = _export(tmp, hf_dir, name, precision, hf_dir_factory, extra_builder_options or {}, bar)
        bar.set_description_str(f"flint {name}: manifest")
        if not (tmp / "tokenizer.json").exists():
            shutil.copy(hf_dir / "tokenizer.json", tmp / "tokenizer.json")
        manifest = _manifest(hf_dir, tmp / "tokenizer.json", name=name, source=source, fim=fim,
                             precision=precision, heads=heads, extra_stop_tokens=extra_stop_tokens,
                             bos_required=bos_required, min_kv_capacity=min_kv_capacity)
        shutil.rmtree(work, ignore_errors=True)
        # the manifest is written last, inside the temporary directory; then one rename publishes it
        manifest.write(tmp)
        _atomic_replace_dir(tmp, final)
        bar.update(1)
    return final


def _export(tmp: Path, hf_dir: Path, name: str, precision: str, hf_dir_factory: Callable[[Path], None],
            builder_options: dict[str, str], bar: Any) -> dict[str, Any]:
    """Steps 2-4 into ``tmp``: the float32 weights (in ``hf_dir``), the ONNX decoder (re-quantised for a
    ``DYNAMIC_QUANT`` precision) and the LM heads, whose manifest entry is returned."""
    from engine.model.hf_source import normalise_config
    from engine.model.lm_head import build_lm_heads

    work = tmp / "_work"
    hf_dir.mkdir(parents=True)
    bar.set_description_str(f"flint {name}: loading weights")
    hf_dir_factory(hf_dir)
    normalise_config(hf_dir)
    bar.update(1)
    bar.set_description_str(f"flint {name}: exporting ONNX ({precision})")
    builder_precision, variant_opts = PRECISIONS[precision]
    run_builder(hf_dir, tmp, builder_precision, variant_opts, work / "cache", builder_options)
    bar.update(1)
    if precision in DYNAMIC_QUANT:
        bar.set_description_str(f"flint {name}: quantising the decoder (int8, dynamic)")
        quantize_decoder_dynamic(tmp, work)
        bar.update(1)
    bar.set_description_str(f"flint {name}: LM head")
    heads = build_lm_heads(hf_dir, tmp, None if precision == "fp32" else 8)  # fp32 stays exact: the reference
    bar.update(1)
    return heads


def _manifest(hf_dir: Path, tokenizer_json: Path, *, name: str, source: dict[str, Any], fim: FimTemplate | None,
              precision: str, heads: dict[str, Any], extra_stop_tokens: tuple[str, ...], bos_required: bool,
              min_kv_capacity: int) -> Manifest:
    """The build's manifest: the model's shape and special tokens from its Hugging Face config files."""
    cfg = json.loads((hf_dir / "config.json").read_text())
    gen_cfg_path = hf_dir / "generation_config.json"
    gen_cfg = json.loads(gen_cfg_path.read_text()) if gen_cfg_path.exists() else {}
    eos = gen_cfg.get("eos_token_id", cfg.get("eos_token_id"))
    eos_ids = sorted(set(eos if isinstance(eos, list) else [eos] if eos is not None else []))
    stop_ids = special_ids(tokenizer_json, extra_stop_tokens)
    bos = gen_cfg.get("bos_token_id", cfg.get("bos_token_id"))
    text_cfg = cfg.get("text_config", cfg)
    return Manifest(
        name=name,
        source=source,
        precision=precision,
        bos_token_id=bos if bos_required else None,
        eos_token_ids=eos_ids,
        stop_token_ids=sorted(set(stop_ids.values()) | set(eos_ids)),
        context_length=int(text_cfg.get("max_position_embeddings", 32768)),
        num_layers=int(text_cfg["num_hidden_layers"]),
        num_kv_heads=int(text_cfg.get("num_key_value_heads", text_cfg["num_attention_heads"])),
        head_dim=int(text_cfg.get("head_dim") or text_cfg["hidden_size"] // text_cfg["num_attention_heads"]),
        hidden_size=int(text_cfg["hidden_size"]),
        vocab_size=int(text_cfg["vocab_size"]),
        fim=None if fim is None else {"prefix": fim.prefix, "suffix": fim.suffix, "middle": fim.middle},
        min_kv_capacity=min_kv_capacity,
        embed_scale=(float(text_cfg["hidden_size"]) ** 0.5
                     if str(text_cfg.get("model_type", cfg.get("model_type", ""))).startswith("gemma") else 1.0),
        lm_head=heads,
        quant=weight_recipe(precision, str(source.get("kind", ""))),
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )


FIM_CANDIDATES = [
    FimTemplate("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder, StarCoder2-style
    FimTemplate("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder / SantaCoder
    FimTemplate("<PRE>", "<SUF>", "<MID>"),  # CodeLlama
    FimTemplate("<|fim▁begin|>", "<|fim▁hole|>", "<|fim▁end|>"),  # DeepSeek-Coder
    FimTemplate("<|fim_begin|>", "<|fim_hole|>", "<|fim_end|>"),
]


def detect_fim(tokenizer_json: Path) -> FimTemplate | None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    for t in FIM_CANDIDATES:
        if all(tok.token_to_id(x) is not None for x in (t.prefix, t.suffix, t.middle)):
            return t
    return None


def build_from_hf(src: Path, name: str | None = None, precision: str = "int4", *, force: bool = False) -> Path:
    src = src.expanduser().resolve()
    if not (src / "config.json").exists():
        raise BuildError(f"{src} is not a Hugging Face model directory (no config.json)")
    require_export_deps()
    name = name or src.name.lower()

    tok_json = src / "tokenizer.json"
    fim = detect_fim(tok_json) if tok_json.exists() else None
    stops = ("<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|im_end|>", "<eos>", "</s>", "<EOT>")
    from engine.model.hf_source import float32_copy

    return build_model_dir(name=name, hf_dir_factory=lambda hf_dir: float32_copy(src, hf_dir), fim=fim,
                           precision=precision, source={"kind": "hf-dir", "path": str(src)},
                           extra_stop_tokens=stops, force=force)
