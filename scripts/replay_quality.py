"""What the ghosts a replay showed were worth as code, per language (issue 36): the share of the distinct ghosts on
screen that end mid-statement, and the share that repeat the code below the cursor.

Judged from the replay's own record (each keystroke's ghost and the state it was on screen at), independently of the
server's post-processing: the tree-sitter parse of the language (engine/syntax/queries.py; Python too, where the
server asks ``ast``).

- **ends mid-statement**: inserting the ghost at its state leaves the cursor's statement unfinished (``is_complete``
  is False: a bracket the ghost opened left open, an operator or keyword at its end, a parse error from the
  cursor's statement on). The rest of a word being typed (``isFunct`` + ``ion``) is not counted: the statement was
  open before it, the ghost opened nothing. A ghost cut at the 160 characters the record keeps is not judged.
- **repeats the following lines**: a line of the ghost after its first re-writes the first non-blank line below the
  cursor's line (stripped; lines of closers only excepted), or the ghost re-writes the next statement token by token
  (``repeats_following_lines``), or it closes a bracket whose closer is already below (with the ghost, a closer of
  the next lines closes nothing; without it, none).

``python scripts/replay_quality.py OUT.md JSON...`` renders docs/benchmarks/replay_languages.md from bench_replay
runs (``--language``), one JSON per language.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from replay_stats import saved_share  # noqa: E402

from engine.syntax.queries import first_stray_closer, is_complete, open_brackets, repeats_following_lines  # noqa: E402

GHOST_KEPT = 160  # characters of a ghost a replay record keeps (replay_typist.Key.ghost)
_CLOSERS_ONLY = frozenset(")]};, ")
_WORD = re.compile(r"\w+")
_WORD_END = re.compile(r"\w$")


def ghost_states(keys: Iterable, segments: dict) -> list[tuple[str, str, str, str]]:
    """Distinct (language, prefix, suffix, ghost) of the ghosts on screen, from a run's keys (in order) and its
    segments by name (replay_corpus.Segment: ``before``, ``typed``, ``after``, ``language``)."""
    out: dict[tuple[str, int, str], tuple[str, str, str, str]] = {}
    at_prev: dict[str, int] = {}
    for k in keys:
        seg = segments.get(k.segment)
        at = at_prev.get(k.segment, 0)
        if seg is not None and k.ghost and (k.segment, at, k.ghost) not in out:
            out[(k.segment, at, k.ghost)] = (seg.language, seg.before + seg.typed[:at], seg.after, k.ghost)
        at_prev[k.segment] = k.at
    return list(out.values())


def ends_mid(language: str, prefix: str, suffix: str, ghost: str) -> bool | None:
    """The ghost leaves its statement unfinished (None: not judged: a clipped record, or no grammar)."""
    if len(ghost) >= GHOST_KEPT:
        return None
    if _WORD.fullmatch(ghost) and _WORD_END.search(prefix):
        return False  # the rest of the word being typed: the statement was open before the ghost
    line_suffix = suffix.split("\n", 1)[0]
    complete = is_complete(language, prefix, ghost.rstrip(), line_suffix)
    return None if complete is None else not complete


def _next_line(suffix: str) -> str:
    return next((ln.strip() for ln in suffix.split("\n")[1:] if ln.strip()), "")


def repeats_below(language: str, prefix: str, suffix: str, ghost: str) -> bool:
    """The ghost re-writes code that is already below the cursor's line."""
    below = _next_line(suffix)
    if not below:
        return False
    lines = [ln.strip() for ln in ghost.split("\n")[1:] if ln.strip()]
    if any(ln == below and not set(ln) <= _CLOSERS_ONLY for ln in lines):
        return True
    if repeats_following_lines(language, ghost, suffix) is not None:
        return True
    # a closer already below: the ghost's own closes the block and the one below then closes nothing
    head = "\n".join(suffix.split("\n")[:4])
    opened, now = open_brackets(language, prefix), open_brackets(language, prefix + ghost)
    if opened is None or now is None or now != opened[: len(now)]:
        return False  # the ghost leaves a bracket of its own open: a mid-statement end, not a repeat
    return first_stray_closer(language, prefix, head) is None and \
        first_stray_closer(language, prefix, ghost + head) not in (None, False)


def quality(keys: Iterable, segments: dict) -> dict:
    states = ghost_states(keys, segments)
    mid = [ends_mid(*s) for s in states]
    judged = [m for m in mid if m is not None]
    dup = [repeats_below(*s) for s in states]
    return {"ghosts": len(states), "judged": len(judged), "ends_mid_statement": sum(judged),
            "ends_mid_statement_share": round(sum(judged) / len(judged), 3) if judged else None,
            "repeats_following": sum(dup), "repeats_following_share": round(sum(dup) / len(dup), 3) if dup else None}


def gate_effects(keys: Iterable, segments: dict) -> dict:
    """What each gate of engine/text/gates.py would have done to a run, from its record: per gate, the keystrokes
    made at states where it holds (``keys``), the characters that accepts there saved (what the gate would cost),
    and the keystrokes typed there under a wrong ghost (what it would spare). A ghost carried by type-through past
    a gated state is not followed further: an estimate, to be confirmed by a run with the gate."""
    from engine.text.gates import GATES, conditions

    out = {g: {"keys": 0, "chars_saved": 0, "wrong_ghost_keys": 0} for g in GATES}
    held: dict[tuple[str, int], frozenset[str]] = {}
    at_prev: dict[str, int] = {}
    for k in keys:
        seg = segments.get(k.segment)
        at = at_prev.get(k.segment, 0)
        at_prev[k.segment] = k.at
        if seg is None:
            continue
        if (k.segment, at) not in held:
            held[(k.segment, at)] = conditions(seg.before + seg.typed[:at], seg.typed[at:at] + seg.after, seg.language)
        for g in held[(k.segment, at)]:
            out[g]["keys"] += 1
            out[g]["chars_saved"] += k.saved
            out[g]["wrong_ghost_keys"] += int(k.ghost is not None and k.ghost_right is False)
    return out


def rejudge(path: Path) -> None:
    """Judge a bench_replay JSON's runs again (``syntax_quality`` and ``gate_effects`` per summary), rebuilding the
    typed segments from its language, halves and ``--keys`` (the judges may change after a run)."""
    import replay_languages as rl
    from replay_corpus import pick
    from replay_stats import group
    from replay_typist import Key, Run

    data = json.loads(path.read_text())
    meta = data["meta"]
    lang = meta.get("language", "python")
    words = meta["command"].split()
    # a run before issue 47 cut each function to its share of --keys; later runs type whole functions
    keys = int(words[words.index("--keys") + 1]) if "--keys" in words and "sizing" not in meta else 0
    if lang == "python":
        from replay_corpus import choose, segments
        cache = Path.home() / ".cache" / "flint-bench" / "pypi"
        specs = choose(cache)
        build = lambda chosen, cut: segments(chosen, cache, cut)  # noqa: E731
    else:
        cache = Path.home() / ".cache" / "flint-bench" / "langs"
        specs = rl.choose(lang, cache)
        build = lambda chosen, cut: rl.segments(lang, chosen, cache, cut)  # noqa: E731
    segs = {}
    for sp in meta["splits"]:
        chosen = pick(specs, sp)
        cut = max(40, int(keys * 1.15 / len(chosen))) if keys else None
        segs.update({x.name: x for x in build(chosen, cut)})
    runs = [Run(r["config"], r["server"], r["typist"], r["mode"], r["round"], split=r.get("split", ""),
                keys=[Key(**{**k, "sent": 0.0}) for k in r["keys"]]) for r in data["runs"]]
    by_group = group(runs)
    for sm, rs in zip(data["summaries"], by_group.values(), strict=True):
        ks = [k for r in rs for k in r.keys]
        sm["syntax_quality"], sm["gate_effects"] = quality(ks, segs), gate_effects(ks, segs)
    path.write_text(json.dumps(data, separators=(",", ":")))


# ---- the per-language report -------------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _row(lang: str, sm: dict) -> str:
    q = sm.get("syntax_quality", {})
    # characters saved as the glossary defines it (replay_stats.saved_share): saved / (saved + typed)
    saved = saved_share(sm["chars_saved"], sm["typed_chars"])
    return (f"| {lang} | {sm['server']} | {sm['split']} | {sm['keystrokes']} | {_pct(saved)} | "
            f"{q.get('ends_mid_statement', '–')} of {q.get('judged', '–')} | "
            f"{q.get('repeats_following', '–')} of {q.get('ghosts', '–')} ({_pct(q.get('repeats_following_share'))}) | "
            f"{_pct(sm['with_suggestion'] / max(1, sm['keystrokes']))} | "
            f"{_pct(sm['wrong_ghost_keys']['share'])} | {', '.join(map(str, sm['cpu_s_per_typing_min_per_round']))} |")


def render(jsons: list[Path]) -> str:
    head = ["| language | server | half | keys | chars saved | mid-statement ends on screen | repeat following "
            "lines | answered | keys under a wrong ghost | CPU s/min |", "|" + " --- |" * 10]
    rows, notes = [], []
    for p in jsons:
        data = json.loads(p.read_text())
        meta = data["meta"]
        lang = meta.get("language", "python")
        rows += [_row(lang, sm) for sm in data["summaries"]]
        notes.append(f"- **{lang}** (`{p.name}`): `{meta['command']}`; {meta['date']} UTC; "
                     f"{meta['cpu']}; load {meta['load_average']}; packages {', '.join(meta['packages'])}")
    return "\n".join(head + rows + ["", *notes, ""])


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.write_text(out.read_text().split("<!-- table -->")[0] + "<!-- table -->\n" + render([Path(a) for a in sys.argv[2:]])
                   if out.exists() else render([Path(a) for a in sys.argv[2:]]))
    print(f"wrote {out}")
