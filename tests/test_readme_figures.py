"""README's replay and per-language figures are the numbers in the report JSON they cite (issue 47): a figure that is
edited by hand, or computed under another definition than the glossary's, fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BENCH = ROOT / "docs" / "benchmarks"
stats = load_script("replay_stats")


def _section(title: str) -> str:
    """From a heading to the next heading of level 2 or 3."""
    start = README.index(title)
    return README[start: min(i for h in ("\n## ", "\n### ") if (i := README.find(h, start + 1)) >= 0)]


def _table_rows(text: str) -> list[list[str]]:
    """The first table of ``text``, without its header."""
    lines = text[text.index("\n| "):].strip().split("\n\n")[0].splitlines()
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines if ln.startswith("| ")][1:]


def test_the_replay_table_is_the_reports_record_on_the_functions_every_arm_finished():
    section = _section("### Measured at current main")
    assert "docs/benchmarks/replay.json" in section
    data = json.loads((BENCH / "replay.json").read_text())
    sums, names = stats.common_summaries(data, "validation")
    assert f"**{len(names)} functions" in section
    figures = {(s["server"], s["typist"]): stats.figure_row(s) for s in sums}
    rows = _table_rows(section)
    assert len(rows) == len(figures) == 6
    typist = None
    for row in rows:
        typist = row[0].split()[0] if row[0] else typist
        want = figures[(row[1], typist)]
        assert row[2:] == [want[k] for k in ("characters saved", "answered", "pauses", "latency", "wrong ghost",
                                              "cpu per minute", "cpu per accepted character")], (row[1], typist)


def test_the_replay_ratios_and_the_tuning_sentence_follow_from_the_record():
    section = _section("### Measured at current main")
    data = json.loads((BENCH / "replay.json").read_text())
    val = {(s["server"], s["typist"]): s for s in stats.common_summaries(data, "validation")[0]}
    cpu = {t: val[("main", t)]["cpu_s_per_typing_min"] / val[("base", t)]["cpu_s_per_typing_min"]
           for t in ("think", "open", "steady")}
    assert f"main uses {cpu['think']:.2f} (think), {cpu['open']:.2f} (open) and {cpu['steady']:.2f} (steady)" in section
    tun = {(s["server"], s["typist"]): s for s in stats.common_summaries(data, "tuning")[0]}

    def saved(server: str) -> str:
        return " / ".join(f"{100 * tun[(server, t)]['chars_saved_share']:.0f}%" for t in ("steady", "think", "open"))

    assert f"({saved('main')} against {saved('base')})" in section


def _held_out_rows(title: str, folder: Path) -> list[dict]:
    """One row per (language, typist, arm) from ``folder``'s test-split reports: typed whole by both arms (main and
    the baseline) over at least three seeds; each cell the mean ± sd over the seeds. Returns the reports' meta."""
    section = _section(title)
    reports = sorted(folder.glob("*.json"))
    assert reports, "no test-split report"
    figures, functions, metas = {}, set(), []
    for path in reports:
        data = json.loads(path.read_text())
        assert f"docs/benchmarks/{path.relative_to(BENCH)}" in section
        sums, names = stats.common_summaries(data, "test")
        assert {s["server"] for s in sums} == {"main", "base"} and all(s["rounds"] >= 3 for s in sums)
        assert all(s["functions_typed"] == len(names) for s in sums)  # every function typed whole by both
        functions.add(len(names))
        lang = data["meta"]["language"]
        figures |= {(lang, s["typist"], s["server"]): stats.seed_row(s) for s in sums}
        metas.append(data["meta"])
    rows = _table_rows(section)
    assert len(rows) == len(figures)
    lang = typist = None
    for row in rows:
        lang = row[0].lower() if row[0] else lang
        typist = row[1].split()[0] if row[1] else typist
        want = figures[(lang, typist, row[2])]
        assert row[3:] == [want[k] for k in stats.SEED_COLUMNS], (lang, typist, row[2])
    assert all(f" {n}" in section for n in functions) and "functions typed whole by both arms" in section
    return metas


def test_the_held_out_table_is_each_test_split_reports_mean_and_spread_over_seeds():
    _held_out_rows("### Held-out figures: the test split", BENCH / "replay_test")


def test_the_avx2_held_out_table_is_its_reports_and_was_measured_without_avx512():
    """The rows said to come from an AVX2-only machine were measured on one (the CPU each report recorded)."""
    metas = _held_out_rows("### Held-out figures on an AVX2-only machine", BENCH / "replay_test" / "avx2")
    assert all("avx2" in m["cpu_flags"] and not any(f.startswith("avx512") for f in m["cpu_flags"]) for m in metas)



def test_the_zen5_held_out_table_is_its_reports_and_was_measured_on_a_zen5():
    """The rows said to come from a Zen 5 EPYC were measured on one (family 26, AVX-512 VNNI)."""
    metas = _held_out_rows("### Held-out figures on the AMD EPYC Zen 5", BENCH / "replay_test" / "zen5")
    assert all("family 26 " in m["cpu"] and "avx512_vnni" in m["cpu_flags"] for m in metas)

LANG_SENTENCE = re.compile(r"JavaScript ([\d.]+)%, TypeScript ([\d.]+)%, Go ([\d.]+)%, Rust ([\d.]+)% beside "
                           r"Python's ([\d.]+)%")


def test_the_per_language_figures_are_saved_over_saved_plus_typed_from_the_runs_cited():
    got = LANG_SENTENCE.search(" ".join(README.split()))
    assert got is not None
    assert "*_0496669.json" in README
    for lang, figure in zip(("javascript", "typescript", "go", "rust", "python"), got.groups(), strict=True):
        data = json.loads((BENCH / "replay_languages" / f"{lang}_0496669.json").read_text())
        (sm,) = data["summaries"]
        assert float(figure) == pytest.approx(100 * stats.saved_share(sm["chars_saved"], sm["typed_chars"]), abs=0.05)


def test_the_readme_no_longer_calls_the_validation_half_unseen():
    assert "no tuning decision has looked at" not in README
    assert "docs/benchmarks/ledger.md" in README and (BENCH / "ledger.md").is_file()


def _ms(x: float) -> str:
    return f"{int(x + 0.5):,}"  # (half up: 238.5 is 239)


def test_the_next_edit_figures_are_the_signature_and_move_reports():
    """The README's next-edit figures on real version pairs are the current reports' (validation half)."""
    sig = json.loads((BENCH / "next_edit_signatures.json").read_text())["splits"]["validation"]
    text = " ".join(README.split())
    assert f"{sig['cases']} cases, {sig['calls_changed']} changed calls" in text
    assert f"call-site precision {sig['call_site_precision']:.2f} and recall {sig['location_recall']:.2f}" in text
    assert f"({sig['edits_call_exact']} of {sig['edits_taken']})" in text
    assert f"the real one at {sig['argument_exact']} of {sig['jumps_taken']} added-argument sites " \
           f"({sig['argument_exact_of_all']:.2f};" in text
    served = json.loads((BENCH / "next_edit_signatures.json").read_text())["floors"]["validation"]["served"]
    assert f"at {served['wrong_hidden']} of the {served['wrong']} sites where the model's own text was wrong no " \
           "wrong text shown" in text
    fo, fa = sig["first_offer"], sig["first_answer"]
    assert f"The first offer comes {_ms(fo['p50_ms'])} / {_ms(fo['p95_ms'])} ms (p50 / p95, {fo['n']} cases" in text
    assert f"offer or not, {_ms(fa['p50_ms'])} / {_ms(fa['p95_ms'])} ms" in text
    nx = sig["next_answer"]
    assert f"after taking one {nx['p50_ms']:.1f} / {nx['p95_ms']:.1f} ms" in text
    mv = json.loads((BENCH / "next_edit_moves.json").read_text())
    m = mv["splits"]["validation"]
    right = sum(r["right"] for r in mv["rows"])
    wrong = sum(len(r["wrong"]) for r in mv["rows"])
    assert f"on {m['cases']} real moves" in text and f"{right} of {m['imports_changed']} changed imports offered" in text
    assert f"{wrong} offered where upstream kept" in text
    assert f"first offer {_ms(m['first_offer']['p50_ms'])} / {_ms(m['first_offer']['p95_ms'])} ms after the paste" in text


def test_the_larger_models_figures_are_its_archived_runs():
    """The README's 0.5B-against-1.5B sentence is the archived runs' characters saved (docs/benchmarks/models.md)."""
    text = " ".join(README.split())
    for lang, run, arm in (("Python", "m15-tuning-python-think-s88", "m15"), ("Rust", "m15-tuning-rust-think-s88", "m15"),
                           ("TypeScript", "m15-tuning-ts-think-s89", "m15"), ("JavaScript", "m15-tuning-js-think-s89", "m15"),
                           ("Go", "m15-tuning-go-think-s89", "m15"),
                           ("Python", "m15i4-tuning-python-think-s88", "m15i4")):
        data = json.loads((BENCH / "archive" / f"replay.{run}.json").read_text())
        share = {s["server"]: s["chars_saved_share"] for s in data["summaries"] if s["typist"] == "think"}
        assert f"{lang} think {100 * share['main']:.0f}% -> {100 * share[arm]:.0f}%" in text


def test_the_idle_work_figures_are_its_validation_run():
    """The README's sentence on idle work not begun (session 90) is the archived validation run's record."""
    text = " ".join(README.split())
    data = json.loads((BENCH / "archive" / "replay.beyond-idle-val-python-think-s90.json").read_text())
    by = {s["server"]: s for s in data["summaries"]}
    job = {arm: sum(r["work"]["now"]["cpu_ms"] for r in data["runs"] if r["server"] == arm) / 1000 for arm in by}
    main, new = by["main"], by["beyond"]
    assert f"job CPU {job['main']:.1f} -> {job['beyond']:.1f} s" in text
    assert f"CPU per accepted character {main['cpu_ms_per_accepted_char']} -> {new['cpu_ms_per_accepted_char']} ms" in text
    assert f"characters saved {main['chars_saved']:,} -> {new['chars_saved']:,}" in text
    assert f"under a wrong ghost {main['wrong_ghost_keys']['count']} -> {new['wrong_ghost_keys']['count']}" in text
    assert f"within 150 ms {100 * main['pauses']['share']:.1f}% -> {100 * new['pauses']['share']:.1f}%" in text
    assert f"CPU per minute of typing {main['cpu_s_per_typing_min']} -> {new['cpu_s_per_typing_min']} s" in text


readme_gen = load_script("replay_readme")


def test_the_held_out_sections_are_written_from_their_reports():
    """Each held-out section is what scripts/replay_readme.py writes from the reports on file: rows, where and when
    each was measured, and the verdicts against the issues' targets (a moved cell moves all of them)."""
    for sec in readme_gen.SECTIONS:
        assert _section(sec.title) == readme_gen.render(sec), sec.title


def _cell(saved: float, base_saved: float, wrong: float, base_wrong: float, cpu: float, pauses: float | None) -> object:
    def sm(**means: float | None) -> dict:
        return {"over_seeds": {k: {"mean": v, "sd": 0.0} for k, v in means.items() if v is not None}}

    return readme_gen.Cell("go", "think", "r.json", {}, sm(chars_saved_share=saved, wrong_ghost_share=wrong,
                                                          cpu_s_per_typing_min=cpu, pauses_share=pauses),
                           sm(chars_saved_share=base_saved, wrong_ghost_share=base_wrong), 8)


def test_a_rows_verdicts_are_the_issues_targets_read_on_the_figures_shown():
    v = readme_gen.targets(_cell(0.45, 0.46, 0.30, 0.60, 25.04, 0.8996))
    assert v == ["met: 45.0%", "met: 90.0%", "met: 30.0%", "met: 25.0 s", "met: −50%", "**missed**: −1.0 points"]
    v = readme_gen.targets(_cell(0.449, 0.40, 0.401, 0.50, 25.1, None))
    assert v == ["**missed**: 44.9%", "– (no pauses)", "**missed**: 40.1%", "**missed**: 25.1 s", "**missed**: −20%",
                 "met: +4.9 points"]


def test_a_section_is_replaced_up_to_the_next_heading_only():
    text = "# T\n\n### A\n\nold\n\n### B\n\nkeep\n"
    assert readme_gen.replace_section(text, "### A", "### A\n\nnew\n") == "# T\n\n### A\n\nnew\n\n### B\n\nkeep\n"
