"""What decoding runs on (``Host``): the engine facade (engine/engine.py) as the greedy row and the batch see
it. Decoding never imports the facade; the Engine hands itself over. Decoding changes the engine's state only
through named operations: ``rows`` (the KV cache's rows: append, truncate, spread) and ``drafts`` (costs,
acceptance, remembered outputs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from engine.decoding.drafts import Drafts
    from engine.decoding.fast import FastPaths
    from engine.decoding.tokenizer import HFTokenizer
    from engine.model.kv_cache import KVRows
    from engine.model.runtime import OnnxDecoder


class Host(Protocol):
    tok: HFTokenizer
    decoder: OnnxDecoder
    stop_ids: set[int]
    rows: KVRows
    drafts: Drafts
    # the prompt's tokens the trimmed head lacks, and their rows of the full head (None: none)
    ctx_ids: np.ndarray | None
    ctx_w: np.ndarray | None

    @property
    def fast(self) -> FastPaths: ...

    def lazy_trimmed(self) -> bool:
        """Do greedy picks come from the trimmed head (provisional until the full head re-checks them)?"""
        ...

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        """Logits [rows, V] from the full head."""
        ...
