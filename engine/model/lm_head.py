"""The LM head as its own small ONNX graph (MatMulNBits over the tied embedding matrix).

Why separate: the decoder is exported without its head, so Flint computes logits only where it needs
them (the last prompt position, or the k+1 positions a speculative draft is verified on) instead of
for every prefill token. A second, *trimmed* head holds only the rows of tokens that a code corpus
uses; most of a 150k-token vocabulary (CJK, prose fragments) never appears in code, and the head is a
large share of the bytes read per decoded token.

MatMulNBits layout (com.microsoft): B is the weight as [N, K] (N outputs, K inputs) cut into blocks of
``block_size`` along K, packed to uint8 [N, n_blocks, block_size * bits / 8]; scales are float
[N * n_blocks]; with no zero_points input the zero point is 2^(bits-1) (8 for int4, 128 for int8).
For int4, element 2i sits in the low nibble of a byte and 2i+1 in the high nibble.
"""

from __future__ import annotations

import json
import logging
import sys
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np

from engine.model.gguf_blocks import NBits, quantize_rtn

log = logging.getLogger("flint.lm_head")

BLOCK = 32


def quantize_blockwise(w: np.ndarray, bits: int, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric round-to-nearest quantisation of w [N, K] -> (packed uint8 [N, nb, blob], scales [N*nb])."""
    p = quantize_rtn(w, bits, block)
    return p.packed, p.scales.reshape(-1)


def make_head_model(w: np.ndarray, bits: int | None, path: Path, accuracy_level: int = 4) -> None:
    """Write an ONNX graph hidden [S, K] -> logits [S, N] for weight w [N, K] (``bits`` None: float32)."""
    write_head(w if bits is None else quantize_rtn(w, bits, BLOCK), path, accuracy_level)


def write_head(w: np.ndarray | NBits, path: Path, accuracy_level: int = 4) -> None:
    """Write an ONNX graph hidden [S, K] -> logits [S, N]: MatMulNBits over the blocks ``w`` holds, or MatMul
    over a float32 matrix [N, K]. The external data file holds B then the scales (the runtime maps them)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n, k = (w.n, w.k) if isinstance(w, NBits) else w.shape
    inp = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["S", k])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["S", n])
    if not isinstance(w, NBits):
        init = [numpy_helper.from_array(np.ascontiguousarray(w.T.astype(np.float32)), "W")]
        node = helper.make_node("MatMul", ["hidden", "W"], ["logits"])
        opset = [helper.make_opsetid("", 17)]
    else:
        init = [numpy_helper.from_array(np.ascontiguousarray(w.packed), "B"),
                numpy_helper.from_array(np.ascontiguousarray(w.scales.reshape(-1)), "scales")]
        ins = ["hidden", "B", "scales"]
        if w.zero_points is not None:
            init.append(numpy_helper.from_array(np.ascontiguousarray(w.zero_points.reshape(-1)), "zero_points"))
            ins.append("zero_points")
        node = helper.make_node("MatMulNBits", ins, ["logits"], domain="com.microsoft",
                                K=k, N=n, bits=w.bits, block_size=w.block, accuracy_level=accuracy_level)
        opset = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    graph = helper.make_graph([node], "flint_lm_head", [inp], [out], initializer=init)
    model = helper.make_model(graph, opset_imports=opset, producer_name="flint")
    model.ir_version = 9
    data_name = path.name + ".data"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_name, size_threshold=1024)


def _load_embedding(hf_dir: Path) -> np.ndarray | None:
    from safetensors import safe_open

    for f in sorted(hf_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="np") as st:
            for key in ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight"):
                if key in st.keys():
                    return np.asarray(st.get_tensor(key), dtype=np.float32)
    return None


def embed_lookup(q: np.ndarray, scales: np.ndarray, ids: np.ndarray, dim: int, block: int = BLOCK) -> np.ndarray:
    """Rows of the int8 (zero point 128) block-quantised embedding, dequantised: [..., dim] float32."""
    flat = ids.reshape(-1)
    rows = q[flat].astype(np.float32) - 128.0
    nb = scales.shape[1]
    rows = rows.reshape(len(flat), nb, block) * scales[flat][:, :, None]
    return rows.reshape(len(flat), -1)[:, :dim].reshape(*ids.shape, dim)


def _load_head_weight(hf_dir: Path) -> tuple[np.ndarray, bool]:
    from safetensors import safe_open

    files = sorted(hf_dir.glob("*.safetensors"))
    names = ("lm_head.weight", "model.embed_tokens.weight", "model.language_model.embed_tokens.weight",
             "embed_tokens.weight")
    found: dict[str, Any] = {}
    for f in files:
        with safe_open(str(f), framework="np") as st:
            for key in st.keys():
                if key in names:
                    found[key] = (f, key)
    for key in names:
        if key in found:
            f, k = found[key]
            with safe_open(str(f), framework="np") as st:
                return np.asarray(st.get_tensor(k), dtype=np.float32), key != "lm_head.weight"
    raise RuntimeError(f"no LM head / embedding weight in {hf_dir}")


def code_corpus_files(limit_bytes: int = 24_000_000) -> list[Path]:
    """A deterministic sample of source code found on this machine (stdlib Python, C headers, ...)."""
    roots: list[tuple[Path, tuple[str, ...]]] = [
        (Path(sysconfig.get_paths()["stdlib"]), (".py",)),
        (Path("/usr/include"), (".h",)),
        (Path("/usr/lib/node_modules"), (".js", ".ts")),
        (Path("/usr/share/doc"), (".rs", ".go", ".java", ".sh")),
    ]
    per_root = limit_bytes // len(roots)
    out: list[Path] = []
    for root, exts in roots:
        if not root.exists():
            continue
        total = 0
        for p in sorted(root.rglob("*")):
            if p.suffix in exts and p.is_file() and "site-packages" not in p.parts:
                try:
                    sz = p.stat().st_size
                except OSError:
                    continue
                if sz > 200_000:
                    continue
                out.append(p)
                total += sz
                if total >= per_root:
                    break
    return out


def code_token_ids(tokenizer_json: Path, vocab_size: int) -> np.ndarray:
    """Token ids a code corpus uses, plus every special/added token and every single-byte token."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    seen = np.zeros(vocab_size, dtype=bool)
    texts: list[str] = []
    for p in code_corpus_files():
        try:
            texts.append(p.read_text(encoding="utf-8", errors="ignore"))
        except OSError:
            continue
    for i in range(0, len(texts), 64):
        for enc in tok.encode_batch(texts[i:i + 64], add_special_tokens=False):
            ids = np.asarray(enc.ids, dtype=np.int64)
            seen[ids[ids < vocab_size]] = True
    for t in tok.get_added_tokens_decoder():
        if t < vocab_size:
            seen[t] = True
    vocab = tok.get_vocab()
    for s, i in vocab.items():
        # single-byte tokens keep every string representable (byte-level BPE)
        if i < vocab_size and len(s) == 1:
            seen[i] = True
    return np.nonzero(seen)[0].astype(np.int64)


def build_lm_heads(hf_dir: Path, out_dir: Path, bits: int | None) -> dict[str, Any]:
    """Write lm_head.onnx (+ lm_head_code.onnx and its token map) into out_dir; return manifest info."""
    w, tied = _load_head_weight(hf_dir)
    # The head is quantised to int8 even for int4 bodies: it decides every token, and int8 keeps greedy
    # text closest to fp32 (measured in docs/benchmarks/quality.md).
    make_head_model(w, bits, out_dir / "lm_head.onnx")
    info: dict[str, Any] = {"full": "lm_head.onnx", "bits": bits, "vocab": int(w.shape[0]), "tied": tied}
    # The decoder is exported without its embedding (exclude_embeds): Flint looks rows up itself in an
    # int8 block-quantised copy (1/4 of fp32's memory; the GGUF's own embedding is 5-bit, so int8 blocks
    # of 32 keep it nearly exact) and feeds inputs_embeds.
    emb = _load_embedding(hf_dir)
    if emb is None:
        emb = w
    if bits is None:  # fp32 builds stay exact: they are the reference
        np.save(out_dir / "embed_f32.npy", np.ascontiguousarray(emb, dtype=np.float32))
        info["embed"] = {"f32": "embed_f32.npy", "dim": int(emb.shape[1])}
    else:
        q, sc = quantize_blockwise(emb, 8)
        np.save(out_dir / "embed_q8.npy", q.reshape(q.shape[0], -1))
        np.save(out_dir / "embed_scales.npy", sc.reshape(q.shape[0], -1))
        info["embed"] = {"q": "embed_q8.npy", "scales": "embed_scales.npy", "block": BLOCK, "dim": int(emb.shape[1])}
    tok_json = hf_dir / "tokenizer.json"
    if tok_json.exists():
        ids = code_token_ids(tok_json, w.shape[0])
        np.save(out_dir / "lm_head_code_ids.npy", ids)
        make_head_model(w[ids], bits, out_dir / "lm_head_code.onnx")
        info.update({"code": "lm_head_code.onnx", "code_ids": "lm_head_code_ids.npy", "code_vocab": int(len(ids))})
        log.info("trimmed LM head: %d of %d tokens", len(ids), w.shape[0])
    (out_dir / "lm_head.json").write_text(json.dumps(info, indent=2))
    print(f"flint: LM head {info}", file=sys.stderr)
    return info
