"""What the syntax wiring adds to a keystroke's post-processing (issue 36: <= 5 ms p95 on a 5,000-line file).

``python scripts/replay_syntax_cost.py [lines] [keys]``: in a generated file of ``lines`` lines (engine/syntax/timing.py)
per language, a statement is typed character by character in its middle; at every state the suggestions a request
post-processes (a one-line text a limit cut, a block of three lines, a text with a stray closer) go through
``postprocess`` with the language id (tree-sitter) and without (the scanner), and ``gates.conditions`` is asked. The
figure is the difference per keystroke (all three texts) in this process's CPU time (the machine's load does not
count), milliseconds p50 / p95 / max, after one warm-up call (the grammar loads once per process).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.syntax import queries  # noqa: E402
from engine.syntax.timing import generated  # noqa: E402
from engine.syntax.window import statement_window  # noqa: E402
from engine.text.gates import conditions  # noqa: E402
from engine.text.postprocess import postprocess  # noqa: E402

TYPED = {
    "javascript": "  const rest = items.filter((x) => x.qty > 0).map((x) => x.price);\n",
    "typescript": "  const rest: number[] = items.filter((x: Item) => x.qty > 0).map((x) => x.price);\n",
    "go": "\trest := filter(items, func(x Item) bool { return x.Qty > 0 })\n",
    "rust": "    let rest: Vec<u64> = items.iter().filter(|x| x.qty > 0).map(|x| x.price).collect();\n",
    "python": "    rest = [x.price for x in items if x.qty > 0]\n",
}
TEXTS = [  # (raw model text, mode, truncated)
    ("total + compute(items, {", "single", True),
    ("\n  if (total > 10) {\n    return total;", "multi", True),
    ("x)) + 1", "single", False),
]


def _post(prefix: str, suffix: str, language: str | None) -> None:
    for raw, mode, truncated in TEXTS:
        postprocess(raw, prefix, suffix, mode=mode, truncated=truncated, language=language)  # type: ignore[arg-type]


def keystroke_costs(language: str, lines: int, keys: int, gates: bool = False) -> list[float]:
    """Per keystroke, ms: post-processing with the language id (``gates``: plus the gates' conditions, asked only
    when a gate is enabled for the language), minus without."""
    text = generated(language, lines)
    mid = text.find("\n", len(text) // 2) + 1
    before, after = text[:mid], "\n" + text[mid:]
    typed = TYPED[language][:keys]
    for f in (queries.open_brackets, queries.first_stray_closer, queries.is_complete, queries.statement_cut_points,
              queries.scope_end, statement_window):
        f.cache_clear()  # a run must not find the previous run's answers
    _post(before, after, language)  # the grammar loads once per process, not per keystroke
    out = []
    for k in range(1, len(typed) + 1):
        prefix = before + typed[:k]
        t0 = time.process_time()
        _post(prefix, after, language)
        if gates:
            conditions(prefix, after, language)
        t1 = time.process_time()
        _post(prefix, after, None)
        t2 = time.process_time()
        out.append(((t1 - t0) - (t2 - t1)) * 1e3)
    return out


def main() -> int:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    for language in TYPED:
        for gates in (False, True):
            ms = sorted(keystroke_costs(language, lines, keys, gates))
            p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
            print(f"{language:<11} {'+ gates ' if gates else ''}{lines} lines, {len(ms)} keys: added p50 "
                  f"{statistics.median(ms):.2f} ms, p95 {p95:.2f} ms, max {ms[-1]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
