"""GGUF blocks as MatMulNBits operands (engine/model/gguf_blocks.py): for every block type the presets' files
hold, the operands stand for exactly gguf's own dequantisation, and onnxruntime's MatMulNBits over them (with
the Q4_K offset correction the decoder graph adds) computes x·Wᵀ. No model needed: random valid blocks."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from engine.model.gguf_blocks import NBits, dequantize, quantize_rtn, to_nbits

N, K = 48, 512  # K a multiple of 256: every super-block type fits


def _random_blocks(qtype: T, rng: np.random.Generator) -> np.ndarray:
    """Raw bytes [N, row bytes] of a matrix in ``qtype``: gguf's own quantiser where it has one, else random
    bytes with sane fp16 scales (every bit pattern of the quants is a valid block)."""
    if qtype in (T.Q8_0, T.Q5_0):
        return gguf_quantize(rng.standard_normal((N, K)).astype(np.float32), qtype)
    block_bytes = {T.Q4_K: 144, T.Q6_K: 210}[qtype]
    raw = rng.integers(0, 256, (N, K // 256, block_bytes), dtype=np.uint8)
    d = rng.uniform(1e-3, 2e-2, (N, K // 256)).astype(np.float16).view(np.uint8).reshape(N, K // 256, 2)
    if qtype == T.Q4_K:
        raw[..., 0:2] = d
        raw[..., 2:4] = (rng.uniform(1e-3, 1e-2, (N, K // 256)).astype(np.float16)
                         .view(np.uint8).reshape(N, K // 256, 2))
    else:
        raw[..., 208:210] = d
    return raw.reshape(N, -1)


def same_to_rounding(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal up to float32 rounding of the largest magnitude (Q4_K's offset is one float32 sum away from gguf's
    own dmin·m); the other types are compared bit for bit."""
    return bool(np.abs(got - want).max() <= 4 * np.finfo(np.float32).eps * np.abs(want).max())


@pytest.mark.parametrize("qtype", [T.Q8_0, T.Q5_0, T.Q4_K, T.Q6_K])
def test_blocks_stand_for_ggufs_own_dequantisation(qtype):
    raw = _random_blocks(qtype, np.random.default_rng(int(qtype)))
    p = to_nbits(int(qtype), raw, N, K)
    want = gguf_dequantize(raw, qtype).reshape(N, K)
    if qtype == T.Q4_K:
        assert same_to_rounding(dequantize(p), want)
    else:
        assert np.array_equal(dequantize(p), want)
    # the stored bytes are no more than the block form needs: ≤ 8 bits a weight plus a scale per block
    assert p.packed.nbytes == N * K * p.bits // 8 and p.scales.shape == (N, K // p.block)


def test_a_type_without_an_exact_form_is_refused():
    with pytest.raises(ValueError, match="no exact MatMulNBits form"):
        to_nbits(int(T.Q3_K), np.zeros((N, 110 * K // 256), np.uint8), N, K)


def _matmul(p: NBits | np.ndarray, x: np.ndarray) -> np.ndarray:
    """y = x·Wᵀ through the decoder graph's own linear layer (MatMulNBits + the offset correction)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from engine.model.qwen2_graph import _Graph

    g = _Graph(accuracy_level=4)
    y = g.linear("x", p, "w")
    n = p.n if isinstance(p, NBits) else p.shape[0]
    graph = helper.make_graph(g.nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "S", K])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, "S", n])], initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x[None]})[0][0]


@pytest.mark.parametrize("qtype", [T.Q8_0, T.Q5_0, T.Q4_K, T.Q6_K])
def test_matmulnbits_over_the_blocks_computes_x_times_w(qtype):
    rng = np.random.default_rng(7)
    raw = _random_blocks(qtype, rng)
    w = gguf_dequantize(raw, qtype).reshape(N, K).astype(np.float64)
    x = rng.standard_normal((5, K)).astype(np.float32)
    got = _matmul(to_nbits(int(qtype), raw, N, K), x)
    want = x.astype(np.float64) @ w.T
    # accuracy level 4 rounds the activations onto int8 per block: within a percent of the output's scale
    err = np.abs(got - want).max()
    assert err <= 0.02 * np.abs(want).max()
    # the offset matters: without it a Q4_K matrix is far further off (inputs of one sign: large block sums)
    if qtype == T.Q4_K:
        xp = np.abs(x)
        p = to_nbits(int(qtype), raw, N, K)
        err_p = np.abs(_matmul(p, xp) - xp.astype(np.float64) @ w.T).max()
        p.offset = None
        assert np.abs(_matmul(p, xp) - xp.astype(np.float64) @ w.T).max() > 10 * err_p


def test_rounding_again_onto_coarser_blocks_stays_close():
    w = np.random.default_rng(3).standard_normal((N, K)).astype(np.float32)
    for bits, block, tol in ((8, 128, 0.01), (4, 32, 0.2)):
        p = quantize_rtn(w, bits, block)
        assert p.block == block and np.abs(dequantize(p) - w).max() <= tol * np.abs(w).max()
