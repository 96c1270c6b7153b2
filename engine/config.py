"""What an Engine is built from: the model directory (from a path, a preset name or FLINT_MODEL) and the
engine's settings (window sizes, KV capacity, the switchable fast paths: engine/decoding/fast.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engine import paths
from engine.decoding.fast import FastPaths
from engine.model.manifest import Manifest
from engine.model.presets import DEFAULT_MODEL, PRESETS, precision_preference
from engine.model.runtime import default_threads
from engine.text.window import MAX_PREFIX_CHARS, MAX_SUFFIX_CHARS


class ModelNotBuilt(RuntimeError):
    pass


def resolve_model_dir(model: str | Path | None = None) -> Path:
    """A model directory from a path, a preset name (default precision) or FLINT_MODEL / the default.

    Raises ModelNotBuilt with a message that says what is wrong, with which file, and what to run."""
    from engine.model.recipes import read_manifest

    model = model or os.environ.get("FLINT_MODEL") or DEFAULT_MODEL
    name = str(model)
    p = Path(name).expanduser()

    def manifest_of(d: Path) -> Manifest | None:
        m, problem = read_manifest(d)
        if problem is not None:
            raise ModelNotBuilt(problem)
        return m

    if p.is_dir():
        if manifest_of(p) is None:
            raise ModelNotBuilt(f"{p} is not a Flint model directory (it has no flint.json): build one with "
                                f"`flint model build` (a preset) or `flint model build --from-hf HF_DIR`, or "
                                f"pass a preset name ({', '.join(sorted(PRESETS))})")
        return p
    looks_like_path = p.is_absolute() or name.startswith((".", "~")) or os.sep in name or "/" in name
    if looks_like_path:
        what = "is a file, not a model directory" if p.exists() else "does not exist"
        raise ModelNotBuilt(f"model directory {p} {what}: build a model with `flint model build` (models go to "
                            f"{paths.models_dir()}), or pass a preset name ({', '.join(sorted(PRESETS))})")
    candidates: list[Path] = []
    if name in PRESETS:
        # the default precision, then the nearest others (not the alphabetical glob: fp32 is the last resort)
        candidates.extend(paths.models_dir() / f"{name}-{p}"
                          for p in precision_preference(PRESETS[name].default_precision))
    candidates.append(paths.models_dir() / name)
    if paths.models_dir().exists():  # any precision of that name
        candidates.extend(sorted(paths.models_dir().glob(f"{name}-*")))
    damaged: list[str] = []
    for c in candidates:
        try:
            if c.is_dir() and manifest_of(c) is not None:
                return c
        except ModelNotBuilt as e:
            damaged.append(str(e))
    if damaged:
        raise ModelNotBuilt(damaged[0])
    hint = f"flint model build {name}" if name in PRESETS else \
        f"flint model build (presets: {', '.join(sorted(PRESETS))}) or flint model build --from-hf HF_DIR --name {name}"
    raise ModelNotBuilt(f"model {name!r} is not built: run `{hint}` (looked in {paths.models_dir()})")


@dataclass
class EngineConfig:
    threads: int = field(default_factory=default_threads)
    # decoding steps and the heads on a one-thread session beside the ``threads`` one (engine/model/runtime.py
    # OnnxDecoder; docs/benchmarks/cpu.md)
    step_session: bool = True
    capacity: int = 2048  # KV positions; prompts are windowed to fit with room for the completion
    batch_max: int = 3  # variants share one batch: the LSP default maxVariants is 3
    max_prefix_chars: int = MAX_PREFIX_CHARS
    max_suffix_chars: int = MAX_SUFFIX_CHARS
    # also the cancel granularity while a prompt runs; per token, prefill in chunks of 64 is no slower than in
    # chunks of 256 (docs/benchmarks/forward.md)
    prefill_chunk: int = 64
    warm_chunk: int = 64  # prefill chunk in idle time: the user may type any moment
    # idle time leaves a window alone when the KV holds all of it but this share of its tokens (and no more
    # than ``quick_above_tokens``): re-running it would only repeat its tail
    warm_slack: float = 0.1
    # the quick first window (GenParams.quick_start): a prompt far from every cached one (a file just opened,
    # a jump) is served first from a short window around the cursor while the full window is prefilled in
    # idle time (Engine.prefill); used when the full window needs more than ``quick_above_tokens`` new
    # tokens of prefill and the quick one needs fewer
    quick_prefix_chars: int = 768
    quick_suffix_chars: int = 256
    quick_above_tokens: int = 192
    # ... reaching back this far for the line that opens the definition the cursor is in (its name and
    # parameters; a long docstring pushes them out of the quick window)
    quick_reach_chars: int = 2048
    # KV positions added for the repository context block (engine/context/workspace.py) in front of every prompt: the
    # file window keeps its room; a block larger than this shortens the window instead
    context_tokens: int = 0
    # how the block is laid out (engine/decoding/layout.py): "comments" (chunks as comments at the start of
    # the FIM prefix) or "repository" (the model's repository format after BOS; kept for measurement)
    context_layout: str = "comments"
    fast: FastPaths = field(default_factory=FastPaths)
    # monitor-guided decoding (GenParams.guidance asks for it): how long one step waits for the analyser,
    # and whether soft trigger points (a bracket's first element, a member at a statement's start) count
    guidance_budget_s: float = 0.02
    guidance_soft: bool = False

