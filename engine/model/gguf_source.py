"""What a GGUF file holds, read with the ``gguf`` package and numpy only: the model's shape, its tokenizer (as a
``tokenizers`` JSON) and its tensors, each as exact MatMulNBits blocks or as float32.

Only the Qwen2 architecture with a GPT-2-style byte-level BPE vocabulary is read here (the Qwen2.5-Coder
presets); another architecture raises ``UnsupportedGGUF`` and is built on the ``export`` path instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from engine.model.gguf_blocks import EXACT_TYPES, F16, F32, NBits, to_nbits
from engine.model.qwen2_graph import Qwen2Config

# Qwen2's pre-tokenizer split (what its tokenizer.json on the hub and transformers' GGUF conversion use)
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
CONTROL, USER_DEFINED = 3, 4  # GGUF token types that become added (special) tokens


class UnsupportedGGUF(ValueError):
    pass


class GGUFSource:
    """One GGUF file, memory-mapped: metadata by key, tensors by name."""

    def __init__(self, path: Path) -> None:
        from gguf import GGUFReader

        self.path = Path(path)
        self.reader = GGUFReader(str(path))
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.arch = self.meta("general.architecture")
        if self.arch != "qwen2":
            raise UnsupportedGGUF(f"{path.name}: architecture {self.arch!r} (this builder reads qwen2)")

    def meta(self, key: str, default: Any = None) -> Any:
        f = self.reader.fields.get(key)
        return default if f is None else f.contents()

    def config(self) -> Qwen2Config:
        a = self.arch
        return Qwen2Config(
            num_layers=int(self.meta(f"{a}.block_count")),
            hidden_size=int(self.meta(f"{a}.embedding_length")),
            num_heads=int(self.meta(f"{a}.attention.head_count")),
            num_kv_heads=int(self.meta(f"{a}.attention.head_count_kv")),
            rms_eps=float(self.meta(f"{a}.attention.layer_norm_rms_epsilon")),
            rope_theta=float(self.meta(f"{a}.rope.freq_base", 10000.0)),
            max_positions=int(self.meta(f"{a}.context_length")),
        )

    def shape(self, name: str) -> tuple[int, int]:
        """(N, K): rows and row length of a matrix (GGUF lists dimensions innermost first)."""
        t = self.tensors[name]
        return int(t.shape[1]), int(t.shape[0])

    def qtype(self, name: str) -> int:
        return int(self.tensors[name].tensor_type)

    def vector(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        if int(t.tensor_type) not in (F32, F16):
            raise UnsupportedGGUF(f"{name}: a quantised vector")
        return np.asarray(t.data, dtype=np.float32).reshape(-1)

    def blocks(self, name: str) -> NBits:
        """The matrix's own blocks as MatMulNBits operands (exact; ValueError for a type without that form)."""
        n, k = self.shape(name)
        return to_nbits(self.qtype(name), self.tensors[name].data, n, k)

    def exact(self, name: str) -> bool:
        return self.qtype(name) in EXACT_TYPES

    def float32(self, name: str) -> np.ndarray:
        """The matrix [N, K] dequantised by gguf itself."""
        from gguf.quants import dequantize

        t = self.tensors[name]
        n, k = self.shape(name)
        return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(n, k)

    def tokenizer_json(self) -> dict[str, Any]:
        """A ``tokenizers`` JSON for the file's byte-level BPE vocabulary (Qwen2's pre-tokenizer)."""
        model = self.meta("tokenizer.ggml.model")
        pre = self.meta("tokenizer.ggml.pre")
        if model != "gpt2" or pre not in ("qwen2", None):
            raise UnsupportedGGUF(f"tokenizer {model!r}/{pre!r} (this builder reads gpt2/qwen2)")
        tokens = list(self.meta("tokenizer.ggml.tokens"))
        types = list(self.meta("tokenizer.ggml.token_type"))
        merges = [m.split(" ", 1) for m in self.meta("tokenizer.ggml.merges")]
        added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True}
                 for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)]
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {}},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
        }

    def special_ids(self) -> dict[str, int | None]:
        def opt(key: str) -> int | None:
            v = self.meta(key)
            return None if v is None else int(v)

        return {"eos": opt("tokenizer.ggml.eos_token_id"), "bos": opt("tokenizer.ggml.bos_token_id")}
