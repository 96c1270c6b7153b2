"""bench_replay's report: the markdown, the plots and the console table, from the summaries (replay_stats)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from benchstats import mean_sd
from replay_stats import (
    IDLE_CORES,
    IDLE_STEP_S,
    IDLE_WINDOW_S,
    LONG_FILE_LINES,
    PAUSE_S,
    SHOWN_MS,
    SOURCES,
    pct,
)
from replay_typist import TYPISTS, Run


def plot(groups: dict[str, list[Run]], out: Path) -> list[str]:
    try:
        import matplotlib
    except ImportError:  # the report stands without its images
        print("matplotlib is not installed: no plots (pip install matplotlib)")
        return []

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = ["#d9480f", "#1c7ed6", "#2f9e44", "#888888", "#ae3ec9", "#f59f00"]
    typists = list(dict.fromkeys(rs[0].typist for rs in groups.values()))

    def label(c: str, rs: list[Run]) -> str:
        return rs[0].server + ("" if rs[0].mode == "on" else f"/{rs[0].mode}")

    series = list(dict.fromkeys(label(c, rs) for c, rs in groups.items()))
    colors = {s: palette[i % len(palette)] for i, s in enumerate(series)}

    lat = {c: [k.latency_ms for r in rs for k in r.keys if k.latency_ms is not None] for c, rs in groups.items()}
    hi = max([max(v) for v in lat.values() if v] + [10.0])
    bins = [10 ** (x / 10) for x in range(0, int(math.log10(hi) * 10) + 2)]  # 1 ms .. max, log-spaced
    names = []
    w = max(1, len(typists))
    fig, axes = plt.subplots(1, w, figsize=(4.6 * w, 4.0), squeeze=False)
    for ax, t in zip(axes[0], typists, strict=True):
        for c, rs in groups.items():
            if rs[0].typist == t and lat[c]:
                ax.hist(lat[c], bins=bins, alpha=0.55, label=f"{label(c, rs)} ({len(lat[c])} answers)",
                        color=colors[label(c, rs)])
        ax.set_xscale("log")
        ax.set_xlabel("keystroke → suggestion (ms, log)")
        ax.set_title(f"typist `{t}`")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("answered keystrokes")
    fig.suptitle("Latency of answered keystrokes")
    fig.tight_layout()
    fig.savefig(out / "replay_hist.png", dpi=100)
    plt.close(fig)
    names.append("replay_hist.png")

    fig, axes = plt.subplots(1, w, figsize=(4.6 * w, 4.0), squeeze=False)
    for ax, t in zip(axes[0], typists, strict=True):
        for c, rs in groups.items():
            n = sum(len(r.keys) for r in rs)
            v = sorted(lat[c])
            if rs[0].typist == t and v:
                # share of *all* keystrokes answered within x ms (unanswered keystrokes never arrive)
                ax.step(v, [(i + 1) / n for i in range(len(v))], where="post", label=label(c, rs),
                        color=colors[label(c, rs)])
        ax.axvline(SHOWN_MS, color="#bbbbbb", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_xlabel("keystroke → suggestion (ms, log)")
        ax.set_title(f"typist `{t}`")
        ax.legend(loc="upper left", fontsize=8)
    axes[0][0].set_ylabel("share of all keystrokes answered within")
    fig.suptitle("CDF over keystrokes (unanswered keystrokes never reach 1.0)")
    fig.tight_layout()
    fig.savefig(out / "replay_cdf.png", dpi=100)
    plt.close(fig)
    names.append("replay_cdf.png")

    # server CPU after the last keystroke of each segment (median over segments)
    fig, axes = plt.subplots(1, w, figsize=(4.6 * w, 3.4), squeeze=False)
    for ax, t in zip(axes[0], typists, strict=True):
        for c, rs in groups.items():
            curves = [s.idle_cores for r in rs for s in r.segments if s.idle_cores]
            if rs[0].typist != t or not curves:
                continue
            m = min(len(x) for x in curves)
            med = [statistics.median(x[i] for x in curves) for i in range(m)]
            ax.step([(i + 1) * IDLE_STEP_S for i in range(m)], med, where="pre", label=label(c, rs),
                    color=colors[label(c, rs)])
        ax.axvline(2.0, color="#bbbbbb", linestyle=":", linewidth=1)
        ax.set_xlabel("seconds after the last keystroke")
        ax.set_title(f"typist `{t}`")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("server CPU (cores, median over segments)")
    fig.tight_layout()
    fig.savefig(out / "replay_idle_cpu.png", dpi=100)
    plt.close(fig)
    names.append("replay_idle_cpu.png")
    return names


def ms(v: float | None) -> str:
    return "–" if v is None else (f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms")


def share(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def secs(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f} s"


def seclist(vals: list[float | None]) -> str:
    return ", ".join("none" if x is None else f"{x:.1f}" for x in vals) or "–"


def targets(summaries: list[dict]) -> list[str]:
    """Issue 13's targets per server (mode `on`), each against the first server listed (the baseline)."""
    on = [s for s in summaries if s["mode"] == "on"]
    servers = list(dict.fromkeys(s["server"] for s in on))
    by = {(s["server"], s["typist"]): s for s in on}
    if not servers:
        return []
    base = servers[0]

    def cell(server: str, typist: str, fn) -> str:
        s = by.get((server, typist))
        return "–" if s is None else fn(s)

    def answered(s: dict) -> str:
        v = s["with_suggestion"] / max(1, s["keystrokes"])
        return f"{share(v)} {'✓' if v >= 0.5 else '✗'}"

    def p95(s: dict) -> str:
        v = s["latency_ms"]["p95"]
        return f"{ms(v)} {'✓' if v is not None and v <= 150 else '✗'}"

    def pauses(s: dict) -> str:
        v = s["pauses"]["share"]
        return f"{share(v)} {'✓' if v is not None and v >= 0.8 else '✗'}"

    def saved(s: dict) -> str:
        v = s["chars_saved_share"]
        return f"{share(v)} {'✓' if v >= 0.3 else '✗'}"

    lands = "steady" if any(t == "steady" for _, t in by) else "think"
    opening = [t for t in TYPISTS if TYPISTS[t].open_then_type_s is not None and any(t == x for _, x in by)]

    def first_long(server: str, typist: str) -> str:
        s, b = by.get((server, typist)), by.get((base, typist))
        if s is None:
            return "–"
        v = s["first_suggestion_long_file_s"]["p50"]
        if server == base or b is None:
            return secs(v) if v is not None else "none"
        bv = b["first_suggestion_long_file_s"]["p50"]
        if v is None:
            return "none ✗"
        if bv is None:  # the baseline showed none while typing: any time at all is better
            return f"{secs(v)} (baseline: none) ✓"
        return f"{secs(v)} = {v / bv:.2f}× {'✓' if v <= bv / 3 else '✗'}"

    rows = [
        ("`steady`: ≥ 50% of keystrokes answered before the next key", lambda sv: cell(sv, "steady", answered)),
        ("`steady`: p95 of answers ≤ 150 ms", lambda sv: cell(sv, "steady", p95)),
        ("`think`: ≥ 80% of pauses show a suggestion within 150 ms", lambda sv: cell(sv, "think", pauses)),
        ("`think`: characters saved ≥ 30%", lambda sv: cell(sv, "think", saved)),
        ("`steady`: characters saved ≥ 30%", lambda sv: cell(sv, "steady", saved)),
        (f"file ≥ 2,000 lines, cursor lands (`{lands}`): first suggestion ≤ 1/3 of `{base}`'s",
         lambda sv: first_long(sv, lands)),
        *[(f"file ≥ 2,000 lines opened, typing 1 s later (`{t}`): first suggestion ≤ 1/3 of `{base}`'s",
           lambda sv, t=t: first_long(sv, t)) for t in opening],
    ]
    return ["### Issue 13's targets", "",
            "| target | " + " | ".join(f"`{sv}`" for sv in servers) + " |",
            "|---|" + "---|" * len(servers),
            *[f"| {name} | " + " | ".join(fn(sv) for sv in servers) + " |" for name, fn in rows], ""]


def pauses_cell(p: dict | None) -> str:
    """A report cell for a pause count: "shown of pauses (share)"."""
    return f"{p['shown_within_150ms']} of {p['count']} ({share(p['share'])})" if p else "–"


def misses_cell(missed: dict[str, int] | None) -> str:
    """A report cell for the pauses missed, by cause: "empty after Enter 5, late model after Enter 3"."""
    return ", ".join(f"{why} {n}" for why, n in missed.items()) if missed else "–"


def first_open_cell(s: dict) -> str:
    f = s["first_suggestion_after_open_s"]
    if f is None:
        return "–"
    vals = ", ".join(f"{x:.1f}" for x in f["per_segment"] if x is not None)
    nones = ", ".join(f"none in {x:.0f}" for x in f.get("none_within_s", []))
    return (f"{secs(f['p50'])}; mean {secs(f.get('mean'))} ({', '.join(v for v in (vals, nones) if v)})")


def range_cell(r: dict | None, fmt) -> str:
    return "–" if not r else f"{fmt(r['min'])}–{fmt(r['max'])}"


def answered_share(s: dict) -> float:
    return s["with_suggestion"] / max(1, s["keystrokes"])


# The one definition of each figure the replay reports (issue 47): written here once, rendered into every report
# and quoted by docs/benchmarks/README.md. Every script that shows one of these computes it this way.
GLOSSARY = (
    ("characters saved", "of the text a run put in the files, the share accepts wrote: saved ÷ (saved + typed), "
     "where saved is the characters Tab inserted less one per Tab and typed the characters the typist typed "
     "(Enter's auto-indent counted as typed). Per package and per round the same ratio over their keystrokes."),
    ("functions typed", "functions typed to their end in every round by that arm; arms are compared on the same "
     "functions (a run sized with --keys types whole functions)."),
    ("answered before the next key", "keystrokes whose non-empty answer arrived before the next keystroke, of all "
     "keystrokes."),
    ("pauses shown within 150 ms", f"pauses (a gap of ≥ {PAUSE_S} s to the next key, or a file's last key when the "
     "typing stopped early) whose keystroke got a non-empty answer within 150 ms, of all pauses."),
    ("pauses missed", "those pauses whose keystroke got no suggestion within 150 ms, counted by what it got (empty: "
     "the server had nothing to show; late, by the late suggestion's source; superseded; error) and what the "
     "keystroke was (Enter, a space, another character, a taken suggestion)."),
    ("latency p50 / p95 / mean", "over answered keystrokes, didChange sent → non-empty answer; p50 is the ordinary "
     "median and percentiles are linear between the nearest ranks (scripts/benchstats.py)."),
    ("keystrokes under a wrong ghost", "keystrokes typed while a suggestion Tab could take nothing from was on "
     "screen, of all keystrokes."),
    ("server CPU s per minute of typing", "the server process's user + system CPU from a file's first to last "
     "keystroke, per minute of that typing."),
    ("CPU ms per accepted character", "that CPU plus the CPU sampled 4 s after each file's last key, over the "
     "characters Tab inserted."),
    ("mean ± sd over seeds", "each round draws its own timing and pause seed; the per-round figures' mean and "
     "sample standard deviation (n rounds)."),
)


def glossary_lines() -> list[str]:
    return ["## Glossary", "", *[f"- **{name}**: {text}" for name, text in GLOSSARY], ""]


# (row, cell) of the headline table, where validation stands beside tuning
HEADLINE = [
    ("answered before the next key", lambda s: share(answered_share(s))),
    (f"pauses ≥ {PAUSE_S} s shown within {SHOWN_MS:.0f} ms", lambda s: share(s["pauses"]["share"])),
    ("latency p50 (median)", lambda s: ms(s["latency_ms"]["p50"])),
    ("latency p95", lambda s: ms(s["latency_ms"]["p95"])),
    ("characters saved", lambda s: share(s["chars_saved_share"])),
    ("keystrokes under a wrong ghost", lambda s: share((s.get("wrong_ghost_keys") or {}).get("share"))),
    ("suggestions of ≤ 3 characters", lambda s: share((s.get("short_ghosts") or {}).get("share"))),
    ("first suggestion after opening (median)",
     lambda s: secs(s["first_suggestion_after_open_s"]["p50"]) if s["first_suggestion_after_open_s"] else "–"),
    ("server CPU s per minute of typing", lambda s: f"{s['cpu_s_per_typing_min']}"),
    ("server CPU ms per accepted character", lambda s: f"{s.get('cpu_ms_per_accepted_char')}"),
    ("CPU idle after the last key (median)", lambda s: secs(s["idle_settle_s"]["p50"])),
]


def headline(summaries: list[dict]) -> list[str]:
    """One table, every configuration's validation column beside its tuning column."""
    by = {(s["config"], s.get("split", "")): s for s in summaries}
    configs = list(dict.fromkeys(s["config"] for s in summaries))
    splits = [sp for sp in ("validation", "tuning") if any(s.get("split") == sp for s in summaries)]
    if len(splits) < 2:
        return []
    cols = [(c, sp) for c in configs for sp in splits]
    return ["## Headline: validation beside tuning", "",
            "The **validation** half is not held out: 13 A/B runs since issue 32 typed it and decisions were taken "
            "on them (docs/benchmarks/ledger.md), so it is a second tuning set; held-out figures come from the test "
            "split (`--split test`). The tuning column is the code policies were tuned on first.", "",
            "| | " + " | ".join(f"`{c}` **{sp}**" if sp == "validation" else f"`{c}` {sp}" for c, sp in cols) + " |",
            "|---|" + "---|" * len(cols),
            *[f"| {name} | " + " | ".join(fn(by[c, sp]) if (c, sp) in by else "–" for c, sp in cols) + " |"
              for name, fn in HEADLINE], ""]


def detail(summaries: list[dict]) -> list[str]:
    """The full table for one corpus half."""
    cols = [s["config"] for s in summaries]

    def per_round(vals: list, fmt) -> str:
        return ", ".join(fmt(x) for x in vals) if len(vals) > 1 else "–"

    def counts(vals: list, lead: str) -> str:
        # the counts behind a share, per round: a rule asking "higher in each seed" compares these
        return lead + " / ".join(f"{x:,}" for x in vals) if len(vals) > 1 else ""

    rows = [
        ("functions typed (to their end, every round)", [str(s.get("functions_typed", "–")) for s in summaries]),
        ("rounds (seeds)", [f"{s['rounds']} ({', '.join(map(str, s.get('seeds', []))) or '–'})" for s in summaries]),
        ("**characters saved, mean ± sd over seeds**",
         [mean_sd((s.get("over_seeds") or {}).get("chars_saved_share"), share) for s in summaries]),
        ("**server CPU s per minute of typing, mean ± sd over seeds**",
         [mean_sd((s.get("over_seeds") or {}).get("cpu_s_per_typing_min"), lambda v: f"{v:.1f}") for s in summaries]),
        ("**pauses shown within 150 ms, mean ± sd over seeds**",
         [mean_sd((s.get("over_seeds") or {}).get("pauses_share"), share) for s in summaries]),
        ("**keystrokes under a wrong ghost, mean ± sd over seeds**",
         [mean_sd((s.get("over_seeds") or {}).get("wrong_ghost_share"), share) for s in summaries]),
        ("keystrokes (chars, Enter, Tab)", [str(s["keystrokes"]) for s in summaries]),
        ("**answered before the next key**", [f"{s['with_suggestion']} ({share(answered_share(s))})"
                                              for s in summaries]),
        ("… per round; across packages (min–max)",
         [f"{per_round(s['with_suggestion_per_round'], share)}; {range_cell(s.get('answered_share_across_packages'), share)}"
          for s in summaries]),
        (f"**pauses ≥ {PAUSE_S} s showing a suggestion within {SHOWN_MS:.0f} ms**",
         [pauses_cell(s["pauses"]) for s in summaries]),
        ("… counting each file's last keystroke (its text typed to the end: nothing left to suggest)",
         [pauses_cell(s["pauses"].get("with_finished")) for s in summaries]),
        ("… the pauses missed, by what their keystroke got (empty, late, superseded) and what it was",
         [misses_cell(s["pauses"].get("missed")) for s in summaries]),
        ("**latency p50 (median)**; mean", [f"{ms(s['latency_ms']['p50'])}; {ms(s['latency_ms']['mean'])}"
                                            for s in summaries]),
        ("… p50 per round; across packages (min–max)",
         [f"{per_round(s['latency_ms'].get('p50_per_round', []), ms)}; "
          f"{range_cell(s['latency_ms'].get('p50_across_packages'), ms)}" for s in summaries]),
        ("**latency p95**", [ms(s["latency_ms"]["p95"]) for s in summaries]),
        ("**latency p99**", [ms(s["latency_ms"]["p99"]) for s in summaries]),
        ("**characters saved** (saved of saved + typed)",
         [f"{s['chars_saved']} of {s['chars_saved'] + s['typed_chars']} ({share(s['chars_saved_share'])})"
          for s in summaries]),
        ("… per round; across packages (min–max)",
         [f"{per_round(s.get('chars_saved_share_per_round', []), share)}"
          f"{counts(s.get('chars_saved_per_round', []), '; characters ')}; "
          f"{range_cell(s.get('chars_saved_share_across_packages'), share)}" for s in summaries]),
        ("… in keystrokes (the indentation an Enter's auto-indent writes is neither typed nor saved)",
         [f"{s['keys_saved']} of {s['target_keys']} ({share(s['keys_saved_share'])})" for s in summaries]),
        ("accepts (Tab)", [str(s["accepts"]) for s in summaries]),
        ("keys typed under a ghost: right (not yet readable or taken) / wrong",
         [f"{s['ghosts']['right']} / {s['ghosts']['wrong']}" if s.get("ghosts") else "–" for s in summaries]),
        ("**keystrokes under a wrong ghost** (distraction; share of keystrokes)",
         [f"{s['wrong_ghost_keys']['count']} ({share(s['wrong_ghost_keys']['share'])}"
          f"{counts(s.get('wrong_ghost_keys_per_round', []), '; per round ')})" if s.get("wrong_ghost_keys")
          else "–" for s in summaries]),
        ("**suggestions of ≤ 3 characters** (of suggestions shown)",
         [f"{s['short_ghosts']['count']} of {s['short_ghosts']['shown']} ({share(s['short_ghosts']['share'])})"
          if s.get("short_ghosts") else "–" for s in summaries]),
        ("**first suggestion after opening: median; mean (per file, s)**", [first_open_cell(s) for s in summaries]),
        ("cursor lands, editor asks → first suggestion there (s, per file)", [seclist(s["first_request_s"]) for s in summaries]),
        ("request at the cursor → engine ready (s, per file)", [seclist(s["first_generation_s"]) for s in summaries]),
        ("… in files ≥ 2,000 lines (`open`: after the first keystroke): median (s, per file)",
         [f"{secs(s['first_suggestion_long_file_s']['p50'])} ({seclist(s['first_suggestion_long_file_s']['per_segment'])})"
          for s in summaries]),
        ("**server CPU s per minute of typing**; per round",
         [f"{s['cpu_s_per_typing_min']}; {per_round(s.get('cpu_s_per_typing_min_per_round', []), str)}"
          for s in summaries]),
        ("**server CPU ms per accepted character** (typing and the seconds after; characters Tab inserted)",
         [f"{s.get('cpu_ms_per_accepted_char')} ({s.get('accepted_chars', '–')} characters)" for s in summaries]),
        ("server CPU 2–4 s after the last key (cores, median / max)",
         [f"{s['idle_cores_2_to_4s_after']['p50']:.2f} / {s['idle_cores_2_to_4s_after']['max']:.2f}"
          if s["idle_cores_2_to_4s_after"]["p50"] is not None else "–" for s in summaries]),
        (f"**CPU idle (< {IDLE_CORES} cores) from … after the last key** (median / mean / max; never in "
         f"{IDLE_WINDOW_S:.0f} s)",
         [f"{secs(s['idle_settle_s']['p50'])} / {secs(s['idle_settle_s'].get('mean'))} / "
          f"{secs(s['idle_settle_s']['max'])}; {s['idle_settle_s']['never']} of {s['idle_settle_s']['segments']}"
          for s in summaries]),
        *[(f"answered from {src}", [share(s["share_of_keystrokes"][src]) for s in summaries]) for src in SOURCES],
        ("no suggestion (empty, superseded)", [share(s["share_of_keystrokes"]["none"]) for s in summaries]),
        ("keystrokes inside a shown suggestion", [str(s["inside_suggestion"]["keystrokes"]) for s in summaries]),
        ("… answered with no model call", [share(s["inside_suggestion"]["share"]) for s in summaries]),
        ("engine busy stretches: count, median, total (s)",
         [f"{s['engine_busy_stretch_s']['count']}, {s['engine_busy_stretch_s']['p50']:.1f}, "
          f"{s['engine_busy_stretch_s']['total']:.0f}" for s in summaries]),
    ]
    if any(s.get("restart_overlap") for s in summaries):
        rows.append(("states `on` answered, revisited after restart: from disk", [
            f"{share(s['restart_overlap']['from_disk_share'])} ({s['restart_overlap']['from_disk']} of "
            f"{s['restart_overlap']['states']})" if s.get("restart_overlap") else "–" for s in summaries]))
    return ["| | " + " | ".join(f"`{c}`" for c in cols) + " |",
            "|---|" + "---|" * len(cols),
            *[f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows], ""]


def package_table(summaries: list[dict]) -> list[str]:
    """Characters saved per package (the spread behind a half's single figure)."""
    pkgs = list(dict.fromkeys(p for s in summaries for p in s.get("packages", {})))
    if not pkgs:
        return []
    return ["Characters saved per package (answered share in brackets):", "",
            "| package | " + " | ".join(f"`{s['config']}`" for s in summaries) + " |",
            "|---|" + "---|" * len(summaries),
            *[f"| {p} | " + " | ".join(
                f"{share(s['packages'][p]['chars_saved_share'])} ({share(s['packages'][p]['answered_share'])})"
                if p in s.get("packages", {}) else "–" for s in summaries) + " |" for p in pkgs], ""]


def corpus_lines(meta: dict) -> list[str]:
    corpus = meta.get("corpus") or {}
    segs = meta.get("segments") or {}
    if isinstance(segs, list):  # a report before issue 32: one list of spots
        return [f"Code ({meta.get('corpus_note', '')}): " + ", ".join(f"`{s}`" for s in segs) + ".", ""]
    out = [f"Code: {meta.get('corpus_note', '')}", "",
           "Packages: " + ", ".join(f"`{p}`" for p in meta.get("packages", [])) + ".", "",
           "| half | functions typed | of chosen | packages | characters chosen |", "|---|---|---|---|---|"]
    for sp, names in segs.items():
        c = corpus.get(sp, {})
        out.append(f"| {sp} | {len(names)} | {c.get('functions', '–')} | {c.get('packages', '–')} | "
                   f"{c.get('chars', '–')} |")
    out.append("")
    for sp, names in segs.items():
        out += [f"<details><summary>{sp}: the functions typed</summary>", "",
                *[f"- `{n}`" for n in names], "", "</details>", ""]
    return out


def report(summaries: list[dict], meta: dict, plots: list[str]) -> str:
    present = dict.fromkeys(s.get("split", "") for s in summaries)
    splits = [sp for sp in ("test", "validation", "tuning") if sp in present] + \
        [sp for sp in present if sp not in ("test", "validation", "tuning")] or [""]
    servers = "; ".join(f"`{k}` = `{v['tree']}` at `{v['commit']}`" + (f" on model `{v['model']}`" if v.get("model") else "")
                        for k, v in meta["servers"].items())
    refs = meta.get("reference") or {}
    if refs and "gguf" in refs:  # a report before issue 32: one reference for the one corpus
        refs = {"": refs}
    sections: list[str] = []
    for sp in splits:
        part = [s for s in summaries if s.get("split", "") == sp]
        title = {"test": "## Test split (held out: the figures to quote)",
                 "validation": "## Validation half (typed by earlier A/B runs: a second tuning set)",
                 "tuning": "## Tuning half (the code policies may be tuned on)",
                 "train": "## Train split (further packages to learn from and debug on)",
                 "source": "## Code in no split (a debugging look)"}.get(sp, "## Results")
        sections += [title, "", *detail(part), *package_table(part), *reference_lines(refs.get(sp), sp),
                     *targets(part)]
    lines = [
        "# Replay benchmark: keystroke → suggestion",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} UTC ({meta['cpu']}; {meta['machine']}; load average "
        f"at start {meta['load_average']}, at the end {meta.get('load_average_end', '–')}). "
        + (f"Purpose: {meta['purpose']}. " if meta.get("purpose") else "")
        + f"Model `{meta['model']}`, {meta['threads']} threads. Servers: {servers}. "
        f"{meta['rounds']} round(s), configurations in the order {', '.join(f'`{c}`' for c in meta['order'])} "
        "each round, one server process at a time, each on a fresh FLINT_CACHE_DIR"
        + (" (restart: the cache its `on` filled)" if any(s["mode"] == "restart" for s in summaries) else "") + ".",
        "",
        *(["**Partial run**: only the configurations in the tables below had finished when this was written.", ""]
          if not meta.get("complete", True) else []),
        "Held-out code is typed back into the real `flint serve` over stdio, as VS Code drives an "
        "inline-completion server: one `didChange` per keystroke, an automatic `textDocument/inlineCompletion` "
        "right after it (the previous one cancelled with `$/cancelRequest` if still open; a ghost typed through "
        "stays until that answer comes, and an answer with nothing in it takes it away: before session 74 it "
        "stayed), Tab when the "
        "suggestion on screen is what the file says next and every character Tab inserts has been on screen, in "
        "that form, for 0.3 s (a suggestion a later answer grew shows its new part from that answer), Enter with a "
        "perfect auto-indent (a body's first line starts after its indentation, as the Enter that opened it left "
        "it; before session 44 the typist typed it a space at a time). Latency is didChange sent → non-empty "
        "response received; a keystroke counts as answered when that response arrived before the next keystroke.",
        "",
        *corpus_lines(meta),
        "Typists: " + "; ".join(f"`{k}`: {v}" for k, v in meta["typists"].items()) + ".",
        "",
        *headline(summaries),
        *sections,
        *gate_cost_lines(meta.get("gate_cost")),
        *glossary_lines(),
        f"- A pause is a gap of ≥ {PAUSE_S} s to the next keystroke, or a file's last keystroke when the typing "
        "stopped before the end of the typed region; it shows a "
        f"suggestion when that keystroke's answer (non-empty) arrived within {SHOWN_MS:.0f} ms. The keystroke "
        "that finishes the region is no pause: what follows it is already in the file and an empty answer is "
        "the right one.",
        "- Medians are ordinary medians (the mean of the two middle values for an even count); other percentiles "
        "are linear between the nearest ranks. Latency percentiles are over answered keystrokes; the CDF is over "
        "all keystrokes (a curve's height is its answer rate). Reports before issue 32 used the lower of the two "
        "middle values.",
        "- Keystrokes under a wrong ghost: typed while a suggestion was on screen from which Tab could take "
        "nothing (neither it nor its first line is what the file says next). Suggestions of ≤ 3 characters: "
        "among the suggestions shown (a new ghost, not one typed through or grown), those whose full length was "
        "at most 3 characters.",
        "- First suggestion after opening (`open`, `open-blind`): first keystroke (1 s after didOpen; `open` "
        "reports the cursor with `flint/didMoveCursor` right after didOpen) → first non-empty answer "
        "in that file. For the other typists the cursor lands and the editor asks once before typing; if that "
        "answer is empty it asks again on `flint/refresh` and once when the engine reports ready (what typing "
        "on or a manual trigger would find): the time to the first suggestion there, and to the engine being "
        f"ready (typing starts then), are listed apart. Files ≥ {LONG_FILE_LINES:,} lines: the corpus's own "
        "long modules (pycodestyle.py, pyflakes/checker.py, sortedcontainers/sortedlist.py, tabulate/__init__.py; "
        "2,200-2,700 lines) in both halves.",
        "- CPU: user + system time of the server process (/proc/<pid>/stat, all threads) from the first to the "
        f"last keystroke of each file, per minute of that typing; after the last keystroke it is sampled every "
        f"{IDLE_STEP_S} s for {IDLE_WINDOW_S:.0f} s (replay_idle_cpu.png). Per accepted character: both, over the "
        "characters Tab inserted. The benchmark client runs on the same machine.",
        "- `off`: `speculation: false, cacheSizeMb: 0`; `restart`: a new server on the disk cache `on` filled "
        "(only when those modes were run).",
        "",
        *[f"![{p}]({p})" for p in plots],
        "",
        "Raw numbers, per keystroke and per file, are in `replay.json`."
        + (" The plots show the validation half." if len(splits) > 1 else ""),
        "",
    ]
    return "\n".join(lines)


def gate_cost_lines(cost: dict | None) -> list[str]:
    """(--records) The learned gate's own cost per automatic answer, read from the servers' records."""
    if not cost:
        return []
    f = lambda d, q: f"{d[f'p{q}']:.2f} ms" if d.get(f"p{q}") is not None else "–"  # noqa: E731
    return ["## The gate's cost per automatic answer (`--records`)", "",
            "Each gated answer's features and decision on the server's event loop, from its records: thread CPU time "
            "(`cpu_ms`, the gate's own work) and wall time (`cost_ms`, waits for the engine thread's GIL included).", "",
            "| configuration | answers | CPU p50 / p95 / p99 | wall p50 / p95 / p99 |", "|---|---|---|---|",
            *[f"| {k} | {v['answers']:,} | {' / '.join(f(v['cpu_ms'], q) for q in (50, 95, 99))} | "
              f"{' / '.join(f(v['cost_ms'], q) for q in (50, 95, 99))} |" for k, v in cost.items()], ""]


def print_table(summaries: list[dict]) -> None:
    head = f"{'configuration':<36}{'keys':>6}{'answered':>10}{'pauses':>9}{'p50':>9}{'p95':>9}{'p99':>9}" \
           f"{'saved':>7}{'1st':>8}{'cpu/min':>9}{'idle':>7}"
    print(head)
    for s in summaries:
        f = s["first_suggestion_after_open_s"]
        first = f["p50"] if f else (pct([x for x in s["first_request_s"] if x is not None], 50))
        name = f"{s['config']} ({s['split']})" if s.get("split") else s["config"]
        print(f"{name:<36}{s['keystrokes']:>6}{share(s['with_suggestion'] / max(1, s['keystrokes'])):>10}"
              f"{share(s['pauses']['share']):>9}{ms(s['latency_ms']['p50']):>9}{ms(s['latency_ms']['p95']):>9}"
              f"{ms(s['latency_ms']['p99']):>9}{share(s['chars_saved_share']):>7}{secs(first):>8}"
              f"{s['cpu_s_per_typing_min'] or 0:>9}{secs(s['idle_settle_s']['p50']):>7}")


def reference_lines(ref: dict | None, split: str = "") -> list[str]:
    if not ref:
        return []

    def row(t: str, r: dict) -> str:
        who = "patient (takes every right ghost at once)" if t == "patient" else f"`{t}`'s timing, Tab after 0.3 s"
        return (f"| {who} | {r['chars_saved']} of {r['target_chars']} ({share(r['chars_saved'] / max(1, r['target_chars']))})"
                f" | {r['keys_saved']} of {r['target_keys']} ({share(r['keys_saved'] / max(1, r['target_keys']))})"
                f" | {r['tabs']} |")

    return [
        "### The model asked directly (the quality reference" + (f", {split} half)" if split else ")"),
        "",
        f"`{ref['gguf']}` through llama-cpp-python {ref['llama_cpp']}: plain FIM over the engine's window "
        f"({ref['window'][0]:,} characters before the cursor, {ref['window'][1]} after), greedy, stopped at the "
        "first line break, its line on screen the moment a keystroke is made (no latency); the ghost stays while "
        "typed through and is asked again when taken or contradicted. Each typist's timing as above; the model "
        f"was asked at {ref['calls']} states, {ref['call_ms_p50']:.0f} ms each (p50; not part of the simulation). "
        "What this model and window save when speed costs nothing (`scripts/replay_reference.py`):",
        "",
        "| typist | characters saved | in keystrokes | Tabs |",
        "|---|---|---|---|",
        *[row(t, r) for t, r in ref["typists"].items()],
        "",
    ]


