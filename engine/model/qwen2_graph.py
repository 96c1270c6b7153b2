"""The Qwen2 decoder as an ONNX graph written from weights: a pure function from tensors to a model.

The graph is the one Flint's runtime drives (engine/model/runtime.py), with onnxruntime's contrib operators:

    inputs_embeds [B, S, H], attention_mask [B, T], past_key_values.i.key/value [B, kv, P, D]
      -> per layer: SimplifiedLayerNorm / SkipSimplifiedLayerNorm, Q·K·V projections (+ bias),
         GroupQueryAttention (rotary inside, KV written into present.i.*), O projection, SiLU-gated MLP
      -> hidden_states [B, S, H] (no LM head, no embedding: Flint runs those itself), present.i.key/value

GroupQueryAttention takes the valid length of each row as ``attention_mask``'s row sum − 1 and the total
length as its width; with past and present bound to one buffer (the runtime's IOBinding) it writes the new
positions in place. Weights come in as ``Linear`` values: an ``NBits`` (MatMulNBits operands, see
gguf_blocks.py) or a float32 matrix [N, K] (plain MatMul: the fp32 reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.model.gguf_blocks import NBits

Linear = NBits | np.ndarray


@dataclass(frozen=True)
class Qwen2Config:
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    rms_eps: float
    rope_theta: float
    max_positions: int

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass
class Layer:
    attn_norm: np.ndarray
    q: Linear
    k: Linear
    v: Linear
    q_bias: np.ndarray
    k_bias: np.ndarray
    v_bias: np.ndarray
    o: Linear
    ffn_norm: np.ndarray
    gate: Linear
    up: Linear
    down: Linear


def rotary_caches(head_dim: int, theta: float, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim/2] for rotate-half (NeoX) rotary embeddings, computed in float64."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    ang = np.outer(np.arange(positions, dtype=np.float64), inv)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


@dataclass
class _Graph:
    """Nodes and initializers as they are added (names are unique by construction)."""

    accuracy_level: int
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)

    def init(self, name: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "", **attrs) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0]

    def linear(self, x: str, w: Linear, name: str) -> str:
        """``x · Wᵀ`` for one weight: MatMulNBits (+ the block-offset correction where the blocks have one)."""
        if isinstance(w, np.ndarray):
            return self.node("MatMul", [x, self.init(f"{name}.weight", w.T.astype(np.float32))], [f"{name}/out"],
                             name)
        ins = [x, self.init(f"{name}.qweight", w.packed), self.init(f"{name}.scales", w.scales.reshape(-1))]
        if w.zero_points is not None:
            ins.append(self.init(f"{name}.zero_points", w.zero_points.reshape(-1)))
        y = self.node("MatMulNBits", ins, [f"{name}/mm"], f"{name}/MatMulNBits", "com.microsoft", K=w.k, N=w.n,
                      bits=w.bits, block_size=w.block, accuracy_level=self.accuracy_level)
        if w.offset is None:
            return y
        # W = scale·q − offset per block of 32: x·Wᵀ = MatMulNBits(x) − (Σ_block x)·offsetᵀ
        nb = w.offset.shape[1]
        shape = self.init(f"{name}.blocks_shape", np.array([0, 0, nb, w.k // nb], dtype=np.int64))
        xb = self.node("Reshape", [x, shape], [f"{name}/xb"], f"{name}/Reshape")
        axes = self.init(f"{name}.axes", np.array([-1], dtype=np.int64))
        sums = self.node("ReduceSum", [xb, axes], [f"{name}/sums"], f"{name}/ReduceSum", keepdims=0)
        corr = self.node("MatMul", [sums, self.init(f"{name}.offset", w.offset.T.astype(np.float32))],
                         [f"{name}/corr"], f"{name}/MatMulOffset")
        return self.node("Sub", [y, corr], [f"{name}/out"], f"{name}/Sub")


def _fusable(ws: list[Linear]) -> bool:
    """Q, K and V become one MatMulNBits when their blocks agree (one read of the input, one kernel call)."""
    if all(isinstance(w, np.ndarray) for w in ws):
        return True
    packs = [w for w in ws if isinstance(w, NBits)]
    if len(packs) != len(ws):
        return False
    first = packs[0]
    return all(w.bits == first.bits and w.block == first.block and w.offset is None and w.zero_points is None
               for w in packs)


def _concat(ws: list[Linear]) -> Linear:
    packs = [w for w in ws if isinstance(w, NBits)]
    if not packs:
        return np.concatenate([np.asarray(w) for w in ws], axis=0)
    return NBits(sum(w.n for w in packs), packs[0].k, packs[0].bits, packs[0].block,
                 np.concatenate([w.packed for w in packs]), np.concatenate([w.scales for w in packs]))


def decoder_model(cfg: Qwen2Config, layers: list[Layer], final_norm: np.ndarray, *, accuracy_level: int = 4):
    """The decoder as an onnx.ModelProto (initializers inline: save it with external data)."""
    from onnx import TensorProto, helper

    g = _Graph(accuracy_level)
    h, kv, d = cfg.hidden_size, cfg.num_kv_heads, cfg.head_dim
    one = g.init("const.one", np.array([1], dtype=np.int64))
    rowsum = g.node("ReduceSum", ["attention_mask", one], ["mask/rowsum"], "mask/ReduceSum", keepdims=0)
    seqlens = g.node("Sub", [rowsum, one], ["mask/seqlens"], "mask/Sub")
    seqlens_k = g.node("Cast", [seqlens], ["mask/seqlens_k"], "mask/Cast", to=TensorProto.INT32)
    shape = g.node("Shape", ["attention_mask"], ["mask/shape"], "mask/Shape")
    total = g.node("Gather", [shape, g.init("const.idx1", np.array(1, dtype=np.int64))], ["mask/total"],
                   "mask/Gather", axis=0)
    total_len = g.node("Cast", [total], ["mask/total_len"], "mask/CastTotal", to=TensorProto.INT32)
    cos, sin = rotary_caches(d, cfg.rope_theta, cfg.max_positions)
    g.init("cos_cache", cos)
    g.init("sin_cache", sin)

    # the residual stream entering each block; each SkipSimplifiedLayerNorm returns the sum as its 4th output
    residual = "inputs_embeds"
    x = g.node("SimplifiedLayerNormalization", [residual, g.init("layers.0.attn_norm", layers[0].attn_norm)],
               ["layers.0/attn_norm"], "layers.0/attn_norm", axis=-1, epsilon=cfg.rms_eps, stash_type=1)
    for i, L in enumerate(layers):
        p = f"layers.{i}"
        attn = _attention(g, cfg, L, x, i, seqlens_k, total_len)
        o = g.linear(attn, L.o, f"{p}/o")
        x, residual = _skip_norm(g, cfg, residual, o, L.ffn_norm, f"{p}/ffn_norm", f"{p}/res_attn")
        gate = g.linear(x, L.gate, f"{p}/gate")
        silu = g.node("Mul", [gate, g.node("Sigmoid", [gate], [f"{p}/sig"], f"{p}/Sigmoid")], [f"{p}/silu"],
                      f"{p}/SiLU")
        act = g.node("Mul", [silu, g.linear(x, L.up, f"{p}/up")], [f"{p}/act"], f"{p}/Mul")
        down = g.linear(act, L.down, f"{p}/down")
        if i + 1 < len(layers):
            x, residual = _skip_norm(g, cfg, residual, down, layers[i + 1].attn_norm, f"layers.{i + 1}/attn_norm",
                                     f"layers.{i + 1}/res_in")
        else:
            g.node("SkipSimplifiedLayerNormalization", [residual, down, g.init("final_norm", final_norm)],
                   ["hidden_states"], "final_norm", "com.microsoft", epsilon=cfg.rms_eps)

    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
              helper.make_tensor_value_info("inputs_embeds", f32, ["batch_size", "sequence_length", h])]
    outputs = [helper.make_tensor_value_info("hidden_states", f32, ["batch_size", "sequence_length", h])]
    for i in range(len(layers)):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", f32,
                                                        ["batch_size", kv, "past_sequence_length", d]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", f32,
                                                         ["batch_size", kv, "total_sequence_length", d]))
    graph = helper.make_graph(g.nodes, "flint_qwen2_decoder", inputs, outputs, initializer=g.inits)
    model = helper.make_model(graph, producer_name="flint",
                              opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model



def _skip_norm(g: _Graph, cfg: Qwen2Config, residual: str, x: str, weight: np.ndarray, name: str,
               res_out: str) -> tuple[str, str]:
    """RMS norm of ``residual + x``: (the normalised output, the new residual stream)."""
    g.node("SkipSimplifiedLayerNormalization", [residual, x, g.init(name.replace("/", "."), weight)],
           [name, "", "", res_out], name, "com.microsoft", epsilon=cfg.rms_eps)
    return name, res_out


def _attention(g: _Graph, cfg: Qwen2Config, L: Layer, x: str, i: int, seqlens_k: str, total_len: str) -> str:
    """Q, K, V projections (+ bias) and GroupQueryAttention over layer ``i``'s KV cache."""
    p = f"layers.{i}"
    if _fusable([L.q, L.k, L.v]):
        qkv = g.linear(x, _concat([L.q, L.k, L.v]), f"{p}/qkv")
        bias = np.concatenate([L.q_bias, L.k_bias, L.v_bias]).astype(np.float32)
        q_in = g.node("Add", [qkv, g.init(f"{p}.qkv_bias", bias)], [f"{p}/qkv_b"], f"{p}/qkv/Add")
        k_in = v_in = ""
    else:
        q_in, k_in, v_in = (
            g.node("Add", [g.linear(x, w, f"{p}/{n}"), g.init(f"{p}.{n}_bias", b.astype(np.float32))],
                   [f"{p}/{n}_b"], f"{p}/{n}/Add")
            for n, w, b in (("q", L.q, L.q_bias), ("k", L.k, L.k_bias), ("v", L.v, L.v_bias)))
    return g.node("GroupQueryAttention",
                  [q_in, k_in, v_in, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k,
                   total_len, "cos_cache", "sin_cache"],
                  [f"{p}/attn", f"present.{i}.key", f"present.{i}.value"], f"{p}/GroupQueryAttention",
                  "com.microsoft", num_heads=cfg.num_heads, kv_num_heads=cfg.num_kv_heads,
                  scale=float(cfg.head_dim) ** -0.5, do_rotary=1, rotary_interleaved=0, local_window_size=-1)
