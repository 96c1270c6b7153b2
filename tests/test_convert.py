"""Positions <-> offsets for any text, in every encoding (hypothesis), plus the cases editors get wrong."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server import convert
from lsp_server.convert import UTF8, UTF16, UTF32, PositionError
from lsp_server.documents import Change, DocumentStore

# Text made of the characters that break position code: line breaks of all kinds, emoji (astral, 2 UTF-16
# units, 4 UTF-8 bytes), CJK (3 UTF-8 bytes), combining marks, ZWJ sequences, plus anything else.
TRICKY = ["\n", "\r\n", "\r", "a", " ", "\t", "é", "e\u0301", "漢", "字", "😀", "👩\u200d💻", "\U0001f1fa\U0001f1f8",
          "\u0000", "\ufeff", "ß", "Ω", "\U00010348"]
texts = st.lists(st.one_of(st.sampled_from(TRICKY), st.characters(exclude_categories=("Cs",))),
                 max_size=60).map("".join)
encodings = st.sampled_from([UTF8, UTF16, UTF32])


def valid_offsets(text: str) -> list[int]:
    """Offsets a position can name: all but the middle of a CRLF."""
    return [o for o in range(len(text) + 1) if not (0 < o < len(text) and text[o - 1] == "\r" and text[o] == "\n")]


@settings(max_examples=300, deadline=None)
@given(texts, encodings, st.data())
def test_offset_position_round_trip(text, enc, data):
    offs = valid_offsets(text)
    o = data.draw(st.sampled_from(offs))
    line, char = convert.offset_to_position(text, o, enc)
    assert convert.position_to_offset(text, line, char, enc) == o


@settings(max_examples=300, deadline=None)
@given(texts, encodings)
def test_every_position_of_every_line_round_trips(text, enc):
    starts = convert.line_starts(text)
    for line in range(len(starts)):
        start, end = convert.line_span(text, starts, line)
        content = text[start:end]
        assert "\n" not in content and "\r" not in content
        col = 0
        for i, ch in enumerate(content + "\0"):  # the sentinel stands for the end of the line
            assert convert.position_to_offset(text, line, col, enc, starts=starts) == start + i
            assert convert.offset_to_position(text, start + i, enc, starts=starts) == (line, col)
            col += convert.char_units(ch, enc)


@settings(max_examples=200, deadline=None)
@given(texts, encodings, st.integers(0, 80), st.integers(0, 500))
def test_any_position_lands_inside_its_line(text, enc, line, char):
    starts = convert.line_starts(text)
    if line >= len(starts):
        with pytest.raises(PositionError):
            convert.position_to_offset(text, line, char, enc)
        assert convert.position_to_offset(text, line, char, enc, clamp_line=True) == len(text)
        return
    start, end = convert.line_span(text, starts, line)
    o = convert.position_to_offset(text, line, char, enc)
    assert start <= o <= end
    # never more units than asked for (rounding down inside a code point, clamping at the end)
    assert convert.unit_len(text[start:o], enc) <= char


@settings(max_examples=200, deadline=None)
@given(texts)
def test_unit_lengths_match_the_real_encodings(text):
    assert convert.unit_len(text, UTF8) == len(text.encode("utf-8"))
    assert convert.unit_len(text, UTF16) == len(text.encode("utf-16-le")) // 2
    assert convert.unit_len(text, UTF32) == len(text)


def test_line_starts_count_all_three_line_breaks():
    assert convert.line_starts("a\nb\r\nc\rd") == [0, 2, 5, 7]
    assert convert.line_starts("") == [0]
    assert convert.line_starts("\r\n") == [0, 2]


def test_emoji_in_each_encoding():
    text = "x = '😀' + y"
    o = text.index("+")
    assert o == 8
    assert convert.offset_to_position(text, o, UTF16) == (0, 9)  # the emoji is 2 UTF-16 units
    assert convert.offset_to_position(text, o, UTF8) == (0, 11)  # and 4 UTF-8 bytes
    assert convert.offset_to_position(text, o, UTF32) == (0, 8)
    for enc, col in ((UTF16, 9), (UTF8, 11), (UTF32, 8)):
        assert convert.position_to_offset(text, 0, col, enc) == o


def test_inside_a_code_point_rounds_down():
    text = "😀a"
    assert convert.position_to_offset(text, 0, 1, UTF16) == 0  # half a surrogate pair
    assert convert.position_to_offset(text, 0, 3, UTF8) == 0  # inside the 4-byte sequence
    assert convert.position_to_offset(text, 0, 4, UTF8) == 1


def test_crlf_positions_ignore_the_cr():
    text = "ab\r\ncd"
    assert convert.position_to_offset(text, 0, 99, UTF16) == 2  # end of line 0, before \r
    assert convert.offset_to_position(text, 3, UTF16) == (0, 2)  # between \r and \n: end of line
    assert convert.position_to_offset(text, 1, 1, UTF16) == 5


def test_cjk_and_combining():
    text = "名前 = 'e\u0301'"
    # é as e + combining acute is two code points: both count
    o = text.index("'") + 3
    assert o == 8
    assert convert.offset_to_position(text, o, UTF16) == (0, 8)
    assert convert.offset_to_position(text, o, UTF8) == (0, 13)  # CJK: 3 bytes each, the mark 2


def test_choose_encoding():
    assert convert.choose_encoding(None) == UTF16
    assert convert.choose_encoding([]) == UTF16
    assert convert.choose_encoding(["utf-16", "utf-8"]) == UTF8
    assert convert.choose_encoding(["utf-32"]) == UTF16


def test_encoding_name_accepts_lsprotocol_enums():
    from lsprotocol.types import PositionEncodingKind

    assert convert.encoding_name(PositionEncodingKind.Utf16) == UTF16
    assert convert.encoding_name(PositionEncodingKind.Utf8) == UTF8
    assert convert.encoding_name("utf-32") == UTF32
    assert convert.encoding_name(None) == UTF16 and convert.encoding_name("latin-1") == UTF16


def test_eol_helpers():
    assert convert.normalize_eol("a\r\nb\rc\n") == "a\nb\nc\n"
    assert convert.dominant_eol("a\r\nb\r\nc\n") == "\r\n"
    assert convert.dominant_eol("a\nb") == "\n"


# --- incremental sync: any sequence of edits gives the same text as applying them to a plain string ---


@settings(max_examples=200, deadline=None)
@given(texts, encodings, st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 10 ** 6), texts),
                                  min_size=1, max_size=8))
def test_incremental_changes_match_splicing(text, enc, edits):
    store = DocumentStore()
    store.open("file:///t", text, 1)
    expected = text
    version = 1
    for a, b, new in edits:
        offs = valid_offsets(expected)
        a, b = sorted((offs[a % len(offs)], offs[b % len(offs)]))
        sl, sc = convert.offset_to_position(expected, a, enc)
        el, ec = convert.offset_to_position(expected, b, enc)
        version += 1
        doc = store.change("file:///t", version, [Change(new, (sl, sc, el, ec))], enc)
        expected = expected[:a] + new + expected[b:]
        assert doc.text == expected
        # the line index patched in place must equal a fresh scan
        assert doc.starts == convert.line_starts(expected)


def test_change_versions_and_revisions():
    store = DocumentStore()
    d = store.open("file:///a", "x", 1)
    r0 = d.revision
    store.change("file:///a", 2, [Change("y", (0, 0, 0, 1))], UTF16)
    assert store.revision("file:///a") > r0
    # an out-of-order version is applied in arrival order, and still moves the revision
    r1 = store.revision("file:///a")
    store.change("file:///a", 1, [Change("z", None)], UTF16)
    assert store.get("file:///a").text == "z" and store.revision("file:///a") > r1
    store.close("file:///a")
    assert store.revision("file:///a") is None


@given(st.text(max_size=60), st.text(max_size=60), st.integers(0, 60), st.integers(0, 60))
def test_a_whole_text_replacement_puts_the_cursor_after_the_span_that_differs(a, inserted, i, j):
    from lsp_server.documents import edit_end

    i, j = sorted((min(i, len(a)), min(j, len(a))))
    new = a[:i] + inserted + a[j:]
    end = edit_end(a, new)
    if new == a:
        assert end is None
    else:
        # the texts agree after the cursor, and the cursor is past the first character where they differ
        assert end is not None and new[end:] == a[len(a) - (len(new) - end):]
        first = next((k for k in range(min(len(a), len(new))) if a[k] != new[k]), min(len(a), len(new)))
        assert first <= end


def test_whole_text_replacement_cursor_examples():
    from lsp_server.documents import edit_end

    assert edit_end("def f():\n    \n", "def f():\n    x = 1\n") == len("def f():\n    x = 1")
    assert edit_end("abc", "abc") is None
    assert edit_end("abcdef", "abef") == 2  # a deletion: the cursor where the text was
