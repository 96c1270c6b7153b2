"""Step 2 of `flint model build` (load): a source's weights as a float32 Hugging Face directory
(safetensors, config, tokenizer) in the form onnxruntime-genai's model builder reads. A GGUF is
dequantised by transformers; a Hugging Face directory is loaded and saved in float32.

torch, transformers and safetensors (the ``export`` extra) are imported inside the functions.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any


def _save_dequantised(model: Any, out_dir: Path) -> None:
    """transformers refuses save_pretrained() on a GGUF-loaded model; its weights are plain float32
    tensors by now, so write them as safetensors ourselves (without lm_head when embeddings are tied)."""
    from safetensors.torch import save_file

    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()
          if not (tied and k == "lm_head.weight")}
    save_file(sd, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(str(out_dir))
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(str(out_dir))


def normalise_config(hf_dir: Path) -> None:
    """onnxruntime-genai 0.18 reads rope settings in the pre-transformers-5 form: a flat
    ``rope_parameters`` with ``rope_type``, plus ``rope_theta`` and Gemma3's ``rope_local_base_freq``.
    transformers 5 writes one dict per attention type; flatten it."""
    cfg_path = hf_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    target = cfg.get("text_config", cfg)
    rp = target.get("rope_parameters")
    if isinstance(rp, dict) and "rope_type" not in rp:
        full = rp.get("full_attention") if isinstance(rp.get("full_attention"), dict) else None
        local = rp.get("sliding_attention") if isinstance(rp.get("sliding_attention"), dict) else None
        if full is not None:
            target["rope_parameters"] = dict(full)
            target["rope_parameters"].setdefault("rope_type", "default")
            if "rope_theta" in full:
                target.setdefault("rope_theta", full["rope_theta"])
        if local is not None and "rope_theta" in local:
            target.setdefault("rope_local_base_freq", local["rope_theta"])
    elif isinstance(rp, dict) and "rope_theta" in rp:
        target.setdefault("rope_theta", rp["rope_theta"])
    cfg_path.write_text(json.dumps(cfg, indent=2))


def gguf_to_hf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantise a GGUF with transformers and save a float32 HF directory (safetensors)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    kw = dict(gguf_file=gguf_path.name)
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kw)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype=torch.float32, **kw)
    _save_dequantised(model, out_dir)
    tok.save_pretrained(str(out_dir))
    cfg_path = out_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("quantization_config", None)
    if not cfg.get("architectures"):
        cfg["architectures"] = [type(model).__name__]
    cfg_path.write_text(json.dumps(cfg, indent=2))
    del model


def float32_copy(src: Path, out_dir: Path) -> None:
    """A Hugging Face directory's model saved in float32 (safetensors), with its tokenizer and generation
    config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    tok.save_pretrained(str(out_dir))
    gc = src / "generation_config.json"
    if gc.exists():
        shutil.copy(gc, out_dir / "generation_config.json")
