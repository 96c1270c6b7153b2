"""Runs onnxruntime-genai's model builder with the config attributes its 0.18 release still reads in
the pre-transformers-5 form (Gemma3's ``rope_local_base_freq``), which transformers 5 no longer keeps
on the config object. Usage: python -m engine.model.builder_shim <builder args...> (same as the builder)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path


def _patch(hf_dir: Path) -> None:
    cfg = json.loads((hf_dir / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    if "rope_local_base_freq" in cfg:
        try:
            from transformers import Gemma3TextConfig
        except ImportError:  # pragma: no cover
            return
        Gemma3TextConfig.rope_local_base_freq = float(cfg["rope_local_base_freq"])  # type: ignore[attr-defined]


if __name__ == "__main__":
    args = sys.argv[1:]
    if "-i" in args:
        _patch(Path(args[args.index("-i") + 1]))
    sys.argv = ["builder", *args]
    runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
