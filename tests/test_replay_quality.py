"""scripts/replay_quality.py: the replay's per-language judges of the ghosts shown (mid-statement ends,
repeats of the code below), from a run's record."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from replay_quality import ends_mid, ghost_states, quality, repeats_below  # noqa: E402

JS = "function f(a) {\n  const x = "


@dataclass
class Seg:
    language: str
    before: str
    typed: str
    after: str


@dataclass
class K:
    segment: str
    at: int
    ghost: str | None


def test_a_ghost_leaving_a_call_open_ends_mid_statement_and_a_whole_one_does_not():
    assert ends_mid("javascript", JS, "\n}\n", "foo(a,") is True
    assert ends_mid("javascript", JS, "\n}\n", "foo(a);") is False
    assert ends_mid("go", "func f() {\n\tx := ", "\n}\n", "a +") is True
    assert ends_mid("javascript", JS, "\n}\n", "x" * 200) is None  # clipped by the record: not judged


def test_a_ghost_closing_the_block_whose_brace_is_below_repeats_it():
    prefix = "function f(a) {\n  g(a);\n  "
    assert repeats_below("javascript", prefix, "\n}\n", "return a;\n}") is True
    assert repeats_below("javascript", prefix, "\n}\n", "return a;") is False
    # a block the ghost opens and closes itself is no repeat
    assert repeats_below("javascript", prefix, "\n}\n", "if (a) {\n    g(a);\n  }") is False


def test_a_ghost_writing_the_next_line_again_repeats_it():
    prefix = "def f(a):\n    "
    assert repeats_below("python", prefix, "\n    return a + 1\n", "a = a * 2\n    return a + 1") is True
    assert repeats_below("python", prefix, "\n    return a + 1\n", "a = a * 2") is False


def test_ghost_states_are_distinct_and_read_at_the_state_before_the_key():
    seg = Seg("javascript", JS, "foo(a);", "\n}\n")
    keys = [K("s", 1, None), K("s", 2, "o(a,"), K("s", 3, "o(a,"), K("s", 4, "(a);")]
    states = ghost_states(keys, {"s": seg})
    assert [(p[len(JS):], g) for _, p, _, g in states] == [("f", "o(a,"), ("fo", "o(a,"), ("foo", "(a);")]
    q = quality(keys, {"s": seg})
    assert q["ghosts"] == 3 and q["ends_mid_statement"] == 2 and q["repeats_following"] == 0


@dataclass
class KG:
    segment: str
    at: int
    ghost: str | None
    ghost_right: bool | None = None
    saved: int = 0


def test_gate_effects_count_keys_savings_and_wrong_ghosts_where_a_gate_holds():
    from replay_quality import gate_effects

    seg = Seg("javascript", "function f(a) {\n  ", "// note\n  g(a);", "\n}\n")
    keys = [KG("s", 1, None), KG("s", 2, "x", False), KG("s", 3, "note", False), KG("s", 7, "note", True, 4),
            KG("s", 8, None), KG("s", 11, "g(a);", True, 5)]
    eff = gate_effects(keys, {"s": seg})
    # states after "/", "//", "// " are in the comment; the accept at "// " saved 4 there
    assert eff["comment"]["keys"] >= 2 and eff["comment"]["chars_saved"] == 4
    assert eff["comment"]["wrong_ghost_keys"] == 1
    assert eff["after_block"] == {"keys": 0, "chars_saved": 0, "wrong_ghost_keys": 0}


def test_the_rest_of_a_word_being_typed_is_no_mid_statement_end():
    assert ends_mid("javascript", JS + "if (isFunct", "\n}\n", "ion") is False
    assert ends_mid("javascript", JS + "if (isFunction", "\n}\n", "(a) &&") is True
