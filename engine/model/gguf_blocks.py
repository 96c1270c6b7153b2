"""A GGUF tensor's own quantisation blocks as MatMulNBits operands, exactly (numpy only).

MatMulNBits (com.microsoft) computes ``y = x · Wᵀ`` with ``W[n, k] = scale[n, b] · (q[n, k] − zp)`` for the
block ``b = k // block_size``; with no zero-point input ``zp`` is 2^(bits−1). Each GGML block type maps onto
it without rounding anything again:

- Q8_0 (blocks of 32, fp16 d, int8 q):          8 bits, block 32, scale d,      stored q + 128
- Q5_0 (blocks of 32, fp16 d, q in 0..31):      8 bits, block 32, scale d,      stored q + 112 (q − 16)
- Q6_K (256 = 16 × 16, int8 sc, q in 0..63):    8 bits, block 16, scale d·sc,   stored q + 96  (q − 32)
- Q4_K (256 = 8 × 32, 6-bit sc and m):          4 bits, block 32, scale d·sc,   zero point 8, and a
  per-block offset ``dmin·m − 8·d·sc`` subtracted as ``(Σ_block x) · offsetᵀ`` beside the MatMulNBits (a
  matmul 1/32 of its size). onnxruntime's CPU kernel runs float zero points on a slow reference path (tens of
  times slower here), so the offset stays outside it; zero point 8 keeps what MatMulNBits multiplies centred
  (its int8 activations' rounding error grows with it: with zero point 0 it was 2.5× larger on a real matrix).

The scale products (``d·sc``, ``dmin·m``) are formed in float32 exactly as gguf's own dequantisation forms
them, so ``dequantize(to_nbits(t))`` equals ``gguf.quants.dequantize(t)`` bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# gguf's GGMLQuantizationType values (the gguf package is imported only where a file is read)
F32, F16, Q5_0, Q8_0, Q4_K, Q6_K = 0, 1, 6, 8, 12, 14
EXACT_TYPES = (Q5_0, Q8_0, Q4_K, Q6_K)


@dataclass
class NBits:
    """One matrix [N, K] as MatMulNBits operands: ``packed`` uint8 [N, nb, block·bits/8], ``scales`` float32
    [N, nb], ``zero_points`` (packed uint8, or None for the default), ``offset`` float32 [N, K/32] or None."""

    n: int
    k: int
    bits: int
    block: int
    packed: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None = None
    offset: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.packed, self.scales, self.zero_points, self.offset) if a is not None)


def _f16(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view(np.float16).astype(np.float32)


def _rows(raw: np.ndarray, n: int, block_bytes: int) -> np.ndarray:
    """The raw bytes as [N · blocks per row, block_bytes]."""
    return np.ascontiguousarray(raw, dtype=np.uint8).reshape(n, -1).reshape(-1, block_bytes)


def _pack4(q: np.ndarray) -> np.ndarray:
    """[..., block] values 0..15 -> [..., block/2] bytes, element 2i in the low nibble."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def q8_0(raw: np.ndarray, n: int, k: int) -> NBits:
    b = _rows(raw, n, 34)
    d = _f16(b[:, :2]).reshape(n, -1)
    q = (b[:, 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return NBits(n, k, 8, 32, q.reshape(n, -1, 32), d)


def q5_0(raw: np.ndarray, n: int, k: int) -> NBits:
    b = _rows(raw, n, 22)
    d = _f16(b[:, :2]).reshape(n, -1)
    qh = np.ascontiguousarray(b[:, 2:6]).view(np.uint32)  # bit j: the high bit of element j
    high = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)
    qs = b[:, 6:]
    low = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # elements 0..15 in low nibbles, 16..31 in high
    q = (low | (high << 4)) + 112  # q − 16 around the default zero point 128
    return NBits(n, k, 8, 32, q.reshape(n, -1, 32).astype(np.uint8), d)


def q6_k(raw: np.ndarray, n: int, k: int) -> NBits:
    b = _rows(raw, n, 210)
    nsb = b.shape[0]
    ql, qh, sc, d = b[:, :128], b[:, 128:192], b[:, 192:208].view(np.int8), _f16(b[:, 208:210])
    lo = (ql.reshape(nsb, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & 0x0F
    hi = (qh.reshape(nsb, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 0x03
    q = lo.reshape(nsb, 8, 32) | (hi.reshape(nsb, 8, 32) << 4)  # gguf's order: 8 runs of 32 per 256
    scales = (d * sc.astype(np.float32)).reshape(n, -1)  # float32(d) · float32(sc), as gguf forms it
    return NBits(n, k, 8, 16, (q.reshape(n, -1, 16) + 96).astype(np.uint8), scales)


def _scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's 12 bytes -> 8 six-bit scales and 8 six-bit mins (gguf's Q4_K.get_scale_min)."""
    s = s.reshape(-1, 3, 4)
    d, m, m_d = s[:, 0], s[:, 1], s[:, 2]
    sc = np.concatenate([d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return sc, mn


def q4_k(raw: np.ndarray, n: int, k: int) -> NBits:
    b = _rows(raw, n, 144)
    nsb = b.shape[0]
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    sc, mn = _scale_min_k4(np.ascontiguousarray(b[:, 4:16]))
    qs = b[:, 16:].reshape(nsb, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = (qs & 0x0F).reshape(n, -1, 32)
    scales = (d * sc.astype(np.float32)).reshape(n, -1)
    # d·sc·q − dmin·m = d·sc·(q − 8) − (dmin·m − 8·d·sc): the default zero point 8, the rest as the offset
    # (8·d·sc is exact in float32, so the offset differs from gguf's own dmin·m only by one rounding)
    offset = (dmin * mn.astype(np.float32)).reshape(n, -1) - 8 * scales
    return NBits(n, k, 4, 32, _pack4(q), scales, None, offset)


CONVERTERS = {Q8_0: q8_0, Q5_0: q5_0, Q6_K: q6_k, Q4_K: q4_k}


def to_nbits(qtype: int, raw: np.ndarray, n: int, k: int) -> NBits:
    """The exact MatMulNBits operands of a GGUF matrix of type ``qtype`` with N rows of K."""
    try:
        conv = CONVERTERS[int(qtype)]
    except KeyError:
        raise ValueError(f"GGML type {qtype} has no exact MatMulNBits form") from None
    return conv(raw, n, k)


def dequantize(p: NBits) -> np.ndarray:
    """The float32 matrix [N, K] the operands stand for (the inverse of ``to_nbits``, for tests and checks)."""
    if p.bits == 4:
        q = np.stack([p.packed & 0x0F, p.packed >> 4], axis=-1).reshape(p.n, -1, p.block)
    else:
        q = p.packed
    if p.zero_points is None:
        zp = np.float32(1 << (p.bits - 1))
        w = p.scales[:, :, None] * (q.astype(np.float32) - zp)
    else:
        z = p.zero_points
        if p.bits == 4:
            z = np.stack([z & 0x0F, z >> 4], axis=-1).reshape(p.n, -1)[:, : p.scales.shape[1]]
        w = p.scales[:, :, None] * (q.astype(np.float32) - z[:, :, None].astype(np.float32))
    if p.offset is not None:
        w = w - p.offset[:, :, None]
    return w.reshape(p.n, -1)[:, : p.k]


def quantize_rtn(w: np.ndarray, bits: int, block: int) -> NBits:
    """Symmetric round-to-nearest blocks of ``w`` [N, K] (the int8 / int4 precisions: the GGUF's values rounded
    once more onto a coarser grid, for speed). As onnxruntime's quantiser (and ggml's Q4_0/Q8_0) do it: the
    block's value of largest magnitude maps to −2^(bits−1) exactly (a signed scale), so all 2^bits levels are
    used; the same recipe as the builds made before with onnxruntime-genai."""
    n, k = w.shape
    nb = -(-k // block)
    wb = np.pad(w, ((0, 0), (0, nb * block - k))).reshape(n, nb, block).astype(np.float32)
    half = 1 << (bits - 1)
    lo, hi = wb.min(axis=2, keepdims=True), wb.max(axis=2, keepdims=True)
    peak = np.where(np.abs(lo) >= np.abs(hi), lo, hi)  # a tie goes to the negative end, as onnxruntime's does
    scale = (peak / -half).astype(np.float32)
    scale = np.where(scale != 0, scale, np.float32(1.0)).astype(np.float32)
    q = (np.clip(np.rint(wb / scale), -half, half - 1) + half).astype(np.uint8)
    packed = _pack4(q) if bits == 4 else q
    return NBits(n, k, bits, block, np.ascontiguousarray(packed), scale.reshape(n, nb))
