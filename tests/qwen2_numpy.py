"""An independent Qwen2 forward in numpy over gguf's own dequantisation of a GGUF: the reference the fp32 ONNX
build is checked against (it shares nothing with engine/model/qwen2_graph.py but the file it reads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class Qwen2Numpy:
    def __init__(self, gguf_path: Path) -> None:
        from gguf import GGUFReader
        from gguf.quants import dequantize

        r = GGUFReader(str(gguf_path))
        meta = {k: f.contents() for k, f in r.fields.items() if k.startswith("qwen2.")}
        self.layers = int(meta["qwen2.block_count"])
        self.h = int(meta["qwen2.embedding_length"])
        self.heads = int(meta["qwen2.attention.head_count"])
        self.kv_heads = int(meta["qwen2.attention.head_count_kv"])
        self.eps = float(meta["qwen2.attention.layer_norm_rms_epsilon"])
        self.theta = float(meta["qwen2.rope.freq_base"])
        self.d = self.h // self.heads
        self.w: dict[str, np.ndarray] = {}
        for t in r.tensors:
            a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            self.w[t.name] = a.reshape(-1) if len(t.shape) == 1 else a.reshape(int(t.shape[1]), int(t.shape[0]))

    def _rms(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x.astype(np.float64) ** 2, -1, keepdims=True) + self.eps).astype(np.float32) * w

    def _rope(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Rotate-half rotary embedding of x [heads, S, d] at positions pos [S]."""
        inv = 1.0 / (self.theta ** (np.arange(0, self.d, 2, dtype=np.float64) / self.d))
        ang = np.outer(pos, inv)
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        x1, x2 = x[..., : self.d // 2], x[..., self.d // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def greedy(self, ids: list[int], max_new: int, stop: set[int]) -> list[int]:
        """Greedy continuation of ``ids`` (a KV cache per layer; causal attention)."""
        cache: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros((self.kv_heads, 0, self.d), np.float32),) * 2
                                                       for _ in range(self.layers)]
        out: list[int] = []
        step = list(ids)
        start = 0
        for _ in range(max_new):
            x = self.w["token_embd.weight"][step]
            pos = np.arange(start, start + len(step))
            for i in range(self.layers):
                b = f"blk.{i}."
                xn = self._rms(x, self.w[b + "attn_norm.weight"])
                q = (xn @ self.w[b + "attn_q.weight"].T + self.w[b + "attn_q.bias"]).reshape(len(step), self.heads, self.d)
                k = (xn @ self.w[b + "attn_k.weight"].T + self.w[b + "attn_k.bias"]).reshape(len(step), self.kv_heads, self.d)
                v = (xn @ self.w[b + "attn_v.weight"].T + self.w[b + "attn_v.bias"]).reshape(len(step), self.kv_heads, self.d)
                q = self._rope(q.transpose(1, 0, 2), pos)
                k = self._rope(k.transpose(1, 0, 2), pos)
                kc = np.concatenate([cache[i][0], k], axis=1)
                vc = np.concatenate([cache[i][1], v.transpose(1, 0, 2)], axis=1)
                cache[i] = (kc, vc)
                rep = self.heads // self.kv_heads
                kr, vr = np.repeat(kc, rep, axis=0), np.repeat(vc, rep, axis=0)
                s = q @ kr.transpose(0, 2, 1) * self.d ** -0.5  # a Python float keeps float32 (np.sqrt is float64)
                total = kc.shape[1]
                causal = np.arange(total)[None, :] > pos[:, None]
                s = np.where(causal[None], -np.inf, s)
                p = np.exp(s - s.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
                a = (p @ vr).transpose(1, 0, 2).reshape(len(step), self.h)
                x = x + a @ self.w[b + "attn_output.weight"].T
                xn = self._rms(x, self.w[b + "ffn_norm.weight"])
                g = xn @ self.w[b + "ffn_gate.weight"].T
                x = x + ((g / (1 + np.exp(-g))) * (xn @ self.w[b + "ffn_up.weight"].T)) @ self.w[b + "ffn_down.weight"].T
            last = self._rms(x[-1:], self.w["output_norm.weight"])
            nxt = int(np.argmax(last @ self.w["output.weight"].T))
            if nxt in stop:
                break
            out.append(nxt)
            start += len(step)
            step = [nxt]
        return out
