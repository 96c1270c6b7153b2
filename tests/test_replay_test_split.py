"""Issue 47's replay fixes that need no model: the test split's pins and selection, the functions moved out of
validation, whole-function sizing, per-round seeds, the arms a test run takes, the ledger and the run's metadata."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.scripts import load_script

corpus = load_script("replay_corpus")
split = load_script("replay_test_split")
meta = load_script("bench_meta")
typist = load_script("replay_typist")


# ---- the test split's packages ------------------------------------------------------------------------------------

USED_ELSEWHERE = {p for p, _ in corpus.PACKAGES} | {
    "more-itertools", "toolz", "boltons", "pygls", "lsprotocol", "click", "marshmallow", "tomlkit", "httpx", "humanize"}


def test_the_test_split_pins_ten_further_wheels_by_version_and_sha256():
    names = [p for p, _, _ in split.PYPI]
    assert len(set(names)) == len(names) >= 8
    assert not set(names) & USED_ELSEWHERE
    for _, version, sha in split.PYPI:
        assert version and "==" not in version and len(sha) == 64 and int(sha, 16) >= 0
    assert len(split.PYPI) * split.PER_PACKAGE >= 40


def test_every_language_of_the_language_benchmark_has_test_packages_of_its_own():
    rl = load_script("replay_languages")
    other = split.other_packages()
    assert set(other) == set(rl.LANGUAGES)
    for lang, pkgs in other.items():
        names = {p.name for p, _ in pkgs}
        assert not names & {p.name for p in rl.PACKAGES[lang]}, lang  # none of the tuning/validation packages
        assert all(len(sha) == 64 and p.version for p, sha in pkgs)


def test_the_train_split_pins_further_packages_none_of_the_other_splits_hold():
    train = load_script("replay_train_split")
    rl = load_script("replay_languages")
    names = [p for p, _, _ in train.PYPI]
    assert len(set(names)) == len(names) >= 15
    assert not set(names) & (USED_ELSEWHERE | {p for p, _, _ in split.PYPI})
    assert all(v and len(sha) == 64 for _, v, sha in train.PYPI)
    other = train.other_packages()
    assert set(other) == set(rl.LANGUAGES)
    for lang, pkgs in other.items():
        got = {p.name for p, _ in pkgs}
        assert len(got) >= 5, lang
        assert not got & {p.name for p in rl.PACKAGES[lang]}, lang
        assert not got & {p.name for p, _ in split.other_packages()[lang]}, lang
        assert all(len(sha) == 64 and p.version for p, sha in pkgs)
    cands = [corpus.Spec("pkg", "1", "pkg/m.py", f"f{i}", chars=100) for i in range(12)]
    got_specs = split.first_by_rank(cands, train.PER_PACKAGE, train.SPLIT)
    assert {s.split for s in got_specs} == {"train"} and len(got_specs) == train.PER_PACKAGE
    assert corpus.pick(got_specs, "tuning") == [] and corpus.pick(got_specs, "test") == []


def test_a_changed_download_is_refused(tmp_path):
    f = tmp_path / "x.whl"
    f.write_bytes(b"wheel")
    split.check_sha256(f, split.sha256_of(f))
    with pytest.raises(SystemExit, match="pinned"):
        split.check_sha256(f, "0" * 64)


def test_the_first_functions_by_rank_all_go_to_the_test_split():
    cands = [corpus.Spec("pkg", "1", "pkg/m.py", f"f{i}", chars=100) for i in range(9)]
    got = split.first_by_rank(cands)
    assert len(got) == split.PER_PACKAGE
    assert {s.split for s in got} == {"test"}
    assert [s.key for s in got] == sorted((s.key for s in cands), key=corpus.rank)[:split.PER_PACKAGE]
    # test functions are in neither half bench_replay types for tuning or validation
    assert corpus.pick(got, "validation") == [] and corpus.pick(got, "tuning") == []
    assert corpus.describe(got)["test"]["functions"] == split.PER_PACKAGE


def test_validation_functions_read_while_debugging_are_tuning_now():
    moved = sorted(corpus.READ_WHILE_DEBUGGING)
    specs = []
    for key in moved:
        package, module, qualname = key.split(":", 2)
        # the function would be validation by its turn: the second of its package
        specs += [corpus.Spec(package, "1", module, "0first"), corpus.Spec(package, "1", module, qualname)]
    out = {s.key: s.split for s in corpus.split_of(specs)}
    assert all(out[k] == "tuning" for k in moved)
    # the rule is unchanged for the others
    other = corpus.split_of([corpus.Spec("p", "1", "m.py", "a"), corpus.Spec("p", "1", "m.py", "b")])
    assert [s.split for s in other] == ["tuning", "validation"]


# ---- every arm types the same code --------------------------------------------------------------------------------

def _seg(name: str, typed: str) -> corpus.Segment:
    return corpus.Segment(name, "python", "m.py", "def f():\n", typed, "\n")


def test_keys_choose_whole_functions_instead_of_cutting_each_one():
    segs = [_seg("a", "    x = 1\n    return x"), _seg("b", "    y = 2"), _seg("c", "    z = 3\n    return z")]
    assert corpus.keystrokes(segs[0]) == len("    x = 1\n") + len("return x")  # Enter writes the indentation
    got = corpus.size_to_keys(segs, corpus.keystrokes(segs[0]) + corpus.keystrokes(segs[1]))
    assert [s.name for s in got] == ["a", "b"]
    assert all(s.typed == o.typed for s, o in zip(got, segs, strict=False))  # whole, never cut
    assert [s.name for s in corpus.size_to_keys(segs, 1)] == ["a"]  # at least one function


def test_rounds_draw_their_own_seeds_and_the_typist_follows_them():
    seeds = corpus.round_seeds(7, 3)
    assert seeds == [7, 8, 9]
    t = typist.TYPISTS["think"]
    gaps = [[t.interval(typist.state_rng(s, 0, n), "x ") for n in range(40)] for s in seeds]
    assert gaps[0] != gaps[1] != gaps[2]
    # within a round every arm gets the same script
    assert gaps[0] == [t.interval(typist.state_rng(7, 0, n), "x ") for n in range(40)]


def test_summaries_score_functions_all_rounds_finished_and_count_what_was_typed():
    stats = load_script("replay_stats")
    seg = "pkg==1/pkg/m.py:f"

    def run(rnd: int, finished: bool) -> typist.Run:
        keys = [typist.Key(seg, "char", "a", 0.0, outcome="suggestion", latency_ms=5.0, at=1)]
        st = typist.SegmentStats(seg, 10, typed_chars=20, typing_s=1.0, finished=finished)
        return typist.Run("cur/steady", "cur", "steady", "on", rnd, seed=rnd, keys=keys, segments=[st],
                          target_chars=1)

    s = stats.summarize([run(0, True), run(1, True)])
    assert s["functions_typed"] == 1 and s["seeds"] == [0, 1]
    assert stats.summarize([run(0, True), run(1, False)])["functions_typed"] == 0


# ---- the arms of a test run, and what is recorded -----------------------------------------------------------------

def test_a_test_run_takes_exactly_main_and_one_baseline_with_known_commits_over_three_seeds():
    two = {"main": "/a", "base": "/b"}
    split.check_arms(two, {"main": "abc", "base": "def"}, 3)
    with pytest.raises(SystemExit, match="exactly two arms"):
        split.check_arms({**two, "x": "/c"}, {"main": "abc", "base": "def", "x": "1"}, 3)
    with pytest.raises(SystemExit, match="exactly two arms"):
        split.check_arms({"new": "/a", "base": "/b"}, {"new": "abc", "base": "def"}, 3)
    with pytest.raises(SystemExit, match="no commit for base"):
        split.check_arms(two, {"main": "abc", "base": "?"}, 3)
    with pytest.raises(SystemExit, match="at least 3 rounds"):
        split.check_arms(two, {"main": "abc", "base": "def"}, 2)


def test_an_arm_commit_comes_from_its_commit_file_else_git(tmp_path):
    snap = tmp_path / "snap"
    snap.mkdir()
    assert meta.arm_commit(snap) == "?"
    (snap / "COMMIT").write_text("0123456789abcdef0123\n")
    assert meta.arm_commit(snap) == "0123456789ab"
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    assert meta.arm_commit(repo) == head[:12]


def test_cpu_info_names_the_model_and_the_simd_flags():
    info = meta.cpu_info("processor\t: 0\nmodel name\t: AMD EPYC 9R45\ncpu family\t: 26\nmodel\t: 2\n"
                         "flags\t: fpu avx2 fma avx512f avx512_vnni sse4_2\n\nprocessor\t: 1\n")
    assert info["model"] == "AMD EPYC 9R45" and info["family"] == "26" and info["model_number"] == "2"
    assert info["flags"] == ["avx2", "fma", "avx512f", "avx512_vnni"]
    assert "avx512_vnni" in meta.cpu_line(info) and "family 26 model 2" in meta.cpu_line(info)


def test_the_ledger_gets_a_head_once_and_a_row_per_use(tmp_path):
    path = tmp_path / "ledger.md"
    row = meta.ledger_row("2026-11-28 10:00", "test", {"main": "abc", "base": "def"},
                          "python scripts/bench_replay.py --split test", "main | beside\nbase", "EPYC")
    meta.append_ledger(row, path)
    meta.append_ledger(row.replace("10:00", "11:00"), path)
    text = path.read_text()
    assert text.count("| date (UTC) |") == 1
    rows = [ln for ln in text.splitlines() if ln.startswith("| 2026")]
    assert len(rows) == 2 and "main (abc), base (def)" in rows[0]
    assert rows[0].count(" | ") == 5  # the purpose's bar and line break do not break the table
    assert "main \\| beside base" in rows[0]


def test_bench_replay_help_documents_the_test_split():
    out = subprocess.run([sys.executable, str(split.ROOT / "scripts" / "bench_replay.py"), "--help"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "{both,validation,tuning,train,test}" in out and "--purpose" in out
    assert "--split test" in out and "ledger" in out
