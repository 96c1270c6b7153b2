"""The manifest (flint.json) of a Flint model directory. Its presence marks a complete build."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_NAME = "flint.json"
FORMAT_VERSION = 1


@dataclass
class Manifest:
    name: str
    source: dict[str, Any]
    precision: str
    bos_token_id: int | None
    eos_token_ids: list[int]
    stop_token_ids: list[int]
    context_length: int
    num_layers: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    fim: dict[str, str] | None
    min_kv_capacity: int = 0
    embed_scale: float = 1.0  # Gemma multiplies token embeddings by sqrt(hidden_size)
    lm_head: dict[str, Any] = field(default_factory=dict)
    # the weight recipe (builder options that change the weights, e.g. {"block_size": "128"}): a build made
    # with another recipe than the current one for its precision is rebuilt, and caches never mix the two
    quant: dict[str, str] = field(default_factory=dict)
    built_at: str = ""
    format_version: int = FORMAT_VERSION
    path: str = ""  # filled on load, not stored

    @property
    def model_id(self) -> str:
        """Identity for caches: name, precision (+ its weight recipe) and the source checksum."""
        sha = str(self.source.get("sha256", self.source.get("path", "")))[:16]
        recipe = "".join(f"-{k[0]}{v}" for k, v in sorted(self.quant.items()))  # block_size 128 -> "-b128"
        return f"{self.name}-{self.precision}{recipe}-{sha}"

    def write(self, directory: Path) -> None:
        data = asdict(self)
        data.pop("path", None)
        tmp = directory / (MANIFEST_NAME + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / MANIFEST_NAME)


def load_manifest(directory: Path) -> Manifest | None:
    p = Path(directory) / MANIFEST_NAME
    if not p.exists():
        return None
    data = json.loads(p.read_text())
    data.pop("path", None)
    known = {f for f in Manifest.__dataclass_fields__}
    m = Manifest(**{k: v for k, v in data.items() if k in known})
    m.path = str(Path(directory).resolve())
    return m
