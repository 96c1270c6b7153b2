"""The model built from the GGUF's own blocks (`flint model build -p gguf`): every matrix of the decoder, the LM
head and the embedding table stand for exactly what gguf's own dequantisation of the file gives; the tokenizer
made from the file's vocabulary round-trips code; the build leaves nothing behind but the directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine import paths
from engine.model.gguf_blocks import NBits, dequantize
from engine.model.presets import DEFAULT_MODEL, PRESETS

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def built():
    from engine.config import resolve_model_dir

    d = resolve_model_dir(paths.models_dir() / f"{DEFAULT_MODEL}-gguf")
    gguf = paths.gguf_dir() / PRESETS[DEFAULT_MODEL].gguf_name
    assert gguf.exists(), "scripts/test.sh builds with --keep-gguf: this test reads the file"
    return Path(d), gguf


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal to float32 rounding (Q4_K's offset is one float32 operation away from gguf's dmin·m)."""
    return bool(np.abs(got - want).max() <= 4 * np.finfo(np.float32).eps * np.abs(want).max())


def _graph_matrices(model_path: Path) -> dict[str, NBits]:
    """Every MatMulNBits of a graph as NBits (its offset correction, where it has one, attached)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(model_path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type != "MatMulNBits":
            continue
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        name = n.name.rsplit("/", 1)[0] if "/" in n.name else n.name
        packed = inits[n.input[1]]
        zp = inits[n.input[3]] if len(n.input) > 3 and n.input[3] else None
        nb = -(-a["K"] // a["block_size"])
        out[name] = NBits(a["N"], a["K"], a["bits"], a["block_size"], packed, inits[n.input[2]].reshape(a["N"], nb),
                          None if zp is None else zp.reshape(a["N"], -1), inits.get(f"{name}.offset", None))
        if out[name].offset is not None:
            out[name].offset = np.ascontiguousarray(out[name].offset.T)
    return out


def test_every_matrix_is_the_files_own_blocks(built):
    from gguf import GGUFReader
    from gguf.quants import dequantize as gguf_dequantize

    d, gguf = built
    tensors = {t.name: t for t in GGUFReader(str(gguf)).tensors}

    def want(name: str) -> np.ndarray:
        t = tensors[name]
        return gguf_dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))

    mats = _graph_matrices(d / "model.onnx")
    layers = sum(1 for n in tensors if n.endswith(".attn_norm.weight"))
    checked = 0
    for i in range(layers):
        b = f"blk.{i}."
        qkv = mats.get(f"layers.{i}/qkv")
        if qkv is not None:
            expect = np.concatenate([want(b + "attn_q.weight"), want(b + "attn_k.weight"), want(b + "attn_v.weight")])
            assert _same(dequantize(qkv), expect), f"layer {i} qkv"
        else:
            for x in ("q", "k", "v"):
                assert _same(dequantize(mats[f"layers.{i}/{x}"]), want(f"{b}attn_{x}.weight"))
        for ours, theirs in (("o", "attn_output"), ("gate", "ffn_gate"), ("up", "ffn_up"), ("down", "ffn_down")):
            assert _same(dequantize(mats[f"layers.{i}/{ours}"]), want(f"{b}{theirs}.weight")), (i, ours)
            checked += 1
    assert checked == 4 * layers > 0
    head = _graph_matrices(d / "lm_head.onnx")
    (h,) = head.values()
    assert np.array_equal(dequantize(h), want("output.weight"))
    q, s = np.load(d / "embed_q8.npy"), np.load(d / "embed_scales.npy")
    rows = np.array([0, 7, 151643, 151659, len(q) - 1])
    emb = (q[rows].reshape(len(rows), s.shape[1], -1).astype(np.float32) - 128) * s[rows][:, :, None]
    assert np.array_equal(emb.reshape(len(rows), -1), want("token_embd.weight")[rows])


def test_the_tokenizer_from_the_files_vocabulary_round_trips_code(built):
    from tokenizers import Tokenizer

    d, _ = built
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    text = Path(__file__).read_text() + "\r\n\tΔ = 'naïve' # 世界 🙂\n"
    ids = tok.encode(text).ids
    assert tok.decode(ids, skip_special_tokens=False) == text and len(ids) < len(text) / 2  # merges apply: far fewer tokens than characters
    for special in ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|endoftext|>"):
        assert tok.encode(f"x{special}y").ids[1] == tok.token_to_id(special)


def test_nothing_but_the_model_directories_is_left_under_flint_home(built):
    home = paths.flint_home()
    assert not (home / "hf").exists(), "no float32 Hugging Face copy is kept"
    assert not [p for p in paths.models_dir().iterdir() if p.name.startswith((".build-", ".old-"))]
