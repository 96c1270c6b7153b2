"""What the syntax wiring adds to a keystroke's post-processing (issue 36: <= 5 ms p95 on a 5,000-line file).

``python scripts/replay_syntax_cost.py [lines] [keys]``: in a generated file of ``lines`` lines (engine/syntax/timing.py)
per language, a statement is typed character by character in its middle; at every state the suggestions a request
post-processes (a one-line text a limit cut, a block of three lines, a text with a stray closer) go through
``postprocess`` with the language id (tree-sitter) and without (the scanner), and ``gates.conditions`` is asked. The
figure is the difference per keystroke (all three texts) in this process's CPU time (the machine's load does not
count), milliseconds p50 / p95 / max, after one warm-up call (the grammar loads once per process).

``python scripts/replay_syntax_cost.py [lines] [keys] [language...]``: only those languages (default: all of TYPED).
``python scripts/replay_syntax_cost.py --incremental-ab ROUNDS [lines] [language...]``: post-processing's own cost per
keystroke with a memoized parse incremental from the thread's last tree (the server's way since session 81) against
one from scratch, the two alternated in one process.
``python scripts/replay_syntax_cost.py --rss``: the resident memory the grammars add (this process's RSS before
loading any, and after parsing a generated file of each language once).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchstats import median, percentile  # noqa: E402

from engine.syntax import blocks, queries, tree  # noqa: E402
from engine.syntax import window as window_module  # noqa: E402
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
    before, after = typed_file(language, lines)
    typed = TYPED[language][:keys]
    clear_memos()
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


def empty_line_budget_costs(language: str, lines: int, n: int = 40) -> list[float]:
    """Per empty line (an Enter at ``n`` lines in the middle of the file), ms: ``budget_for`` with the language id
    (the braced block read from a parse: ``block_around``) minus without, no memo warm."""
    from engine.text.budget import budget_for
    text = generated(language, lines)
    at = text.find("\n", len(text) // 2) + 1
    budget_for(text[:at], text[at:], language)  # the grammar loads once per process
    out = []
    for _ in range(n):
        at = text.find("\n", at) + 1
        prefix, suffix = text[:at] + "    ", "\n" + text[at:]
        clear_memos()
        t0 = time.process_time()
        budget_for(prefix, suffix, language)
        t1 = time.process_time()
        budget_for(prefix, suffix, None)
        t2 = time.process_time()
        out.append(((t1 - t0) - (t2 - t1)) * 1e3)
    return out


def typed_file(language: str, lines: int) -> tuple[str, str]:
    """(text before, text after) the spot in the middle of a generated file where the statement is typed."""
    text = generated(language, lines)
    mid = text.find("\n", len(text) // 2) + 1
    return text[:mid], "\n" + text[mid:]


def clear_memos() -> None:
    """A run must not find the previous run's answers: every memo of the syntax wiring, the statement window's kept
    walks and this thread's last trees (session 81), those the measured tree has."""
    for f in (queries.open_brackets, queries.first_stray_closer, queries.is_complete, queries.statement_cut_points,
              queries.scope_end, statement_window, getattr(queries, "last_cut_point", None),
              getattr(tree, "_parse_memo", None), getattr(blocks, "_around", None),
              getattr(window_module, "_lines_above", None)):
        if f is not None:  # (an older tree, measured with this script, has fewer memos)
            f.cache_clear()
    local = getattr(tree, "_LOCAL", None)
    if local is not None:
        local.__dict__.pop("last", None)


def _quantiles(ms: list[float]) -> str:
    return f"p50 {median(ms):.2f} ms, p95 {percentile(ms, 95):.2f} ms, max {max(ms):.2f} ms"


def rss_mb() -> float:
    """This process's resident set size, MB (Linux)."""
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def rss_added(lines: int = 5000) -> None:
    base = rss_mb()
    print(f"RSS before any grammar: {base:.1f} MB")
    for language in TYPED:
        tree.parse(language, generated(language, lines))
        print(f"  after parsing {lines} lines of {language:<11}: {rss_mb():.1f} MB (+{rss_mb() - base:.1f})")


def incremental_ab(rounds: int, lines: int, languages: list[str]) -> None:
    """Post-processing with the language id per keystroke (absolute, this process's CPU time), a memoized parse
    incremental from the thread's last tree (as the server runs) against one from scratch, alternated per round."""
    incremental = tree._parse_after_last
    scratch = lambda grammar, text: tree._parse_now(grammar, text, tree._thread_parser(grammar))  # noqa: E731
    got: dict[tuple[str, str], list[float]] = {}
    for language in languages:  # warm-up, the same texts untimed: the first arm must not fill the memos no arm clears
        before, after = typed_file(language, lines)
        for k in range(1, len(TYPED[language]) + 1):
            _post(before + TYPED[language][:k], after, language)
    for rnd in range(rounds):
        for arm in (("incremental", "scratch") if rnd % 2 == 0 else ("scratch", "incremental")):
            tree._parse_after_last = incremental if arm == "incremental" else scratch
            for language in languages:
                before, after = typed_file(language, lines)
                clear_memos()
                _post(before, after, language)
                for k in range(1, len(TYPED[language]) + 1):
                    t0 = time.process_time()
                    _post(before + TYPED[language][:k], after, language)
                    got.setdefault((language, arm), []).append((time.process_time() - t0) * 1e3)
    tree._parse_after_last = incremental
    for (language, arm), ms in sorted(got.items()):
        print(f"{language:<11} {arm:<11} {len(ms)} keys: {_quantiles(ms)}")


def main() -> int:
    if "--rss" in sys.argv:
        rss_added()
        return 0
    if "--incremental-ab" in sys.argv:  # --incremental-ab ROUNDS [lines] [language...]
        rest = sys.argv[sys.argv.index("--incremental-ab") + 1:]
        incremental_ab(int(rest[0]), int(rest[1]) if len(rest) > 1 else 5000, rest[2:] or list(TYPED))
        return 0
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    for language in sys.argv[3:] or TYPED:
        for gates in (False, True):
            ms = keystroke_costs(language, lines, keys, gates)
            print(f"{language:<11} {'+ gates ' if gates else ''}{lines} lines, {len(ms)} keys: added {_quantiles(ms)}")
        ms = empty_line_budget_costs(language, lines)
        print(f"{language:<11} budget at an empty line, {len(ms)} lines: added {_quantiles(ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
