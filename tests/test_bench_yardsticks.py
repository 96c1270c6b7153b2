"""Fair yardsticks (issue 32): the pure helpers of bench_engine (which llama.cpp row each Flint row is measured
against, the keystroke prompt both engines run) and bench_served (the direct arm's window, stop and
post-processing rules). No model, no server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engine.decoding.prompt import Fim
from engine.text.window import clip_window, window_start
from tests.scripts import load_script

engine_bench = load_script("bench_engine")
served = load_script("bench_served")
ROOT = Path(__file__).resolve().parent.parent

FIM = Fim("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
SPECIAL = {FIM.prefix: 1000, FIM.suffix: 1001, FIM.middle: 1002}


class CharTok:
    """One token per character; the FIM tokens as specials."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode_bytes(self, ids: list[int]) -> bytes:
        return "".join(chr(i) for i in ids).encode()

    def token_bytes(self, i: int) -> bytes:
        return chr(i).encode()

    def special_id(self, text: str) -> int | None:
        return SPECIAL.get(text)

    @property
    def vocab_size(self) -> int:
        return 1003


# ------------------------------------------------------------------------------------------ bench_engine


def test_drafted_decoding_is_measured_against_llamacpp_prompt_lookup():
    y = engine_bench.YARDSTICK
    assert y["decode_tok_s"] == "llamacpp_decode_tok_s"
    assert y["decode_spec_tok_s"] == y["decode_fast_tok_s"] == "llamacpp_decode_drafted_best_tok_s"
    assert y["ttft_keystroke_fim_ms"] == "llamacpp_ttft_keystroke_fim_ms"
    assert y["ttft_keystroke_psm_ms"] == "llamacpp_ttft_keystroke_psm_ms"
    assert set(y) <= set(engine_bench.ROWS)


def test_every_row_says_what_each_arm_got():
    llama = {"flash_attn_prompt": True, "flash_attn_decode": False, "pld_tokens": 10, "pld_ngram": 2,
             "drafted_best": "plain"}
    for key in engine_bench.ROWS:
        assert engine_bench.row_gets(key, llama), key
    assert "flash_attn on" in engine_bench.row_gets("prefill_tok_s_1000", llama)
    assert "flash_attn off" in engine_bench.row_gets("decode_tok_s", llama)
    spec = engine_bench.row_gets("decode_spec_tok_s", llama)
    assert "num_pred_tokens=10" in spec and "prompt lookup" in spec and "plain" in spec
    assert "num_pred_tokens" not in engine_bench.row_gets("decode_tok_s", llama)
    assert "llama.cpp" not in engine_bench.row_gets("decode_fast_tok_s", {})  # run without llama.cpp


def test_drafted_best_is_llamacpp_prompt_lookup_unless_plain_was_faster():
    assert engine_bench.drafted_best(40.0, 55.0) == (55.0, "prompt lookup")
    assert engine_bench.drafted_best(40.0, 25.0) == (40.0, "plain")
    assert engine_bench.drafted_best(40.0, 40.0) == (40.0, "prompt lookup")
    assert engine_bench.drafted_best(None, 25.0) == (25.0, "prompt lookup")
    assert engine_bench.drafted_best(40.0, None) == (40.0, "plain")
    assert engine_bench.drafted_best(None, None) == (None, "")


def test_pick_faster():
    assert engine_bench.pick_faster({False: [10.0, 12.0, 11.0], True: [9.0, 30.0, 9.5]}, True) is True
    assert engine_bench.pick_faster({False: [20.0], True: [18.0]}, False) is False
    assert engine_bench.pick_faster({2: [30.0], 10: [30.0]}, False) == 2  # a tie: the first listed
    assert engine_bench.pick_faster({2: [], 10: [5.0]}, False) == 10
    assert engine_bench.pick_faster({}, True) is None


def test_keystroke_ids_anchored_layout_appends_the_keystroke():
    prefix = "".join(f"v{i} = compute({i})\n" for i in range(60)) + "x = f("
    suffix = ")\nprint(x)\n"
    before, after = engine_bench.keystroke_ids(CharTok(), FIM, None, prefix, suffix, "2", anchored=True)
    fs, mid = before.index(SPECIAL[FIM.suffix]), before.index(SPECIAL[FIM.middle])
    assert before[0] == SPECIAL[FIM.prefix] and "".join(chr(i) for i in before[fs + 1: mid]) == suffix
    assert after[: mid + 1] == before[: mid + 1]  # the slot, the suffix and the middle token are kept
    slot = "".join(chr(i) for i in before[1:fs])
    assert slot and slot.endswith("\n") and len(slot) < len(prefix) - 400  # anchored ~480 characters back
    # the typed text follows the middle token; its last character is healed (backed off) as the engine does
    assert slot + "".join(chr(i) for i in after[mid + 1:]) == prefix
    assert after[mid + 1:] == before[mid + 1:] + [ord("(")]


def test_keystroke_ids_psm_layout_puts_the_suffix_after_the_prefix():
    prefix, suffix = "import os\nx = os.pa", "\nprint(x)\n"
    before, after = engine_bench.keystroke_ids(CharTok(), FIM, None, prefix, suffix, "t", anchored=False)
    for ids, pre in ((before, prefix), (after, prefix + "t")):
        fs, fm = ids.index(SPECIAL[FIM.suffix]), ids.index(SPECIAL[FIM.middle])
        assert ids[0] == SPECIAL[FIM.prefix] and fm == len(ids) - 1
        assert pre.startswith("".join(chr(i) for i in ids[1:fs]))  # a partial word heals its last token
        assert "".join(chr(i) for i in ids[fs + 1: fm]) == suffix


def test_keystroke_ids_with_bos():
    before, _ = engine_bench.keystroke_ids(CharTok(), FIM, 7, "a = 1\nb = ", "\n", "2", anchored=True)
    assert before[:2] == [7, SPECIAL[FIM.prefix]]


# ------------------------------------------------------------------------------------------ bench_served


def _doc(lines: int = 400) -> str:
    body = "".join(f"    value_{i} = compute({i}, other_{i})\n" for i in range(lines))
    return "def f():\n" + body + "    return value_0\n\n\ndef g():\n    return 2\n" + "# tail\n" * 200


def test_server_window_is_the_servers():
    text = _doc()
    offset = text.index("    value_300 =") + 4
    start, prefix, suffix, p, s = served.server_window(text, offset, 6000, 600)
    assert start == window_start(text, offset, 6000)
    assert start > 0 and text[start - 1] == "\n"
    assert prefix == text[start:offset] and len(prefix) <= 6000
    assert suffix == text[offset: offset + 8192]
    assert (p, s) == clip_window(prefix, suffix, 6000, 600)
    assert len(s) <= 600 and s.endswith("\n")
    # a Tab round keeps the window's start while it is valid, as the server does
    assert served.server_window(text, offset + 10, 6000, 600, previous=start)[0] == start


def test_server_window_short_document():
    text = "x = 1\ny = \n"
    start, prefix, suffix, p, s = served.server_window(text, 10, 6000, 600)
    assert (start, prefix, suffix, p, s) == (0, "x = 1\ny = ", "\n", "x = 1\ny = ", "\n")


SRC = 'import os\n\n\ndef f(a, b):\n    """Add."""\n    c = a + b\n    d = c * 2\n    return d\n'


def _line_spot() -> object:
    i = SRC.index("d = c * 2")
    return served.Spot("m.py:7", "line", SRC[:i], SRC[i + len("d = c * 2"):], "d = c * 2")


def test_direct_rules_follow_the_request_kind():
    spot = _line_spot()
    text, off = spot.prefix + spot.suffix, len(spot.prefix)
    _, pre, suf, _, _ = served.server_window(text, off, 6000, 600)
    rules = served.direct_rules(text, off, pre, suf, "line")
    assert set(rules) == {"raw", "automatic", "invoked"}
    assert rules["raw"].state is None and rules["raw"].params.max_lines == 1
    auto, inv = rules["automatic"], rules["invoked"]
    assert not auto.params.auto_budget and inv.params.auto_budget  # invoked: sized by the context's budget
    assert auto.state.mode == inv.state.mode == "multi"  # an emptied line: a statement in the middle of code
    assert auto.settle is not None and auto.settle.budget.kind == "statement"
    block = served.direct_rules(text, off, pre, suf, "block", ("raw",))
    assert block["raw"].params.max_lines is None and block["raw"].params.max_tokens == served.RAW_BLOCK_TOKENS


def test_direct_rules_skip_where_the_server_does():
    text = "x = foo(bar)\n"
    off = text.index("bar")  # inside a word: an automatic request gets nothing, an invoked one is served
    _, pre, suf, _, _ = served.server_window(text, off, 6000, 600)
    rules = served.direct_rules(text, off, pre, suf, "line")
    assert rules["automatic"].skip and not rules["invoked"].skip
    assert served.served_insert(rules["automatic"], text, off, "baz", "eos") == ("", 0)


def test_stop_point():
    spot = _line_spot()
    text, off = spot.prefix + spot.suffix, len(spot.prefix)
    _, pre, suf, _, _ = served.server_window(text, off, 6000, 600)
    rules = served.direct_rules(text, off, pre, suf, "line")
    texts = ["d", "d =", "d = c", "d = c *", "d = c * 2", "d = c * 2\n", "d = c * 2\n    return"]
    raw, auto = rules["raw"], rules["automatic"]
    assert served.stop_point(texts, raw.params, raw.settle, False) == (6, "d = c * 2", "lines")
    n, cut, reason = served.stop_point(texts, auto.params, auto.settle, False)
    assert (n, cut, reason) == (7, "d = c * 2", "stop")  # settled: the next statement has started
    assert served.stop_point(texts[:5], auto.params, auto.settle, False) is None  # goes on
    assert served.stop_point(texts[:5], auto.params, auto.settle, True) == (5, "d = c * 2", "eos")
    assert served.stop_point([], auto.params, auto.settle, True) == (0, "", "eos")
    few = type(raw.params)(max_tokens=3)
    assert served.stop_point(texts, few, None, False) == (3, "d = c", "length")
    # incremental use: only the new text is checked
    assert served.stop_point(texts[:6], raw.params, None, False, start=5) == (6, "d = c * 2", "lines")


def test_doubts_in():
    starts = [0, 1, 3, 3, 8]
    probs = [0.99, 0.5, 0.3, 0.2, 0.1]
    assert served.doubts_in(starts, probs, 20) == ((1, 0.5), (3, 0.3), (8, 0.1))
    assert served.doubts_in(starts, probs, 8) == ((1, 0.5), (3, 0.3))


def test_served_insert_post_processes_as_the_session():
    spot = _line_spot()
    text, off = spot.prefix + spot.suffix, len(spot.prefix)
    _, pre, suf, _, _ = served.server_window(text, off, 6000, 600)
    rules = served.direct_rules(text, off, pre, suf, "line")
    raw = "d = c * 2\n    return d\n"  # the model re-writes the line below: post-processing cuts it
    assert served.served_insert(rules["automatic"], text, off, raw, "eos") == ("d = c * 2", 0)
    assert served.served_insert(rules["invoked"], text, off, raw, "eos") == ("d = c * 2", 0)
    assert served.served_insert(rules["raw"], text, off, "d = c * 2  ", "lines") == ("d = c * 2", 0)


def test_served_insert_doubt_cut_is_automatic_only():
    text = "def f(a, b):\n    total = a + b\n    return total\n\n\nresult = f(1, 2)\nprint(resul\n"
    off = text.index("print(resul") + len("print(resul")
    _, pre, suf, _, _ = served.server_window(text, off, 6000, 600)
    rules = served.direct_rules(text, off, pre, suf, "line")
    raw = "t, sep=', ', end='')"
    doubts = ((3, 0.2),)  # the model guessed at ", sep"
    auto = served.served_insert(rules["automatic"], text, off, raw, "eos", doubts)
    inv = served.served_insert(rules["invoked"], text, off, raw, "eos", doubts)
    assert inv[0] == raw
    assert auto[0] != raw and raw.startswith(auto[0]) and auto[0].startswith("t")


def test_wants_another_tab():
    i = SRC.index("c = a + b")
    spot = served.Spot("m.py:6", "block", SRC[:i], SRC[SRC.index("return d") + len("return d"):],
                       "c = a + b\n    d = c * 2\n    return d")
    text = spot.prefix + spot.suffix
    done = spot.prefix + spot.expected + spot.suffix
    part = spot.prefix + "c = a + b" + spot.suffix
    assert served.wants_another_tab(spot, text, part, 1, 3)
    assert not served.wants_another_tab(spot, text, part, 3, 3)  # out of Tab rounds
    assert not served.wants_another_tab(spot, text, done, 1, 3)  # the body is there
    line = served.Spot("m.py:6", "line", spot.prefix, spot.suffix, spot.expected)
    assert not served.wants_another_tab(line, text, part, 1, 3)  # lines get one answer


def test_trim_prompt():
    ids = [1000, 1, 2, 3, 4, 5, 1001, 9, 1002]
    assert served.trim_prompt(ids, 20) == ids
    assert served.trim_prompt(ids, 6) == [1000, 4, 5, 1001, 9, 1002]


@pytest.mark.parametrize("config,request_,want", [
    ("new", "automatic", "anchored FIM"), ("base", "invoked", "item 1 of 3"),
    ("direct", "automatic", "PSM, auto stop"), ("direct", "raw", "raw")])
def test_every_served_row_says_what_its_arm_got(config, request_, want):
    assert want in served.row_gets(config, request_)


class FakeLlm:
    def detokenize(self, ids: list[int]) -> bytes:
        return "".join(chr(i) for i in ids).encode()


def test_direct_run_stops_each_rule_on_one_stream():
    """One greedy stream serves every rule: each stops where the engine would, timed at its own token."""
    spot = _line_spot()
    text, off = spot.prefix + spot.suffix, len(spot.prefix)
    _, pre, suf, p, s = served.server_window(text, off, 6000, 600)
    rules = served.direct_rules(text, off, pre, suf, "line")
    out = "d = c * 2\n    return d\n"
    model = served.DirectLlama.__new__(served.DirectLlama)
    model.llm = FakeLlm()
    seen = []

    def stream(prefix, suffix, limit):
        seen.append((prefix, suffix, limit))
        for k, ch in enumerate(out):
            yield ord(ch), 0.9, float(k)
        yield None, 1.0, float(len(out))

    model.stream = stream
    got = model.run(spot, rules, (p, s), text, off)
    assert seen == [(p, s, served.prompt_limit(rules))]
    assert got["raw"] == ("d = c * 2", 0, 9.0, 10)  # stopped at the line break, the 10th token
    ins, rep, secs, n = got["automatic"]
    assert (ins, rep) == ("d = c * 2", 0) and n > 10  # settled once the next statement started
    assert got["invoked"][:2] == ("d = c * 2", 0)


def test_new_tokens():
    assert engine_bench.new_tokens([1, 2, 3], [1, 2, 3]) == 0
    assert engine_bench.new_tokens([1, 2, 3], [1, 2, 4, 5]) == 2
    assert engine_bench.new_tokens([1, 2], [1, 2, 3]) == 1
    assert engine_bench.new_tokens([9], [1, 2]) == 2



def test_llama_build_flags_only_for_the_installed_wheel(tmp_path):
    """The CMake flags llama_wheel.sh kept beside its wheel are reported only when the installed shared
    libraries are that wheel's, byte for byte (a pip-built native llama_cpp has unknown flags)."""
    import zipfile

    build = load_script("llama_build")
    kept = tmp_path / "wheels" / "llama-cpp-python-0.3.36-avx2-abcd1234"
    kept.mkdir(parents=True)
    (kept / "CMAKE_ARGS").write_text("-DGGML_NATIVE=OFF -DGGML_AVX2=ON\n")
    with zipfile.ZipFile(kept / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl", "w") as z:
        z.writestr("llama_cpp/lib/libllama.so", b"wheel bytes")
        z.writestr("llama_cpp/__init__.py", "")
    site = tmp_path / "site"
    (site / "llama_cpp" / "lib").mkdir(parents=True)
    lib = site / "llama_cpp" / "lib" / "libllama.so"
    lib.write_bytes(b"wheel bytes")
    got = build.wheel_flags(tmp_path / "wheels", "0.3.36", site)
    assert got == {"cmake_args": "-DGGML_NATIVE=OFF -DGGML_AVX2=ON",
                   "wheel": "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"}
    assert build.wheel_flags(tmp_path / "wheels", "0.3.35", site) is None  # another version
    lib.write_bytes(b"native build")
    assert build.wheel_flags(tmp_path / "wheels", "0.3.36", site) is None
    info = {"version": "0.3.36", "system_info": "AVX2 = 1", "cmake_args": "", "note": "unknown flags"}
    assert build.describe(info) == "llama-cpp-python 0.3.36 (unknown flags); llama.cpp's system info: AVX2 = 1"


def test_spread_follows_the_median_only_with_several_samples():
    detail = {"a": {"n": 3, "mean": 40.5, "min": 20.35, "max": 62.0}, "b": {"n": 1, "mean": 1.0, "min": 1.0, "max": 1.0}}
    assert engine_bench.spread(detail, "a") == " (mean 40.5, 20.35–62.0, n 3)"
    assert engine_bench.spread(detail, "b") == "" and engine_bench.spread(detail, "") == ""


def test_native_llama_build_follows_this_cpu_with_amx_off():
    """The yardstick build (issue 47) turns on exactly the instruction sets /proc/cpuinfo reports, and never
    AMX (a VM may advertise it in cpuid without granting it: ggml would die by SIGILL)."""
    r = subprocess.run(["bash", str(ROOT / "scripts" / "llama_wheel.sh"), "native-flags"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    flags = dict(f[2:].split("=", 1) for f in r.stdout.split())
    have = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")).split()
    for cpu_flag, cmake in [("avx2", "GGML_AVX2"), ("avx512f", "GGML_AVX512"), ("avx512_vnni", "GGML_AVX512_VNNI"),
                            ("avx512_bf16", "GGML_AVX512_BF16"), ("avx_vnni", "GGML_AVX_VNNI"), ("fma", "GGML_FMA")]:
        assert flags[cmake] == ("ON" if cpu_flag in have else "OFF"), (cmake, flags)
    assert flags["GGML_NATIVE"] == "OFF"
    assert {flags[k] for k in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")} == {"OFF"}, flags


def test_llama_server_spec_arguments():
    """The speculative settings bench_engine measures on llama-server become its own flags; plain has none."""
    ls = load_script("llama_server")
    assert ls.spec_args("") == []
    assert ls.spec_args("ngram-simple:2:8") == ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2",
                                                "--spec-ngram-simple-size-m", "8"]
    assert ls.spec_args("ngram-simple:4")[-3:] == ["4", "--spec-ngram-simple-size-m", "10"]
    assert ls.spec_args("ngram-mod") == ["--spec-type", "ngram-mod"]
    with pytest.raises(ValueError):
        ls.spec_args("draft-simple")


def test_every_llama_server_row_has_a_flint_row():
    assert set(engine_bench.SERVER_YARDSTICK) <= set(engine_bench.ROWS)
    assert all(v.startswith("llamaserver_") for v in engine_bench.SERVER_YARDSTICK.values())


def test_llama_server_settings_that_remember_across_requests_start_afresh():
    """ngram-mod keeps one n-gram pool for every token its slot has seen: a benchmark repeating its prompts
    would hand it the answers, so such a server is restarted before each request; prompt lookup is not."""
    ls = load_script("llama_server")
    assert ls.fresh_per_request("ngram-mod")
    assert not ls.fresh_per_request("ngram-simple:3:16") and not ls.fresh_per_request("")
