"""A Flint model directory straight from a GGUF file: no torch, no transformers, no intermediate copy.

Steps (engine/model/build.py publishes the directory with one rename):
  1. read     the file memory-mapped (gguf_source.py): shape, tokenizer, tensors
  2. decoder  every matrix as the precision asks (below), written as one ONNX graph (qwen2_graph.py)
  3. head     the output matrix as its own MatMulNBits graph, plus the trimmed head over the tokens code uses
  4. embed    the token embedding's rows as int8 blocks the runtime looks up (exact for Q5_0 / Q8_0 files)

Precisions:
  gguf   each matrix in the file's own blocks, exactly (gguf_blocks.py: 8 bits for Q5_0 / Q8_0 / Q6_K,
         4 bits + the block offsets for Q4_K)
  int8   the file's values rounded again onto 8-bit blocks of 128 (fewer scales per weight: faster here)
  int4   the file's values rounded again onto 4-bit blocks of 32
  fp32   the file's values as float32 (plain MatMul): the reference the tests compare against
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.model.gguf_blocks import NBits, quantize_rtn
from engine.model.gguf_source import GGUFSource
from engine.model.qwen2_graph import Layer, Linear, decoder_model

log = logging.getLogger("flint.build")

# precision -> how one decoder matrix is stored (None: as the file holds it)
GGUF_PRECISIONS: dict[str, tuple[int, int] | None] = {"gguf": None, "int8": (8, 128), "int4": (4, 32), "fp32": None}
# what a directory's manifest records as its weight recipe (a directory with another recipe is rebuilt)
GGUF_RECIPES: dict[str, dict[str, str]] = {
    "gguf": {"from": "gguf-blocks"},
    "int8": {"from": "gguf", "block_size": "128"},
    "int4": {"from": "gguf", "block_size": "32"},
    "fp32": {"from": "gguf"},
}
HEAD_BLOCK = 32  # the runtime reads head rows and embeddings in 8-bit blocks of 32


def _matrix(src: GGUFSource, name: str, precision: str) -> Linear:
    if precision == "fp32":
        return src.float32(name)
    if precision == "gguf":
        if src.exact(name):
            return src.blocks(name)
        log.warning("%s: GGML type %d has no exact MatMulNBits form; rounded to 8-bit blocks of 32", name,
                    src.qtype(name))
        return quantize_rtn(src.float32(name), 8, 32)
    bits, block = GGUF_PRECISIONS[precision]  # type: ignore[misc]
    return quantize_rtn(src.float32(name), bits, block)


def _rows8(src: GGUFSource, name: str) -> NBits:
    """A vocabulary-sized matrix as 8-bit blocks of 32: the file's own blocks where they are of that form
    (Q8_0, Q5_0), else its values rounded onto them."""
    if src.exact(name):
        p = src.blocks(name)
        if p.bits == 8 and p.block == HEAD_BLOCK and p.zero_points is None and p.offset is None:
            return p
    return quantize_rtn(src.float32(name), 8, HEAD_BLOCK)


def read_layers(src: GGUFSource, precision: str) -> tuple[list[Layer], np.ndarray]:
    cfg = src.config()
    layers = []
    for i in range(cfg.num_layers):
        b = f"blk.{i}"

        def m(t: str, b: str = b) -> Linear:
            return _matrix(src, f"{b}.{t}.weight", precision)

        layers.append(Layer(
            attn_norm=src.vector(f"{b}.attn_norm.weight"), q=m("attn_q"), k=m("attn_k"), v=m("attn_v"),
            q_bias=src.vector(f"{b}.attn_q.bias"), k_bias=src.vector(f"{b}.attn_k.bias"),
            v_bias=src.vector(f"{b}.attn_v.bias"), o=m("attn_output"), ffn_norm=src.vector(f"{b}.ffn_norm.weight"),
            gate=m("ffn_gate"), up=m("ffn_up"), down=m("ffn_down")))
    return layers, src.vector("output_norm.weight")


def write_decoder(src: GGUFSource, out_dir: Path, precision: str) -> None:
    import onnx

    layers, final_norm = read_layers(src, precision)
    model = decoder_model(src.config(), layers, final_norm)
    onnx.save_model(model, str(out_dir / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=1024)


def write_heads(src: GGUFSource, out_dir: Path, precision: str, tokenizer_json: Path,
                code_ids: Callable[[Path, int], np.ndarray]) -> dict[str, Any]:
    """lm_head.onnx, lm_head_code.onnx (+ its ids) and the embedding table; returns the manifest's lm_head."""
    from engine.model.lm_head import write_head

    tied = "output.weight" not in src.tensors
    head_name = "token_embd.weight" if tied else "output.weight"
    n, k = src.shape(head_name)
    head: Linear = src.float32(head_name) if precision == "fp32" else _rows8(src, head_name)
    write_head(head, out_dir / "lm_head.onnx")
    info: dict[str, Any] = {"full": "lm_head.onnx", "bits": None if precision == "fp32" else 8, "vocab": n,
                            "tied": tied}
    ids = code_ids(tokenizer_json, n)
    np.save(out_dir / "lm_head_code_ids.npy", ids)
    if isinstance(head, NBits):
        trimmed: Linear = NBits(len(ids), k, head.bits, head.block, head.packed[ids], head.scales[ids])
    else:
        trimmed = head[ids]
    write_head(trimmed, out_dir / "lm_head_code.onnx")
    info.update({"code": "lm_head_code.onnx", "code_ids": "lm_head_code_ids.npy", "code_vocab": int(len(ids))})
    del head, trimmed
    if precision == "fp32":
        np.save(out_dir / "embed_f32.npy", src.float32("token_embd.weight"))
        info["embed"] = {"f32": "embed_f32.npy", "dim": k}
    else:
        emb = _rows8(src, "token_embd.weight")
        np.save(out_dir / "embed_q8.npy", emb.packed.reshape(emb.n, -1))
        np.save(out_dir / "embed_scales.npy", emb.scales.reshape(emb.n, -1))
        info["embed"] = {"q": "embed_q8.npy", "scales": "embed_scales.npy", "block": HEAD_BLOCK, "dim": k}
    (out_dir / "lm_head.json").write_text(json.dumps(info, indent=2))
    return info


def build_from_gguf(gguf_path: Path, out_dir: Path, precision: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """Write a model directory's files (all but the manifest) into ``out_dir``; returns what the manifest needs:
    the shape, special ids and the lm_head entry."""
    from engine.model.lm_head import code_token_ids

    if precision not in GGUF_PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}")
    t0 = time.perf_counter()
    src = GGUFSource(gguf_path)
    cfg = src.config()
    tok = src.tokenizer_json()
    (out_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    progress(f"decoder ({precision})")
    write_decoder(src, out_dir, precision)
    progress("LM head")
    heads = write_heads(src, out_dir, precision, out_dir / "tokenizer.json", code_token_ids)
    log.info("built %s (%s) from %s in %.1f s", gguf_path.name, precision, gguf_path.name, time.perf_counter() - t0)
    special = src.special_ids()
    return {
        "num_layers": cfg.num_layers, "num_kv_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim,
        "hidden_size": cfg.hidden_size, "vocab_size": len(tok["model"]["vocab"]),
        "context_length": cfg.max_positions, "eos": special["eos"], "bos": special["bos"], "lm_head": heads,
    }
