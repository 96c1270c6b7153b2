from engine.prompt import Fim, PrefixIndex, build_prompt, clip_window, safe_decode, should_heal


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
