"""Positions <-> offsets. Pure functions, no LSP types.

An LSP position is (line, character) where ``character`` counts code units of the negotiated encoding
(UTF-16 unless the client offered something else). Python strings index code points, so every
conversion goes through the text of one line:

- UTF-32: one unit per code point.
- UTF-16: two units for code points above U+FFFF (emoji, rare CJK), one otherwise.
- UTF-8:  1-4 units per code point.

Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (the spec accepts all three). A ``character`` beyond the
end of its line means the end of the line (spec), and one that lands inside a code point (half a
surrogate pair, the middle of a UTF-8 sequence) rounds down to that code point's start. Combining
marks are code points of their own: positions count them and never merge them with their base.
"""

from __future__ import annotations

import enum
import re
from bisect import bisect_right
from collections.abc import Sequence

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"
ENCODINGS = (UTF8, UTF16, UTF32)

_EOL = re.compile(r"\r\n|\r|\n")
# any code point outside the Basic Multilingual Plane (two UTF-16 units each)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class PositionError(ValueError):
    """A position that does not exist in the document (line past the end, negative numbers)."""


def choose_encoding(offered: Sequence[str] | None) -> str:
    """Flint's rule (docs/protocol.md): UTF-8 when the client offers it, otherwise UTF-16, the LSP default.

    UTF-8 wins even when the client lists it after UTF-16: it is what Python's text and the tokenizer
    use, and the client said it can do it.
    """
    offered = [str(_value(e)).lower() for e in (offered or [])]
    return UTF8 if UTF8 in offered else UTF16


def encoding_name(encoding: object) -> str:
    """'utf-8' / 'utf-16' / 'utf-32' from a string or an lsprotocol PositionEncodingKind (whose str() is
    'PositionEncodingKind.Utf16', not its value). Anything unknown is UTF-16, the LSP default."""
    name = str(_value(encoding) or "").lower()
    return name if name in ENCODINGS else UTF16


def _value(kind: object) -> object:
    """An enum member's value (lsprotocol's kinds are enums), anything else as it is."""
    return kind.value if isinstance(kind, enum.Enum) else kind


def char_units(ch: str, encoding: str) -> int:
    """Code units one code point takes in ``encoding``."""
    cp = ord(ch)
    if encoding == UTF16:
        return 2 if cp > 0xFFFF else 1
    if encoding == UTF8:
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    return 1


def unit_len(text: str, encoding: str) -> int:
    """Length of ``text`` in code units of ``encoding`` (lone surrogates count as one code point)."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF16:
        return len(text) + len(_ASTRAL.findall(text))
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    raise ValueError(f"unknown position encoding {encoding!r}")


def units_to_index(line: str, character: int, encoding: str) -> int:
    """Code point index in ``line`` for ``character`` units: clamped to the line, rounded down inside a
    code point."""
    if character <= 0:
        return 0
    if encoding == UTF32 or line.isascii():
        return min(character, len(line))
    if encoding == UTF16 and not _ASTRAL.search(line):
        return min(character, len(line))
    used = 0
    for i, ch in enumerate(line):
        used += char_units(ch, encoding)
        if used > character:
            return i
    return len(line)


def line_starts(text: str) -> list[int]:
    """Offset of the first code point of every line; always at least ``[0]``."""
    starts = [0]
    starts.extend(m.end() for m in _EOL.finditer(text))
    return starts


def line_span(text: str, starts: Sequence[int], line: int) -> tuple[int, int]:
    """(start, end) offsets of ``line``'s content, without its line break."""
    start = starts[line]
    if line + 1 < len(starts):
        end = starts[line + 1] - 1
        if end > start and text[end] == "\n" and text[end - 1] == "\r":
            end -= 1
    else:
        end = len(text)
    return start, end


def position_to_offset(text: str, line: int, character: int, encoding: str = UTF16, *,
                       starts: Sequence[int] | None = None, clamp_line: bool = False) -> int:
    """Code point offset of (line, character).

    A line past the end raises PositionError, unless ``clamp_line`` (used for didChange ranges, where
    some clients address the end of the document as (lineCount, 0)): then it means the end of the text.
    """
    if starts is None:
        starts = line_starts(text)
    if line < 0 or character < 0:
        raise PositionError(f"negative position ({line}:{character})")
    if line >= len(starts):
        if clamp_line:
            return len(text)
        raise PositionError(f"line {line} is past the end of the document ({len(starts)} lines)")
    start, end = line_span(text, starts, line)
    return start + units_to_index(text[start:end], character, encoding)


def offset_to_position(text: str, offset: int, encoding: str = UTF16, *,
                       starts: Sequence[int] | None = None) -> tuple[int, int]:
    """(line, character) of a code point offset. Offsets inside a line break map to the end of the line."""
    if starts is None:
        starts = line_starts(text)
    offset = max(0, min(offset, len(text)))
    line = bisect_right(starts, offset) - 1
    start, end = line_span(text, starts, line)
    return line, unit_len(text[start:min(offset, end)], encoding)


def normalize_eol(text: str) -> str:
    """All line breaks as ``\\n`` (what the model was trained on)."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def dominant_eol(text: str, sample: int = 65536) -> str:
    """The line break the document uses (the most common one in its first ``sample`` characters)."""
    head = text[:sample]
    crlf = head.count("\r\n")
    lf = head.count("\n") - crlf
    cr = head.count("\r") - crlf
    if crlf > lf and crlf >= cr:
        return "\r\n"
    if cr > lf and cr > crlf:
        return "\r"
    return "\n"
