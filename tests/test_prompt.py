import pytest

from engine.decoding.prompt import Fim, build_prompt, should_heal
from engine.decoding.tokenizer import PrefixIndex, safe_decode
from engine.text.window import clip_window, header_start, sticky_cut


class ByteTok:
    """A tiny byte-level tokenizer (one token per byte, plus specials and a few merges) for pure tests."""

    specials = {"<P>": 300, "<S>": 301, "<M>": 302}
    merges = {b"re": 256, b"return": 257, b"  ": 258}

    def __init__(self):
        self.vocab = {i: bytes([i]) for i in range(256)}
        for b, i in self.merges.items():
            self.vocab[i] = b
        for s, i in self.specials.items():
            self.vocab[i] = s.encode()

    @property
    def vocab_size(self):
        return 303

    def encode(self, text):
        data = text.encode()
        out, i = [], 0
        while i < len(data):
            for m in sorted(self.merges, key=len, reverse=True):
                if data.startswith(m, i):
                    out.append(self.merges[m])
                    i += len(m)
                    break
            else:
                out.append(data[i])
                i += 1
        return out

    def decode_bytes(self, ids):
        return b"".join(self.vocab[i] for i in ids)

    def token_bytes(self, i):
        return self.vocab[i]

    def special_id(self, text):
        return self.specials.get(text)


FIM = Fim("<P>", "<S>", "<M>")


def test_fim_prompt_order_is_prefix_suffix_middle():
    t = ByteTok()
    p = build_prompt(t, "x = ", "\ny", FIM, heal=False)
    assert p.ids[0] == 300 and p.ids[-1] == 302
    assert t.decode_bytes(p.ids) == b"<P>x = <S>\ny<M>"
    assert p.heal == b""


def test_token_healing_backs_off_the_partial_word():
    t = ByteTok()
    p = build_prompt(t, "    re", "", FIM)
    assert p.heal == b"re"
    assert t.decode_bytes(p.ids) == b"<P>    <S><M>"
    # after whitespace nothing is healed
    assert build_prompt(t, "x = 1\n", "", FIM).heal == b""


def test_prefix_only_prompt_with_bos():
    t = ByteTok()
    p = build_prompt(t, "ab", "ignored", None, bos_id=2, heal=False)
    assert p.ids == [2, ord("a"), ord("b")]


def test_prefix_index_finds_extensions():
    idx = PrefixIndex([b"a", b"re", b"return", b"rest", b"x"])
    assert sorted(idx.starting_with(b"re")) == [1, 2, 3]
    assert idx.starting_with(b"zz") == []


def test_clip_window_keeps_text_nearest_the_cursor():
    pre = "".join(f"line{i}\n" for i in range(100))
    suf = "".join(f"after{i}\n" for i in range(100))
    p, s = clip_window(pre, suf, 50, 30)
    assert pre.endswith(p) and len(p) <= 50 and p.startswith("line")
    assert suf.startswith(s) and len(s) <= 30 and s.endswith("\n")


def test_should_heal():
    assert should_heal("foo.ba") and not should_heal("x ") and not should_heal("")


def test_safe_decode_holds_back_partial_utf8():
    data = "é€".encode()
    assert safe_decode(data[:-1]) == "é"
    assert safe_decode(data) == "é€"


# ---- anchored FIM: text typed since the anchor goes after the middle token -----------------------------
from engine.decoding.prompt import Healer, choose_anchor  # noqa: E402


def test_anchored_prompt_puts_the_typed_line_after_the_middle_token_and_heals_its_last_token():
    t = ByteTok()
    pre = "def f():\n    return x +"
    p = build_prompt(t, pre, "\nnext", FIM, anchor=pre.index("    return"))
    assert t.decode_bytes(p.ids) == b"<P>def f():\n<S>\nnext<M>    return x "
    assert p.heal == b"+"
    # after whitespace too: the trailing space is backed off (the next word's token absorbs it)
    p = build_prompt(t, "a\nx = ", "", FIM, anchor=2)
    assert t.decode_bytes(p.ids) + p.heal == b"<P>a\n<S><M>x = "
    assert p.heal == b" "
    # the cursor on the anchor: nothing to heal
    p = build_prompt(t, "a\n", "", FIM, anchor=2)
    assert t.decode_bytes(p.ids) == b"<P>a\n<S><M>" and p.heal == b""


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_typing_only_appends_to_an_anchored_prompt():
    """A keystroke never re-runs the suffix: at most the last token(s) the tokenizer merges change."""
    t = ByteTok()
    text = "import os\n\ndef main():\n    for arg in argv:\n        print(arg)\n"
    suffix = "\nmain()\n"
    for fresh in (0, 480):  # a new anchor at the cursor's line, or 480 characters back
        prev = None
        last: list[int] = []
        anchors = set()
        for i in range(text.index("def"), len(text)):
            pre = text[:i]
            a, _ = choose_anchor(pre, suffix, prev, fresh_middle=fresh)
            p = build_prompt(t, pre, suffix, FIM, anchor=a, heal=False)
            if last:
                assert _shared(last, p.ids) >= max(last.index(302) + 1, len(last) - 1), f"keystroke {i}"
            last, prev = p.ids, (pre[:a], suffix)
            anchors.add(a)
        assert anchors == {text.index("def")}  # one anchor for the whole function (typed from a line's start)


def test_choose_anchor_keeps_the_previous_anchor_while_the_prompt_extends_it():
    pre = "a\nbb\ncc"
    assert choose_anchor(pre, "S", None, fresh_middle=0) == (pre.rindex("\n") + 1, "S")
    assert choose_anchor(pre, "S", None) == (0, "S")  # shorter than the fresh middle: all of it after the anchor
    assert choose_anchor(pre + "\n  ", "S", None) == (len(pre) + 1, "S")  # a blank line: the cursor's line
    assert choose_anchor(pre + "c\ndd", "S", (pre[:5], "S")) == (5, "S")  # same slot, same suffix: kept
    assert choose_anchor(pre + "c\ndd", "T", (pre[:5], "S"), fresh_middle=0) == (len(pre + "c\n"), "T")  # new suffix
    # the editor auto-closed a bracket after the cursor: the prompt keeps its suffix
    assert choose_anchor(pre + "c(", ")S", (pre[:5], "S")) == (5, "S")
    assert choose_anchor(pre + "c(", "x)S", (pre[:5], "S"), fresh_middle=0) == (5, "x)S")  # not a closer: new
    assert choose_anchor("a\nb", "S", ("a\nbb\n", "S"), fresh_middle=0) == (2, "S")  # deleted back past it
    long = "x" * 1000
    assert choose_anchor("a\n" + long, "", ("a\n", ""), max_middle=100) == (1002 - 50, "")  # middle too long
    assert choose_anchor(long, "", None, max_middle=100) == (1000 - 50, "")  # one long line: inside it


def test_a_new_anchor_leaves_the_fresh_middle_after_it_at_a_line_start():
    lines = [f"line {i:03d} " + "x" * 40 for i in range(100)]  # 49 characters + a line break each
    pre = "\n".join(lines) + "\n    y = "
    a, _ = choose_anchor(pre, "S", None, max_middle=1440, fresh_middle=480)
    assert a == 0 or pre[a - 1] == "\n"  # a line start
    assert 480 <= len(pre) - a < 480 + 50  # at least the fresh middle, less than one more line
    # typing on keeps it until the middle passes max_middle, then a new one is 480 back again
    assert choose_anchor(pre + "z" * 900, "S", (pre[:a], "S"), max_middle=1440, fresh_middle=480)[0] == a
    typed = pre + "z\n" * 500 + "w"
    b, _ = choose_anchor(typed, "S", (pre[:a], "S"), max_middle=1440, fresh_middle=480)
    assert b > a and typed[b - 1] == "\n" and 480 <= len(typed) - b <= 482


def test_healer_allows_tokens_that_cover_or_start_the_healed_bytes():
    toks = [b"\n", b"\n  ", b"\n    ", b"\n    return", b"  ", b"x", b"<|fim_middle|>"]
    idx = PrefixIndex(toks, skip={6})
    h = Healer(idx, b"\n    ")
    assert sorted(h.allowed(b"")) == [0, 1, 2, 3]  # "\n" and "\n  " start it; the others cover it
    assert sorted(h.allowed(b"\n  ")) == [4]  # two spaces left
    assert h.allowed(b"\n    ") is None  # covered: healing is done
    assert Healer(idx, b"<|fim").allowed(b"") == []  # special tokens never heal text


@pytest.mark.model
def test_token_byte_table_matches_the_byte_level_mapping_of_every_token(model_dir):
    """The table is built with str.translate for speed; each entry must equal the GPT-2 byte mapping applied
    character by character."""
    from engine.decoding.tokenizer import HFTokenizer

    tk = HFTokenizer(str(model_dir / "tokenizer.json"))
    assert tk.byte_level
    table = tk._token_bytes
    added = set(tk.special_ids())
    checked = 0
    for s, i in tk.tk.get_vocab(with_added_tokens=True).items():
        if i in added or i >= len(table):
            continue
        assert all(c in tk._byte_decoder for c in s), s
        assert table[i] == bytes(tk._byte_decoder[c] for c in s), (i, s)
        checked += 1
    assert checked > 150_000
    # a multi-byte character split over tokens joins back into the text
    text = "naïve façade → 日本語 ✓"
    assert tk.decode_bytes(tk.encode(text)).decode("utf-8") == text
    # a character outside the byte-level alphabet takes the general path instead of a wrong byte
    assert " ".translate(tk._byte_table) == "\u0100"


def test_byte_level_vocabularies_are_told_from_sentencepiece_ones(tmp_path):
    from tokenizers import Tokenizer, decoders, models

    from engine.decoding.tokenizer import HFTokenizer

    for dec, expected in ((decoders.ByteLevel(), True),
                          (decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]), False),
                          (decoders.Sequence([decoders.ByteLevel()]), True)):
        tk = Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>"))
        tk.decoder = dec
        path = tmp_path / "tokenizer.json"
        tk.save(str(path))
        assert HFTokenizer(str(path)).byte_level is expected, dec


# ---- repository context block in front of the file window ----------------------------------------------
from engine.decoding.layout import context_ids  # noqa: E402


class RepoTok(ByteTok):
    specials = {**ByteTok.specials, "<|repo_name|>": 303, "<|file_sep|>": 304}
    vocab_size = 305  # type: ignore[assignment]


class _C:
    def __init__(self, path, text):
        self.path, self.text = path, text


def test_context_block_uses_the_repository_format_and_goes_first_after_bos():
    t = RepoTok()
    ctx = context_ids(t, "proj", [_C("pkg/a.py", "def f(x):\n    ...")], "pkg/b.py")
    assert t.decode_bytes(ctx) == b"<|repo_name|>proj\n<|file_sep|>pkg/a.py\ndef f(x):\n    ...\n<|file_sep|>pkg/b.py\n"
    pre = "import a\nf("
    p = build_prompt(t, pre, "\n", FIM, bos_id=7, anchor=pre.index("f("), context=ctx)
    assert p.ids[: 1 + len(ctx)] == [7] + ctx and p.head == len(ctx) + 2
    # the rest is exactly the prompt without context
    q = build_prompt(t, pre, "\n", FIM, bos_id=7, anchor=pre.index("f("))
    assert p.ids[1 + len(ctx):] == q.ids[1:] and p.heal == q.heal and q.head == 2


def test_context_block_is_empty_without_repository_markers_and_chunks_encode_independently():
    assert context_ids(ByteTok(), "proj", [_C("a.py", "x = 1\n")], "b.py") == []
    t = RepoTok()
    one = context_ids(t, "r", [_C("a.py", "x = 1\n")], "c.py")
    two = context_ids(t, "r", [_C("a.py", "x = 1\n"), _C("b.py", "y = 2\n")], "c.py")
    # a chunk appended after the kept ones leaves the earlier ids (their KV) as they were
    assert two[: len(one) - len(t.encode("c.py\n")) - 1] == one[: len(one) - len(t.encode("c.py\n")) - 1]


# ---- the comments layout: chunks as comments at the start of the FIM prefix ----------------------------
from engine.decoding.layout import comment_ids, comment_mark, comment_text  # noqa: E402


def test_a_chunk_renders_as_comments_with_its_path_and_a_blank_line_after():
    c = _C("pkg/a.py", "def f(x):\n\n    \n    return x\n")
    assert comment_text(c) == "# Path: pkg/a.py\n# def f(x):\n#\n#\n#     return x\n\n"
    # no final line break: the last line is still ended, so the next text starts a line
    assert comment_text(_C("a.ts", "let x = 1"), "//") == "// Path: a.ts\n// let x = 1\n\n"
    assert comment_text(_C("w.py", "x = 1\r\n"), "#") == "# Path: w.py\n# x = 1\r\n\n"


def test_the_comment_mark_follows_the_current_file():
    assert [comment_mark(p) for p in ("a/b.py", "x.ts", "m.go", "lib.rs", "A.java", "q.sql", "run.sh",
                                      "Makefile", "no_ext", "dir.d/file")] == \
        ["#", "//", "//", "//", "//", "--", "#", "#", "#", "#"]
    t = ByteTok()
    chunks = [_C("util.py", "def f():\n    pass\n")]
    # the comments sit in the current file's text: its syntax, whatever the chunk's file is
    assert t.decode_bytes(comment_ids(t, chunks, "src/app.tsx")).startswith(b"// Path: util.py\n// def f():")
    assert t.decode_bytes(comment_ids(t, chunks, "app.py")).startswith(b"# Path: util.py\n# def f():")


def test_comment_chunks_encode_on_their_own():
    t = RepoTok()
    a, b = _C("a.py", "x = 1\n"), _C("b.py", "y = 2")
    one, two = comment_ids(t, [a], "c.py"), comment_ids(t, [a, b], "c.py")
    assert two[: len(one)] == one and two[len(one):] == t.encode(comment_text(b))  # a kept chunk keeps its KV
    assert t.decode_bytes(two).endswith(b"# y = 2\n\n")


def test_the_comments_layout_goes_after_the_fim_prefix_token_and_the_head_covers_it():
    t = RepoTok()
    ctx = comment_ids(t, [_C("pkg/a.py", "def f(x):\n    ...\n")], "pkg/b.py")
    pre = "import a\nb = 1\nf("
    for anchor in (pre.index("f("), None):
        p = build_prompt(t, pre, "\n", FIM, bos_id=7, anchor=anchor, context=ctx, layout="comments")
        q = build_prompt(t, pre, "\n", FIM, bos_id=7, anchor=anchor)
        assert p.ids[:2] == [7, 300] and p.ids[2: 2 + len(ctx)] == ctx and p.head == 2 + len(ctx)
        # the file text's ids are those of the prompt without the block (the block only inserted)
        assert p.ids[p.head:] == q.ids[2:] and (p.heal, q.head) == (q.heal, 2)
        assert t.decode_bytes(p.ids[p.head:]).startswith(b"import a\n")
    # a window cut as Engine.build makes it keeps BOS, the FIM prefix token and the whole block
    cut = p.ids[: p.head] + p.ids[p.head + 3:]
    assert cut[: p.head] == [7, 300] + ctx and t.decode_bytes(cut[p.head:]).startswith(b"ort a\n")
    # a keystroke's prompt shares the block with the one before (the KV of both is reused)
    k1 = build_prompt(t, pre, "\n", FIM, bos_id=7, anchor=pre.index("f("), context=ctx, layout="comments")
    k2 = build_prompt(t, pre + "x", "\n", FIM, bos_id=7, anchor=pre.index("f("), context=ctx, layout="comments")
    assert k2.ids[: len(k1.ids)] == k1.ids and k1.ids[: k1.head] == k2.ids[: k2.head]
    # prefix-only models: the block first after BOS
    p = build_prompt(t, "ab", "", None, bos_id=7, heal=False, context=ctx, layout="comments")
    assert p.ids == [7] + ctx + [ord("a"), ord("b")] and p.head == 1 + len(ctx)


def test_an_indented_empty_line_heals_only_its_last_blank():
    """`        x` tokenizes as `       ` + ` x`: healing the whole indentation let the model choose a blank
    run no text has and then write blanks until its limit (bench_context: 10 of 32 lines)."""
    t = ByteTok()
    pre = "def f():\n    x = 1\n        "
    p = build_prompt(t, pre, "\n    return x\n", FIM, anchor=pre.rindex("\n") + 1)
    assert p.heal == b" "
    assert t.decode_bytes(p.ids).endswith(b"<M>       ")
    p = build_prompt(t, "a\n\t\t", "", FIM, anchor=2)
    assert (p.heal, t.decode_bytes(p.ids)) == (b"\t", b"<P>a\n<S><M>\t")


def test_a_sticky_window_keeps_its_start_for_its_slack_from_wherever_it_was_made():
    text = "".join(f"line {i:03d} = {i}\n" for i in range(100))
    for first in range(0, 128, 37):  # whichever keystroke first made the window
        pre = text + "x" * first
        cut = sticky_cut(pre, 400, 300, None)
        assert cut > 0 and pre[cut - 1] == "\n" and len(pre) - cut <= 400
        head = pre[cut:cut + 60]
        for typed in range(1, 250):  # typing on keeps the start (its KV) while within the slack
            assert sticky_cut(pre + "y" * typed, 400, 300, head) == cut
        later = pre + "y" * 400  # beyond the slack: a new start near the cursor
        assert sticky_cut(later, 400, 300, head) > cut
    assert sticky_cut("short\nfile", 400, 300, None) == 0
    fresh = sticky_cut("a\n" * 300, 400, 300, "zzz")  # a head no longer there: a fresh cut near the cursor
    assert 600 - 400 <= fresh <= 600 - 300 and fresh % 2 == 0


def test_a_short_window_reaches_back_for_the_definition_the_cursor_is_in():
    doc = "    \"\"\"" + "    A long docstring line.\n" * 60 + "    \"\"\"\n"
    src = "import os\n\n\ndef reduceby(key, binop, seq):\n" + doc + "    if key:\n        "
    start = src.index("def reduceby")
    assert header_start(src) == start
    assert sticky_cut(src, 400, 300, None, reach=2400) == start  # the signature, not the docstring's middle
    cut = sticky_cut(src, 400, 300, None, reach=800)  # too far: the plain window
    assert cut > start and len(src) - cut <= 400
    head = src[start:start + 60]
    assert sticky_cut(src + "return x", 400, 300, head, reach=2400) == start  # and it stays while typing
    assert header_start(src[: src.rindex("    if key")]) == start  # at the start of the body's first line
    method = "class A:\n    def m(self, a):\n        for i in a:\n            "
    assert header_start(method) == method.index("    def m")


@pytest.mark.model
def test_a_long_text_encoded_again_comes_from_memory_as_the_same_ids(model_dir):
    """Prompt building encodes the same prefix slot for every KV row it tries and at every keystroke while
    the anchor stays: the ids come from memory, equal to the tokenizer's, and a caller's list is its own."""
    from engine.decoding.tokenizer import HFTokenizer

    tk = HFTokenizer(str(model_dir / "tokenizer.json"))
    texts = [f"def f{i}(x):\n    return x * {i}  # a line long enough to be kept in memory\n" for i in range(40)]
    first = [tk.encode(t) for t in texts]
    assert all(ids == tk.tk.encode(t, add_special_tokens=False).ids for ids, t in zip(first, texts, strict=True))
    again = tk.encode(texts[-1])
    assert again == first[-1]
    again.append(-1)  # the caller's list: memory keeps its own
    assert tk.encode(texts[-1]) == first[-1]
    assert len(tk._encoded) <= tk.ENCODED_KEPT
    assert tk.encode(texts[0]) == first[0]  # fell out of memory: encoded again, the same
