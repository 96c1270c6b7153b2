"""Allowed next tokens for a name (engine/guidance/trie.py) over the built model's real tokenizer."""

import time

import numpy as np
import pytest

from engine.guidance.monitor import Trigger, TriggerKind
from engine.guidance.trie import TokenTrie, allowed_ids, continues, load_token_texts, mask

pytestmark = pytest.mark.model  # the tokenizer of the built default model


@pytest.fixture(scope="module")
def tok(model_dir):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def vocab(model_dir):
    return load_token_texts(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def trie(vocab):
    texts, special = vocab
    return TokenTrie(texts, special, n_logits=len(texts) + 64)


def ids_of(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def one(tok, text):
    ids = ids_of(tok, text)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_token_texts_decode_byte_level(vocab, tok):
    texts, special = vocab
    for s in (" foo", "\tx", "self", ".append", "(obj", ")\n", "    "):
        assert "".join(texts[i] for i in ids_of(tok, s)) == s
    eos = tok.token_to_id("<|endoftext|>")
    assert eos in special and texts[eos] == "<|endoftext|>"
    # a piece of a multi-byte character is opaque (None), the whole character decodes
    pieces = ids_of(tok, "\u6f22\u5b57\u2603")
    assert "".join(texts[i] or "?" for i in pieces) != "" and all(
        texts[i] is None or len(texts[i]) >= 1 for i in pieces)
    assert any(t is None for t in texts)


def test_continues():
    names = ("path", "pathsep", "key=")
    assert continues("pat", names) and continues("path", names) and continues("path(", names)
    assert continues("path.join", names) and continues("pathsep)", names) and continues("key=1", names)
    assert continues("paths", names)  # pathsep's beginning
    assert not continues("pathsx", names) and not continues("pathx", names) and not continues("x", names)


def test_member_start_allows_only_name_beginnings(trie, tok, vocab):
    texts, _ = vocab
    names = ("path", "pathsep", "pardir", "getcwd", "join")
    m = trie.allowed("", names, start=False)
    got = {texts[i] for i in np.flatnonzero(m)}
    assert {"path", "pa", "join", "get"} <= got
    assert all(any(n.startswith(t) for n in names) for t in got)  # nothing else: no '(', no ' foo'
    assert not m[one(tok, "(")] and not m[one(tok, " path")] and not m[tok.token_to_id("<|endoftext|>")]


def test_partial_continues_and_complete_name_may_stop(trie, tok, vocab):
    texts, _ = vocab
    names = ("path", "pathsep", "pardir")
    m = trie.allowed("pa", names, start=False)
    got = {texts[i] for i in np.flatnonzero(m)}
    assert {"th", "t", "rd", "ths"} <= got and "thx" not in got and "(" not in got
    m = trie.allowed("path", names, start=False)  # complete: a break char, or go on to pathsep
    for s in ("(", ".", ")", ",", " ", "\n", ")\n", "sep"):
        assert m[one(tok, s)], s
    assert m[one(tok, "s")]  # pathsep goes on
    assert not m[one(tok, "x")] and not m[one(tok, "q")] and not m[one(tok, "_")]
    assert m[tok.token_to_id("<|endoftext|>")]


def test_name_start_allows_leading_space_and_non_names(trie, tok):
    names = ("isinstance", "items", "None")
    m = trie.allowed("", names, start=True)
    for s in (" isinstance", " items", "items", " None", "None", " [", "[", ' "', "1", " -", "\n", " i"):
        assert m[one(tok, s)], s
    for s in (" foo", "foo", " x", "x", " it", " is"):
        if s == " is":  # isinstance's beginning
            assert m[one(tok, s)]
            continue
        assert (s == " it") == bool(m[one(tok, s)]), s


def test_glued_frees_the_word_it_extends(trie, tok):
    names = ("value",)
    m = trie.allowed("", names, start=True, glued=True)  # "return" + ...
    assert m[one(tok, "s")] and m[one(tok, " value")] and not m[one(tok, " foo")]
    assert not trie.allowed("", names, start=True)[one(tok, "s")]


def test_multi_token_name_stays_constrained_until_complete(trie, tok, vocab):
    """Spell a long name with the tokenizer's own pieces: every piece is allowed at its step; a piece that
    leaves the name is not, until the name is complete."""
    texts, _ = vocab
    target = "assertDictContainsSubset_extra"
    names = (target, "assertEqual")
    pieces = ids_of(tok, target)
    assert len(pieces) >= 3
    written = ""
    for i, p in enumerate(pieces):
        m = trie.allowed(written, names, start=False)
        assert m is not None and m[p], (written, texts[p])
        if i:
            assert not m[one(tok, "(")], written  # not complete yet: the call cannot start
        written += texts[p]
    assert written == target
    m = trie.allowed(written, names, start=False)
    assert m[one(tok, "(")] and not m[one(tok, "x")]


def test_candidate_ending_in_a_break_char(trie, tok):
    m = trie.allowed("ke", ("key=", "keys"), start=False)
    assert m[one(tok, "y")] and not m[one(tok, "x")]
    m = trie.allowed("key", ("key=",), start=False)
    assert m[one(tok, "=")] and m[one(tok, "=(")] if len(ids_of(tok, "=(")) == 1 else m[one(tok, "=")]
    assert not m[one(tok, "(")]


def test_no_fitting_candidate_is_no_opinion(trie):
    assert trie.allowed("zz", ("path", "join")) is None
    assert trie.allowed("", ()) is None


def test_for_trigger_maps_member_and_name(trie, tok):
    names = ("append",)
    member = trie.for_trigger(Trigger(TriggerKind.MEMBER, "", 4), names)
    name = trie.for_trigger(Trigger(TriggerKind.NAME, "", 4), names)
    assert not member[one(tok, "[")] and name[one(tok, "[")]
    assert member[one(tok, "append")] and name[one(tok, " append")]


def test_allowed_for_200_candidates_is_fast(trie):
    import builtins
    import keyword

    cands = tuple(sorted(set(dir(builtins)) | set(keyword.kwlist) | {f"name_{i}" for i in range(60)}))[:200]
    assert len(cands) == 200
    best = {}
    for partial in ("", "is", "name_1"):
        times = []
        for _ in range(5):
            trie._cache.clear()
            t0 = time.perf_counter()
            m = trie.allowed(partial, cands, start=True)
            times.append(time.perf_counter() - t0)
        assert m is not None
        best[partial] = min(times) * 1000
    print("allowed() ms for 200 candidates:", {k: round(v, 3) for k, v in best.items()})
    assert max(best.values()) < 10.0  # ~0.6 ms measured; a forward step is ~20 ms
    cached = []
    for _ in range(5):
        t0 = time.perf_counter()
        trie.allowed("", cands, start=True)
        cached.append(time.perf_counter() - t0)
    assert min(cached) * 1000 < best[""]  # the same question again is a cache hit


def test_mask_hard_soft_rows_and_width(trie, tok):
    rng = np.random.default_rng(0)
    n = trie.n - 64
    logits = rng.normal(size=n).astype(np.float32)
    allowed = trie.allowed("", ("append", "extend"), start=False)
    target = one(tok, "append")
    logits[target] = -5.0
    logits[one(tok, "(")] = 9.0
    hard = mask(logits, allowed)
    assert hard.shape == logits.shape and hard.dtype == np.float32
    assert int(np.argmax(hard)) in allowed_ids(allowed) and np.isneginf(hard[one(tok, "(")])
    assert logits[one(tok, "(")] == 9.0  # not in place
    soft = mask(logits, allowed, bonus=20.0)
    assert soft[target] == pytest.approx(15.0) and soft[one(tok, "(")] == pytest.approx(9.0)
    rows = np.stack([logits, logits])
    per_row = np.stack([allowed, np.ones_like(allowed)])
    out = mask(rows, per_row)
    assert np.isneginf(out[0, one(tok, "(")]) and out[1, one(tok, "(")] == 9.0
    wide = np.concatenate([logits, np.full(200, 50.0, dtype=np.float32)])  # a head wider than the mask
    assert np.isneginf(mask(wide, allowed)[-1])
    assert mask(logits, None) is logits or np.array_equal(mask(logits, None), logits)
