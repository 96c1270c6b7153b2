"""scripts/replay_test_table.py: which cells of a machine's held-out table are measured at a commit, which are
missing, and the README rows it prints for them (no replay runs here: the reports in docs/ are the data)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
AVX2 = ROOT / "docs" / "benchmarks" / "replay_test" / "avx2"
tt = load_script("replay_test_table")
bench_meta = load_script("bench_meta")


def _cpuinfo(vendor_model: str, family: int, flags: str) -> dict:
    return bench_meta.cpu_info(f"model name\t: {vendor_model}\ncpu family\t: {family}\nmodel\t\t: 1\n"
                               f"flags\t\t: fpu {flags}\n\nprocessor\t: 1\n")


def test_the_kind_of_machine_is_read_from_the_cpu():
    assert tt.machine_kind(_cpuinfo("AMD EPYC", 25, "avx2 fma f16c")) == "avx2"
    assert tt.machine_kind(_cpuinfo("AMD EPYC 9B45", 26, "avx2 fma avx512f avx512_vnni")) == "zen5"
    assert tt.machine_kind(_cpuinfo("AMD EPYC 9R14", 25, "avx2 avx512f avx512_vnni")) == ""
    assert tt.machine_kind(_cpuinfo("Intel(R) Xeon(R) Platinum", 6, "avx2 avx512f avx512_vnni")) == "xeon"
    assert tt.machine_kind(_cpuinfo("Intel(R) Core(TM)", 6, "avx2 fma")) == "cpu-6-1"  # no other kind's folder


def _report(language: str, rounds: dict[tuple[str, str], int], main: str = "214eddf05473") -> dict:
    runs = [{"split": "test", "typist": t, "server": arm, "round": i}
            for (t, arm), n in rounds.items() for i in range(n)]
    return {"meta": {"language": language, "splits": ["test"],
                     "servers": {"base": {"commit": "194478821ed5"}, "main": {"commit": main}}}, "runs": runs}


def test_a_cell_is_a_typist_both_arms_typed_in_three_rounds():
    data = _report("go", {("steady", "main"): 3, ("steady", "base"): 3, ("open", "main"): 3, ("open", "base"): 2})
    assert tt.cells_of(data) == {("go", "steady"): {"base": "194478821ed5", "main": "214eddf05473"}}
    tuning = {**data, "meta": {**data["meta"], "splits": ["tuning"]}}
    assert tt.cells_of(tuning) == {}
    three_arms = {**data, "meta": {**data["meta"], "servers": {**data["meta"]["servers"], "cut": {"commit": "x"}}}}
    assert tt.cells_of(three_arms) == {}


def test_a_report_on_file_holds_the_cells_it_was_run_for():
    # a report of two cells (archived when session 92 measured them again at another main)
    data = json.loads((tt.ARCHIVE / "replay_test.avx2-rust-steady-open-214eddf.json").read_text())
    cells = tt.cells_of(data)
    assert set(cells) == {("rust", "steady"), ("rust", "open")}
    assert all(tt.same_commit(c["main"], "214eddf") and tt.same_commit(c["base"], "1944788") for c in cells.values())


def test_missing_cells_are_those_not_measured_at_main_beside_the_base(tmp_path):
    (tmp_path / "go-think.json").write_text(json.dumps(_report("go", {("think", "main"): 3, ("think", "base"): 3})))
    (tmp_path / "rust-x.json").write_text(json.dumps(_report("rust", {("steady", "main"): 3, ("steady", "base"): 3},
                                                             main="0123456789ab")))
    found = tt.table(tmp_path)
    assert set(found) == {("go", "think"), ("rust", "steady")}
    todo = tt.missing(found, "214eddf", "1944788", ("go", "rust"), ("think", "steady"))
    assert todo == [("go", "steady"), ("rust", "think"), ("rust", "steady")]  # rust steady: another main
    assert tt.missing(found, "214eddf", "0000000", ("go",), ("think",)) == [("go", "think")]  # another base


def test_a_commit_matches_by_an_unambiguous_prefix_only():
    assert tt.same_commit("214eddf05473", "214eddf05473bb35d856b4358326c2812a542da9")
    assert tt.same_commit("214eddf05473", "214eddf")
    assert not tt.same_commit("214eddf05473", "214e")  # too short to say
    assert not tt.same_commit("?", "214eddf")
    assert not tt.same_commit("214eddf05473", "214eddf1")


def test_a_filed_report_names_its_own_json():
    md = "...\nRaw numbers, per keystroke and per file, are in `replay.json`.\n"
    assert tt.filed(md, "go-think").endswith("are in `go-think.json`.\n")


def test_the_rows_printed_are_the_readmes_avx2_table():
    rows, sources = tt.readme_rows(AVX2)  # every cell on file, whichever main each was measured at
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Held-out figures on an AVX2-only machine"):]
    section = section[:section.index("\n### ")]
    first = section[section.index("\n| "):].strip().split("\n\n")[0]  # the figures; the tables below are of them
    table = [ln for ln in first.splitlines() if ln.startswith("| ") and not ln.startswith("| code ")
             and not ln.startswith("|---")]
    assert rows == table
    assert sources and all(s in section for s in sources)
    at_214eddf, _ = tt.readme_rows(AVX2, "214eddf")  # one main's cells: a part of the table
    def cells(rs: list[str]) -> set[str]:  # a row without its language (named on a language's first row only)
        return {r.split("|", 2)[2] for r in rs}

    assert at_214eddf and cells(at_214eddf) < cells(rows) and not any(r.startswith("| Go |") for r in at_214eddf)


def test_an_archived_report_is_named_for_the_machine_it_records(tmp_path):
    # replay_test/ itself holds rows of the Zen 4 EPYC and of the Intel Xeon: the report's own CPU names it
    xeon = {"meta": {"cpu": "Intel(R) Xeon(R) Processor (family 6 model 207; avx2 fma avx512f avx512_vnni), 2 cores"}}
    zen4 = {"meta": {"cpu": "AMD EPYC 9R14 (family 25 model 17; avx2 fma avx512f avx512_vnni), 2 cores"}}
    avx2 = {"meta": {"cpu": "AMD EPYC 7B13 (family 25 model 1; avx2 fma f16c), 2 cores"}}
    for name, data in (("rust-think", xeon), ("go-think", zen4), ("go-open", avx2), ("js-open", {"meta": {}})):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    assert tt.archived_stem(tt.TEST, tmp_path / "rust-think.json", "82a838da28ed") \
        == "replay_test.xeon-rust-think-82a838d"
    assert tt.archived_stem(tt.TEST, tmp_path / "go-think.json", "b0cfc1f00000") == "replay_test.zen4-go-think-b0cfc1f"
    assert tt.archived_stem(tt.TEST, tmp_path / "go-open.json", "214eddf00000") == "replay_test.avx2-go-open-214eddf"
    # no CPU recorded: the folder's kind
    assert tt.archived_stem(tt.TEST, tmp_path / "js-open.json", "5931f1b00000") == "replay_test.zen4-js-open-5931f1b"
    assert tt.archived_stem(AVX2, tmp_path / "js-open.json", "5931f1b00000") == "replay_test.avx2-js-open-5931f1b"


def test_the_recorded_kind_reads_back_what_bench_meta_writes():
    # the parser is the inverse of bench_meta.cpu_line: a change of that line's format fails here, not silently
    for model, family, flags, kind in (("Intel(R) Xeon(R) Processor", 6, "avx2 fma avx512f avx512_vnni", "xeon"),
                                       ("AMD EPYC 9R14", 25, "avx2 fma avx512f avx512_vnni", "zen4"),
                                       ("AMD EPYC 9B45", 26, "avx2 avx512f avx512_vnni", "zen5"),
                                       ("AMD EPYC 7B13", 25, "avx2 fma f16c", "avx2"),
                                       ("Some CPU", 6, "", "cpu-6-1")):
        line = bench_meta.cpu_line(_cpuinfo(model, family, flags))
        assert tt.recorded_kind({"cpu": line}) == kind, line
    assert tt.recorded_kind({}) is None


def test_a_report_leaving_a_table_is_archived_under_its_machine_and_commit():
    test = ROOT / "docs" / "benchmarks" / "replay_test"
    assert tt.archived_stem(AVX2, AVX2 / "rust-steady-open.json", "214eddf05473") \
        == "replay_test.avx2-rust-steady-open-214eddf"
    # a live report of replay_test/ itself is named for the machine its run recorded (the cells move between kinds)
    live = test / "python-think.json"
    kind = tt.recorded_kind(json.loads(live.read_text())["meta"])
    assert kind in ("xeon", "zen4")
    assert tt.archived_stem(test, live, "9a3993815649") == f"replay_test.{kind}-python-think-9a39938"
