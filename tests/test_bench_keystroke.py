"""bench_keystroke's spots: a character of the real code typed inside a line, with the text before it and the
document after the typed region (what the replay's document holds at that keystroke)."""

from __future__ import annotations

from tests.scripts import load_script

bench_keystroke = load_script("bench_keystroke")
Segment = load_script("replay_corpus").Segment


def test_each_spot_is_a_character_inside_a_line_of_the_typed_code():
    typed = "x = 1\n    total = compute(items, key=lambda v: v.size)\n    return total + offset_value\n    y"
    seg = Segment("p:f", "python", "f.py", "def f(items):\n    ", typed, "\n\ndef g(): pass\n")
    spots = bench_keystroke.positions([seg], samples=10, seed=3)
    assert spots and len(spots) <= 30
    for prefix, ch, suffix in spots:
        assert suffix == seg.after and len(ch) == 1 and not ch.isspace()
        k = len(prefix) - len(seg.before)
        assert prefix == seg.before + typed[:k] and typed[k] == ch
        line = typed[: k].rsplit("\n", 1)[-1]
        assert line.strip(), "the spot is inside a line, after some of it"
    assert {s[1] for s in spots} <= set(typed)
    assert bench_keystroke.positions([seg], samples=10, seed=3) == spots  # seeded
    assert len(bench_keystroke.positions([seg], samples=1, seed=3)) <= 3
