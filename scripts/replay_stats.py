"""bench_replay's numbers: one configuration's keystrokes, files and rounds summarized. Pure."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict

from benchstats import percentile
from benchstats import spread as sample_spread
from replay_typist import TYPISTS, Key, Run, auto_indent

SOURCES = ("type-through", "memory", "disk", "model")
PAUSE_S = 0.5  # a gap to the next key at least this long is a pause
SHOWN_MS = 150.0  # a pause "shows a suggestion" when its keystroke was answered this fast
IDLE_WINDOW_S = 4.0  # CPU is sampled this long after the last keystroke of each segment
IDLE_STEP_S = 0.25
IDLE_CORES = 0.05  # below this many cores busy counts as idle
LONG_FILE_LINES = 2000
SHORT_GHOST = 3  # characters: a suggestion this short is counted apart


pct = percentile  # benchstats': linear between the nearest ranks; pct(v, 50) is the ordinary median


def typed_chars(keys: list[Key]) -> int:
    """Characters the typist typed (characters and Enter's text), as opposed to what accepts inserted."""
    return sum(len(k.text) for k in keys if k.kind in ("char", "enter"))


def saved_share(saved: int, typed: int) -> float | None:
    """Characters saved (the glossary's one definition, replay_report.GLOSSARY): of the text a run put in the
    files, the share accepts wrote, saved / (saved + typed). A run that stopped inside a function counts what it
    typed there, not the function's whole length."""
    return round(saved / (saved + typed), 3) if saved + typed else None


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def spread(values: list[float]) -> dict | None:
    """min and max of per-round or per-package values (None: fewer than two to compare)."""
    vals = [v for v in values if v is not None]
    return {"min": min(vals), "max": max(vals)} if len(vals) > 1 else None


def package_of(segment: str) -> str:
    """The package of a segment's name (``pkg==version/module:qualname``)."""
    return segment.split("==", 1)[0]


def ratio(a: float, b: float, digits: int = 3) -> float | None:
    return round(a / b, digits) if b else None


def short_ghosts(ghost_chars: list[int], at_most: int = SHORT_GHOST) -> tuple[int, int]:
    """(suggestions shown, of them <= ``at_most`` characters): a ghost that short saves little and still has
    to be read."""
    return len(ghost_chars), sum(n <= at_most for n in ghost_chars)


def wrong_ghost_keys(keys: list[Key]) -> int:
    """Keystrokes typed while a ghost Tab could take nothing from was on screen (neither it nor its first line is
    what the file says next): what the user reads past."""
    return sum(k.ghost is not None and k.ghost_right is False for k in keys)


def per_group(keys: list[Key], segs: list, by) -> dict[str, dict]:
    """Characters saved, answered share and median latency per ``by(segment name)`` (a package, or a round's)."""
    names = list(dict.fromkeys(by(s.segment) for s in segs))
    out = {}
    for name in names:
        ks = [k for k in keys if by(k.segment) == name]
        target = sum(s.typed_chars for s in segs if by(s.segment) == name)
        lat = [k.latency_ms for k in ks if k.outcome == "suggestion" and k.latency_ms is not None]
        out[name] = {"keystrokes": len(ks), "target_chars": target,
                     "chars_saved_share": saved_share(sum(k.saved for k in ks), typed_chars(ks)),
                     "answered_share": ratio(sum(k.outcome == "suggestion" for k in ks), len(ks)),
                     "latency_p50_ms": round(pct(lat, 50), 1) if lat else None}
    return out


def finite(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) else v


def pauses_of(keys: list[Key], pause_s: float = PAUSE_S, *, finished: bool = False) -> list[Key]:
    """The keystrokes a pause follows: a gap of at least ``pause_s`` to the next keystroke, or a segment's
    last keystroke (the user stops) unless it finished the segment's text (what follows it is already in the
    document: nothing is left to suggest there); ``finished`` counts those too (the definition of the reports
    before session 13)."""
    return [k for k in keys if (k.gap_s is None and (finished or not k.finished))
            or (k.gap_s is not None and k.gap_s >= pause_s)]


def shown_within(k: Key, within_ms: float = SHOWN_MS) -> bool:
    return k.outcome == "suggestion" and k.latency_ms is not None and k.latency_ms <= within_ms


def pause_shown(keys: list[Key], pause_s: float = PAUSE_S, within_ms: float = SHOWN_MS, *,
                finished: bool = False) -> tuple[int, int]:
    """(pauses, pauses whose keystroke was answered with a suggestion within ``within_ms``): pauses_of."""
    pauses = pauses_of(keys, pause_s, finished=finished)
    return len(pauses), sum(shown_within(k, within_ms) for k in pauses)


def pause_misses(keys: list[Key], pause_s: float = PAUSE_S, within_ms: float = SHOWN_MS) -> dict[str, int]:
    """Why pauses showed no suggestion within ``within_ms``, by what their keystroke answered (empty: the
    server had nothing to show; late, by where the late suggestion came from; superseded, error, pending) and
    what the keystroke was (Enter, a space, another character, a taken suggestion), most frequent first:
    "empty after Enter", "late model after a space", ..."""
    def key_kind(k: Key) -> str:
        if k.kind in ("tab", "tab-line"):
            return "a taken suggestion"
        return "Enter" if k.kind == "enter" else "a space" if k.text == " " else "a character"

    counts: dict[str, int] = {}
    for k in pauses_of(keys, pause_s):
        if shown_within(k, within_ms):
            continue
        why = f"late {k.source or 'answer'}" if k.outcome == "suggestion" else k.outcome
        name = f"{why} after {key_kind(k)}"
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def idle_settle_s(idle_cores: list[float], step_s: float = IDLE_STEP_S, idle: float = IDLE_CORES) -> float | None:
    """Seconds after the last keystroke from which the server stays below ``idle`` cores for the rest of the
    sampled window (None: still busy at the window's end)."""
    settle = len(idle_cores)
    while settle > 0 and idle_cores[settle - 1] < idle:
        settle -= 1
    return None if settle == len(idle_cores) else round(settle * step_s, 2)


def summarize(runs: list[Run]) -> dict:
    """Pooled numbers for one configuration over its rounds."""
    run = runs[0]
    keys = [k for r in runs for k in r.keys]
    segs = [s for r in runs for s in r.segments]
    target = sum(r.target_chars for r in runs)
    target_keys = sum(r.target_keys for r in runs)
    keys_saved = sum(k.saved - auto_indent(k.text) for k in keys if k.kind in ("tab", "tab-line"))
    busy = [b for r in runs for b in r.busy_s]
    n = len(keys)
    answered = [k for k in keys if k.outcome == "suggestion"]
    lat = [k.latency_ms for k in answered if k.latency_ms is not None]
    by_source = {s: sum(k.source == s for k in answered) for s in SOURCES}
    inside = [k for k in keys if k.in_ghost]
    inside_ok = [k for k in inside if k.outcome == "suggestion" and k.source not in (None, "model")]
    from_disk = [k for k in answered if k.source == "disk" or k.origin == "disk"]
    tabs = [k for k in keys if k.kind in ("tab", "tab-line")]
    n_pauses, n_shown = pause_shown(keys)
    n_pauses_all, n_shown_all = pause_shown(keys, finished=True)
    typing_s = sum(s.typing_s for s in segs)
    typing_cpu = sum(s.typing_cpu_s for s in segs)
    idle_after = [statistics.fmean(s.idle_cores[round(2 / IDLE_STEP_S):]) for s in segs
                  if len(s.idle_cores) > round(2 / IDLE_STEP_S)]
    settles = [idle_settle_s(s.idle_cores) for s in segs if s.idle_cores]
    # a file with no suggestion at all counts as slower than every file with one
    first_open = [math.inf if s.first_suggestion_s is None else s.first_suggestion_s for s in segs]
    opens = run.typist in TYPISTS and TYPISTS[run.typist].open_then_type_s is not None
    long_first = [s.first_suggestion_s if opens else s.first_request_s for s in segs
                  if s.file_lines >= LONG_FILE_LINES]
    # all the server's CPU a file cost: while it was typed and in the seconds sampled after its last keystroke
    cpu_total = typing_cpu + sum(sum(s.idle_cores) * IDLE_STEP_S for s in segs)
    accepted = sum(len(k.text) for k in tabs)
    n_ghosts, n_short = short_ghosts([c for r in runs for c in r.ghost_chars])
    packages = per_group(keys, segs, package_of)
    rounds = [summarize_round(r) for r in runs]
    settled = [x for x in settles if x is not None]
    firsts = [x for x in (s.first_suggestion_s for s in segs) if x is not None]
    return {
        "config": run.config, "server": run.server, "typist": run.typist, "mode": run.mode, "split": run.split,
        "rounds": len(runs),
        "keystrokes": n,
        "typed_chars": typed_chars(keys),
        "target_chars": target,
        # functions typed to their end in every round (an arm is scored on these; --keys sizes runs so all are)
        "functions_typed": len(set.intersection(*[{s.segment for s in r.segments if s.finished} for r in runs]))
        if runs else 0,
        "seeds": [r.seed for r in runs],
        "wall_s": round(sum(r.wall_s for r in runs), 1),
        "server_ready_s": [round(r.model_load_s, 1) for r in runs],
        "engine_busy_stretch_s": {"count": len(busy), "p50": round(pct(busy, 50) or 0, 2),
                                  "total": round(sum(busy), 1)},
        "with_suggestion": len(answered),
        "with_suggestion_per_round": [round(sum(k.outcome == "suggestion" for k in r.keys) / max(1, len(r.keys)), 3)
                                      for r in runs],
        "empty": sum(k.outcome == "empty" for k in keys),
        "superseded": sum(k.outcome == "superseded" for k in keys),
        "errors": sum(k.outcome == "error" for k in keys),
        "latency_ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99),
                       "mean": round(statistics.fmean(lat), 1) if lat else None,
                       "p50_per_round": [r["latency_p50_ms"] for r in rounds],
                       "p50_across_packages": spread([p["latency_p50_ms"] for p in packages.values()])},
        "pauses": {"count": n_pauses, "shown_within_150ms": n_shown,
                   "share": round(n_shown / n_pauses, 3) if n_pauses else None, "missed": pause_misses(keys),
                   "with_finished": {"count": n_pauses_all, "shown_within_150ms": n_shown_all,
                                     "share": round(n_shown_all / n_pauses_all, 3) if n_pauses_all else None}},
        "share_of_keystrokes": {s: round(by_source[s] / n, 3) if n else 0.0 for s in SOURCES}
        | {"none": round((n - len(answered)) / n, 3) if n else 0.0},
        "share_of_answers": {s: round(by_source[s] / len(answered), 3) if answered else 0.0 for s in SOURCES},
        "no_model_call_share_of_answers": round(1 - by_source["model"] / len(answered), 3) if answered else 0.0,
        "inside_suggestion": {"keystrokes": len(inside), "answered_without_model": len(inside_ok),
                              "share": round(len(inside_ok) / len(inside), 3) if inside else None},
        "from_disk_share_of_answers": round(len(from_disk) / len(answered), 3) if answered else 0.0,
        "accepts": len(tabs),
        # keystrokes typed with a ghost on screen: right ones not taken (too young for the typist) vs wrong
        "ghosts": {"on_screen": sum(k.ghost is not None for k in keys),
                   "right": sum(bool(k.ghost_right) and k.kind in ("char", "enter") for k in keys),
                   "wrong": sum(k.ghost is not None and k.ghost_right is False for k in keys)},
        "chars_saved": sum(k.saved for k in keys),
        "chars_saved_share": saved_share(sum(k.saved for k in keys), typed_chars(keys)),
        "chars_saved_share_per_round": [r["chars_saved_share"] for r in rounds],
        # the counts too: a rule that asks for "higher in each seed" compares these
        "chars_saved_per_round": [r["chars_saved"] for r in rounds],
        "wrong_ghost_keys_per_round": [r["wrong_ghost_keys"] for r in rounds],
        "chars_saved_share_across_packages": spread([p["chars_saved_share"] for p in packages.values()]),
        "answered_share_across_packages": spread([p["answered_share"] for p in packages.values()]),
        "packages": packages,
        # what the user also pays
        "wrong_ghost_keys": {"count": wrong_ghost_keys(keys), "share": ratio(wrong_ghost_keys(keys), n)},
        "short_ghosts": {"shown": n_ghosts, "at_most_chars": SHORT_GHOST, "count": n_short,
                         "share": ratio(n_short, n_ghosts)},
        "accepted_chars": accepted,
        "cpu_ms_per_accepted_char": round(1000 * cpu_total / accepted, 1) if accepted else None,
        "cpu_s_per_typing_min_per_round": [r["cpu_s_per_typing_min"] for r in rounds],
        # the same counted in keystrokes: the indentation an accepted line break brings is what Enter's
        # auto-indent would have written, so it is neither typed nor saved
        "keys_saved": keys_saved,
        "target_keys": target_keys,
        "keys_saved_share": round(keys_saved / target_keys, 3) if target_keys else 0.0,
        "first_request_s": [s.first_request_s for s in segs if s.first_generation_s is not None],
        "first_generation_s": [s.first_generation_s for s in segs if s.first_generation_s is not None],
        "first_suggestion_after_open_s": {"per_segment": [s.first_suggestion_s for s in segs],
                                          # no suggestion in a file: none came within this long
                                          "none_within_s": [round(s.typing_s + IDLE_WINDOW_S, 1) for s in segs
                                                            if s.first_suggestion_s is None],
                                          "p50": finite(pct(first_open, 50)),
                                          "mean": round(mean(firsts), 3) if firsts else None,
                                          "none": sum(s.first_suggestion_s is None for s in segs)}
        if opens else None,
        "first_suggestion_long_file_s": {"p50": finite(pct([math.inf if x is None else x for x in long_first], 50)),
                                         "per_segment": long_first, "none": sum(x is None for x in long_first)},
        "cpu_s_per_typing_min": round(typing_cpu / (typing_s / 60), 1) if typing_s else None,
        "typing_min": round(typing_s / 60, 2),
        "idle_cores_2_to_4s_after": {"p50": pct(idle_after, 50), "max": max(idle_after) if idle_after else None},
        "idle_settle_s": {"p50": pct(settled, 50), "mean": round(mean(settled), 2) if settled else None,
                          "max": max(settled, default=None),
                          "never": sum(x is None for x in settles), "segments": len(settles)},
        "segments": [asdict(s) for s in segs],
        # each round is a sample (its own seed): mean, sd, min, max of the per-round figures
        "over_seeds": {m: sample_spread([r[m] for r in rounds]) for m in ROUND_METRICS},
    }


ROUND_METRICS = ("chars_saved_share", "answered_share", "pauses_share", "wrong_ghost_share", "latency_p50_ms",
                 "cpu_s_per_typing_min")


def summarize_round(run: Run) -> dict:
    """A round's own headline numbers (their spread across rounds, each its own seed, is the run-to-run noise)."""
    lat = [k.latency_ms for k in run.keys if k.outcome == "suggestion" and k.latency_ms is not None]
    typing_s = sum(s.typing_s for s in run.segments)
    n_pauses, n_shown = pause_shown(run.keys)
    saved, wrong = sum(k.saved for k in run.keys), wrong_ghost_keys(run.keys)
    return {"chars_saved": saved, "chars_saved_share": saved_share(saved, typed_chars(run.keys)),
            "answered_share": ratio(sum(k.outcome == "suggestion" for k in run.keys), len(run.keys)),
            "pauses_share": ratio(n_shown, n_pauses),
            "wrong_ghost_keys": wrong, "wrong_ghost_share": ratio(wrong, len(run.keys)),
            "latency_p50_ms": round(pct(lat, 50), 1) if lat else None,
            "cpu_s_per_typing_min": round(sum(s.typing_cpu_s for s in run.segments) / (typing_s / 60), 1)
            if typing_s else None}


def restart_overlap(first: list[Run], again: list[Run]) -> dict:
    """The editor states (segment, characters typed) the first run answered that the restart visited too
    (accepts make the two keystroke scripts differ slightly), and how many of them the restart answered from
    disk entries (directly or typed through) / at all."""
    answered = {(k.segment, k.at) for r in first for k in r.keys if k.outcome == "suggestion"}
    revisits = [k for r in again for k in r.keys if (k.segment, k.at) in answered]
    disk = [k for k in revisits if k.outcome == "suggestion" and (k.source == "disk" or k.origin == "disk")]
    any_ = [k for k in revisits if k.outcome == "suggestion"]
    return {"states": len(revisits), "from_disk": len(disk), "answered": len(any_),
            "from_disk_share": round(len(disk) / len(revisits), 3) if revisits else None}


def config_name(server: str, typist: str, mode: str) -> str:
    return f"{server}/{typist}" + ("" if mode == "on" else f"/{mode}")


def group_key(config: str, split: str) -> str:
    return f"{config} ({split})" if split else config


def group(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs by configuration and corpus half, rounds pooled."""
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(group_key(r.config, r.split), []).append(r)
    return out


def add_overlap(groups: dict[str, list[Run]], summaries: list[dict]) -> None:
    for sm in summaries:
        if sm["mode"] == "restart":
            on = groups.get(group_key(config_name(sm["server"], sm["typist"], "on"), sm.get("split", "")))
            if on:
                sm["restart_overlap"] = restart_overlap(on, groups[group_key(sm["config"], sm.get("split", ""))])




# ---- figures on the functions every arm finished (issue 47) --------------------------------------------------------

def finished_functions(run: Run) -> set[str]:
    """Segments a run typed to their end (from the keys: reports before issue 47 kept no per-file flag)."""
    return {k.segment for k in run.keys if k.finished} | {s.segment for s in run.segments if s.finished}


def restrict(run: Run, names: set[str]) -> Run:
    """The run as if it had typed only the segments ``names``; the target is what those keys typed."""
    keys = [k for k in run.keys if k.segment in names]
    segs = [s for s in run.segments if s.segment in names]
    typed = sum(len(k.text) for k in keys)
    return Run(run.config, run.server, run.typist, run.mode, run.round, seed=run.seed, keys=keys, segments=segs,
               target_chars=typed, target_keys=typed - sum(auto_indent(k.text) for k in keys), split=run.split,
               wall_s=run.wall_s, work=run.work)


def runs_from_record(data: dict) -> list[Run]:
    """The runs of a bench_replay JSON (replay.json)."""
    from replay_typist import SegmentStats
    fields = set(SegmentStats.__dataclass_fields__)
    return [Run(r["config"], r["server"], r["typist"], r["mode"], r["round"], seed=r.get("seed", 0),
                keys=[Key(**{**k, "sent": 0.0}) for k in r["keys"]],
                segments=[SegmentStats(**{k: v for k, v in s.items() if k in fields}) for s in r["segments"]],
                split=r.get("split", ""), target_chars=r.get("target_chars", 0), target_keys=r.get("target_keys", 0),
                ghost_chars=r.get("ghost_chars", []), work=r.get("work", {})) for r in data["runs"]]


def common_summaries(data: dict, split: str) -> tuple[list[dict], list[str]]:
    """Every configuration of ``split`` summarized on the functions all of them finished in every round (the
    functions, in typing order). A run sized by the old --keys stopped in different functions per arm."""
    runs = [r for r in runs_from_record(data) if r.split == split]
    common = set.intersection(*[finished_functions(r) for r in runs]) if runs else set()
    order = list(dict.fromkeys(k.segment for r in runs for k in r.keys if k.segment in common))
    groups = group([restrict(r, common) for r in runs])
    return [summarize(rs) for rs in groups.values()], order


def figure_row(sm: dict) -> dict[str, str]:
    """A summary's figures as README's replay table prints them."""
    pk = [p["chars_saved_share"] for p in sm["packages"].values() if p["chars_saved_share"] is not None]
    lat = sm["latency_ms"]
    pauses = sm["pauses"]

    def pc(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.0f}%"

    def ms(v: float | None) -> str:
        return "–" if v is None else (f"{v:.0f}" if v >= 10 else f"{v:.1f}")

    return {
        "characters saved": f"{pc(sm['chars_saved_share'])} ({100 * min(pk):.0f}-{100 * max(pk):.0f}%)" if pk else "–",
        "answered": pc(sm["with_suggestion"] / max(1, sm["keystrokes"])),
        "pauses": f"{pc(pauses['share'])} ({pauses['shown_within_150ms']} of {pauses['count']})"
        if pauses["count"] > 1 else "–",
        "latency": f"{ms(lat['p50'])} / {ms(lat['mean'])} / {ms(lat['p95'])} ms",
        "wrong ghost": pc(sm["wrong_ghost_keys"]["share"]),
        "cpu per minute": f"{sm['cpu_s_per_typing_min']}",
        "cpu per accepted character": f"{sm['cpu_ms_per_accepted_char']:.0f}" if sm["cpu_ms_per_accepted_char"] else "–",
    }


SEED_COLUMNS = {"characters saved": "chars_saved_share", "answered": "answered_share",
                "pauses": "pauses_share", "wrong ghost": "wrong_ghost_share", "cpu per minute": "cpu_s_per_typing_min"}


def seed_row(sm: dict) -> dict[str, str]:
    """A summary's per-seed figures as README's held-out table prints them: the mean over the rounds (each its
    own seed) ± their sample standard deviation; shares in percent."""
    def cell(metric: str) -> str:
        s = sm["over_seeds"].get(metric)
        if not s:
            return "–"
        k = 1 if metric == "cpu_s_per_typing_min" else 100
        unit = "" if k == 1 else "%"
        return f"{k * s['mean']:.1f}{unit} ± {k * (s['sd'] or 0):.1f}"

    return {col: cell(m) for col, m in SEED_COLUMNS.items()}


if __name__ == "__main__":  # python scripts/replay_stats.py REPLAY_JSON [SPLIT]: figures on the common functions
    import json
    import sys

    data = json.loads(open(sys.argv[1]).read())
    sums, names = common_summaries(data, sys.argv[2] if len(sys.argv) > 2 else "validation")
    print(f"{len(names)} functions finished by every configuration")
    for sm in sums:
        print(sm["config"], figure_row(sm))
