"""``FastPaths``: the engine's decoding fast paths and their knobs (``EngineConfig.fast``)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.decoding.prompt import FRESH_MIDDLE_CHARS, MAX_MIDDLE_CHARS


@dataclass
class FastPaths:
    """Switchable fast paths, so benchmarks can show what each buys."""

    speculative: bool = True  # prompt-lookup (n-gram) drafts verified in one batched forward
    max_draft: int = 8
    # greedy decoding picks tokens with an LM head over the tokens code uses (+ the prompt's own); the full
    # head re-checks those picks in batches (at each line break, every ``verify_rows`` picks, at the end)
    # and decoding rewinds to the first pick it disagrees with: the output is the full head's
    trimmed_head: bool = True
    verify_rows: int = 16
    earlier_drafts: int = 4  # recent generations' outputs also serve as drafts (0: the prompt only)
    anchored_fim: bool = True  # typed text after the FIM middle token (a keystroke appends), else plain PSM
    # how much typed text the middle may hold before the anchor moves (and the suffix, which follows the
    # prefix slot, is run again), and how much text a new anchor leaves after it (0: the cursor's line)
    max_middle_chars: int = MAX_MIDDLE_CHARS
    fresh_middle_chars: int = FRESH_MIDDLE_CHARS
