"""The only onnxruntime importer: the decoder graph, the LM head graphs, and the KV cache buffers.

The decoder is onnxruntime-genai's builder graph (GroupQueryAttention with KV-cache inputs/outputs),
run with plain onnxruntime:
- every ``past_key_values.N.key/value`` is a preallocated (B_MAX, kv_heads, CAP, head_dim) float32
  buffer; ``present.N.*`` is bound to the *same* memory through IOBinding (GQA's shared past/present
  buffer mode), so a step writes its new keys/values in place and nothing is copied;
- ``attention_mask`` is as long as the total sequence: its length tells GQA how many cached positions
  are valid. Rewinding to a shared prefix is therefore just a shorter mask.
- a batch of b rows uses the first b rows of each buffer (a leading-dimension slice of a C-contiguous
  array is itself contiguous), which is how variants share the prompt's KV after one copy.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from engine.model.kv_cache import KVCache
from engine.model.lm_head import BLOCK as HEAD_BLOCK
from engine.model.lm_head import embed_lookup
from engine.model.manifest import Manifest

log = logging.getLogger("flint.model")


_shared: list[bool] = []  # decided once per process: whether sessions use the shared pool


def _shared_pool(threads: int) -> bool:
    """Whether sessions share one process-wide intra-op pool (``FLINT_SHARED_POOL=1``) instead of a pool per
    session without spinning (the default). The shared pool spins between runs (the Python API cannot turn
    that off): a forward starts faster, but its worker burns a core while the engine thread samples, drafts
    and streams between forwards, and after each generation. Typing through the replay, per-session pools
    used less CPU for the same work at the same latency (docs/benchmarks/archive/replay.cpu-val-s25.md).
    Returns whether sessions should use the shared pool (its size is fixed by the first caller)."""
    if _shared:
        return _shared[0]
    on = os.environ.get("FLINT_SHARED_POOL", "0") == "1"
    if on:
        try:
            from onnxruntime.capi import onnxruntime_pybind11_state as _C

            _C.set_global_thread_pool_sizes(max(1, threads), 1)
            # a warning per session otherwise ("thread_pool_size ... ignored when using a global thread pool")
            ort.set_default_logger_severity(3)
        except Exception as e:  # the environment already exists (a session was made elsewhere first)
            log.info("no shared onnxruntime thread pool (%s): per-session pools", e)
            on = False
    _shared.append(on)
    return on


def _session_options(threads: int) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if _shared_pool(threads):
        so.use_per_session_threads = False
    else:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        # no spinning with a pool per session: the decoder and the LM-head sessions alternate every step,
        # and a pool spinning after its run steals the cores from the other
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


class OnnxDecoder:
    """forward(ids[b, s], past_len) -> hidden[b, s, H], writing KV for positions past_len..past_len+s-1."""

    def __init__(self, model_dir: Path, manifest: Manifest, *, threads: int = 2, capacity: int = 2048,
                 batch_max: int = 4, head_threads: int | None = None, prefetch: tuple[str, ...] = ("full",),
                 step_session: bool = True) -> None:
        steps = step_session and threads > 1 and not _shared_pool(threads)
        # the heads run once per step, on one thread too when steps do (one row reads the whole matrix)
        head_threads = int(os.environ.get("FLINT_HEAD_THREADS", head_threads or (1 if steps else threads)))
        self.manifest = manifest
        self.model_dir = Path(model_dir)
        head_info = manifest.lm_head or {}
        makers = {"full": lambda: LMHead(self.model_dir / head_info.get("full", "lm_head.onnx"), head_threads)}
        if head_info.get("code"):
            makers["code"] = lambda: LMHead(self.model_dir / head_info["code"], head_threads,
                                            np.load(self.model_dir / head_info["code_ids"]))
        self.heads = LazyHeads(makers)
        so = _session_options(threads)  # before any session: the shared thread pool is made here
        for name in prefetch:  # the head sessions are created while the decoder's is
            self.heads.prefetch(name)
        self.session = ort.InferenceSession(str(self.model_dir / "model.onnx"), so,
                                            providers=["CPUExecutionProvider"])
        # a decoding step (the pending token and a few drafted ones, one row) reads every weight for little
        # arithmetic, so steps run on a one-thread session of the same graph and prompt passes and the variants'
        # batch on the ``threads`` one. Where one core reads the weights nearly as fast as two (the AMD EPYC) a
        # step costs a third less CPU; where it is slower (the Intel Xeon) steps on two threads wrote more tokens
        # ahead of the typist and cost more CPU still (docs/benchmarks/cpu.md). The cost: a second copy of the
        # packed weights in memory
        self.step_session: ort.InferenceSession | None = None
        if steps:
            self.step_session = ort.InferenceSession(str(self.model_dir / "model.onnx"), _session_options(1),
                                                     providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.has_position_ids = "position_ids" in self.input_names
        self.embeds_input = "inputs_embeds" in self.input_names
        if self.embeds_input:
            e = (manifest.lm_head or {})["embed"]
            # memory-mapped: a lookup reads the rows it needs (a prompt touches a few hundred of 150k), so
            # loading costs nothing and the table is resident only as far as it is used
            self._emb_f32 = np.load(self.model_dir / e["f32"], mmap_mode="r") if "f32" in e else None
            self._emb_q = np.load(self.model_dir / e["q"], mmap_mode="r") if "q" in e else None
            self._emb_s = np.load(self.model_dir / e["scales"], mmap_mode="r") if "scales" in e else None
            self._emb_dim = int(e["dim"])
        self.out_name = "hidden_states" if "hidden_states" in self.output_names else "logits"
        capacity = max(capacity, manifest.min_kv_capacity)
        self.kv = KVCache.allocate(manifest.num_layers, manifest.num_kv_heads, manifest.head_dim, capacity,
                                   batch_max)
        self._kv_ort: dict[int, list[tuple[ort.OrtValue, ort.OrtValue]]] = {}
        for b in range(1, batch_max + 1):
            self._kv_ort[b] = [
                (ort.OrtValue.ortvalue_from_numpy(self.kv.keys[i][:b]),
                 ort.OrtValue.ortvalue_from_numpy(self.kv.values[i][:b]))
                for i in range(manifest.num_layers)
            ]
        # the LM head is the embedding matrix when the model ties them (Gemma; Qwen2.5's GGUF carries its
        # own, separately quantised output matrix, so there it is not)
        self.head_is_embedding = bool((manifest.lm_head or {}).get("tied", False)) and self.embeds_input
        self._head_w = self._map_head_weight()
        self.heads["full"]  # the full head is always used

    def _map_head_weight(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The full head's own weight, memory-mapped from its ONNX external data file (written by
        engine/model/lm_head.py's make_head_model: B then scales, or the fp32 W [K, N]); None if the file does not
        have exactly that layout. Rows are read only where a prompt's tokens need them."""
        info = self.manifest.lm_head or {}
        path = self.model_dir / (info.get("full", "lm_head.onnx") + ".data")
        n, k, bits = int(info.get("vocab", 0)), int(self.manifest.hidden_size), info.get("bits")
        try:
            size = path.stat().st_size
        except OSError:
            return None
        nb = (k + HEAD_BLOCK - 1) // HEAD_BLOCK
        if bits == 8 and size == n * nb * HEAD_BLOCK + n * nb * 4:
            q = np.memmap(path, dtype=np.uint8, mode="r", shape=(n, nb * HEAD_BLOCK))
            s = np.memmap(path, dtype=np.float32, mode="r", offset=n * nb * HEAD_BLOCK, shape=(n, nb))
            return q, s
        if bits is None and size == n * k * 4:
            return np.memmap(path, dtype=np.float32, mode="r", shape=(k, n)), None
        return None

    def head_rows(self, ids: np.ndarray) -> np.ndarray | None:
        """The LM head's weight rows for ``ids`` ([len(ids), H] float32): logits for a few tokens without
        running the whole head. None when they cannot be read."""
        if self.head_is_embedding:
            return self.embedding_rows(ids)
        if self._head_w is None:
            return None
        w, scales = self._head_w
        if scales is None:
            return np.ascontiguousarray(w[:, ids].T)
        return embed_lookup(w, scales, ids, self.manifest.hidden_size, HEAD_BLOCK)

    def embedding_rows(self, ids: np.ndarray) -> np.ndarray:
        if self._emb_f32 is not None:
            return self._emb_f32[ids]
        assert self._emb_q is not None and self._emb_s is not None, "no embedding table in the model directory"
        return embed_lookup(self._emb_q, self._emb_s, ids, self._emb_dim)

    @property
    def capacity(self) -> int:
        return self.kv.capacity

    def forward(self, ids: np.ndarray, past_len: int, step: bool = False) -> np.ndarray:
        """Run the decoder on ids [b, s] with past_len valid cached positions in rows 0..b-1; ``step``: a
        decoding step (on the step session when there is one and b is 1)."""
        b, s = ids.shape
        total = past_len + s
        if total > self.kv.capacity:
            raise ValueError(f"sequence of {total} tokens exceeds the KV capacity {self.kv.capacity}")
        session = self.step_session if step and b == 1 and self.step_session is not None else self.session
        io = session.io_binding()
        if self.embeds_input:
            emb = self.embedding_rows(np.asarray(ids, dtype=np.int64))
            if self.manifest.embed_scale != 1.0:
                emb = emb * np.float32(self.manifest.embed_scale)
            io.bind_cpu_input("inputs_embeds", np.ascontiguousarray(emb, dtype=np.float32))
        else:
            io.bind_cpu_input("input_ids", np.ascontiguousarray(ids, dtype=np.int64))
        io.bind_cpu_input("attention_mask", np.ones((b, total), dtype=np.int64))
        if self.has_position_ids:
            pos = np.broadcast_to(np.arange(past_len, total, dtype=np.int64), (b, s))
            io.bind_cpu_input("position_ids", np.ascontiguousarray(pos))
        for i, (k, v) in enumerate(self._kv_ort[b]):
            io.bind_ortvalue_input(f"past_key_values.{i}.key", k)
            io.bind_ortvalue_input(f"past_key_values.{i}.value", v)
            io.bind_ortvalue_output(f"present.{i}.key", k)
            io.bind_ortvalue_output(f"present.{i}.value", v)
        io.bind_output(self.out_name, "cpu")
        session.run_with_iobinding(io)
        out = io.get_outputs()[-1] if self.output_names[-1] == self.out_name else None
        if out is None:
            outs = io.get_outputs()
            # outputs come back in bind order: presents first, then the hidden states
            out = outs[-1]
        return np.asarray(out.numpy())


class LazyHeads:
    """LM head sessions by name, each created on first use (creating a session is slow: it counts in the
    cold start), or ahead of it on a background thread (``prefetch``) while the caller does other work."""

    def __init__(self, makers: dict[str, Callable[[], LMHead]]) -> None:
        self._makers = makers
        self._made: dict[str, LMHead] = {}
        self._pending: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def __contains__(self, name: object) -> bool:
        return name in self._makers

    def prefetch(self, name: str) -> None:
        with self._lock:
            if name not in self._makers or name in self._made or name in self._pending:
                return
            th = threading.Thread(target=self._make, args=(name,), name=f"flint-head-{name}", daemon=True)
            self._pending[name] = th
        th.start()

    def _make(self, name: str) -> None:
        try:
            self._store(name, self._makers[name]())
        except Exception:  # surfaced again by __getitem__, which makes it in the caller's thread
            log.exception("creating the %s LM head failed", name)

    def _store(self, name: str, head: LMHead) -> None:
        with self._lock:
            self._made.setdefault(name, head)

    def __getitem__(self, name: str) -> LMHead:
        th = self._pending.get(name)
        if th is not None:
            th.join()
        if name not in self._made:
            self._store(name, self._makers[name]())
        return self._made[name]

    def get(self, name: str) -> LMHead | None:
        return self[name] if name in self._makers else None


class LMHead:
    """logits for selected hidden rows; ``ids`` maps a trimmed head's columns back to token ids."""

    def __init__(self, path: Path, threads: int, ids: np.ndarray | None = None) -> None:
        so = _session_options(threads)
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.ids = ids

    def __call__(self, hidden: np.ndarray) -> np.ndarray:
        h = np.ascontiguousarray(hidden.reshape(-1, hidden.shape[-1]), dtype=np.float32)
        return self.session.run(None, {"hidden": h})[0]


def default_threads() -> int:
    env = os.environ.get("FLINT_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(4, os.cpu_count() or 2))
