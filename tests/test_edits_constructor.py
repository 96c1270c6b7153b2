"""A class's constructor changed (engine/edits/constructor.py): an ``__init__`` parameter or a dataclass-like
field, and the edits its calls ``C(...)`` get."""

from __future__ import annotations

import time

from engine.edits.callsites import last_signature_change
from engine.edits.common import apply_all
from engine.edits.constructor import field_change
from engine.edits.exact import exact_next_edits
from engine.edits.fill import fill_prompt
from engine.edits.history import EditHistory
from lsp_server.nextedit.parts import signature_of

SRC = '''from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple


@dataclass
class Point:
    x: int
    y: int
    count: ClassVar[int] = 0
    cache: dict = field(init=False)


class Pair(NamedTuple):
    left: str
    right: str


class Client:
    def __init__(self, host, port):
        self.host, self.port = host, port


def make():
    p = Point(1, 2)
    q = Point(x=3, y=4)
    pair = Pair("a", "b")
    c = Client("localhost", 80)
    return p, q, pair, c, Client(host="h", port=1)
'''


def _history(src: str, old: str, new: str) -> tuple[str, list]:
    at = src.index(old)
    h = EditHistory()
    h.open("d", src)
    h.change("d", at, at + len(old), new, now=0.0)
    return h.text("d"), h.edits("d")


def _next(src: str, old: str, new: str, analyser) -> tuple[str, list]:
    after, edits = _history(src, old, new)
    return after, exact_next_edits(after, edits, path="/tmp/flint_ctor_test.py", analyser=analyser,
                                   deadline=time.monotonic() + 60)


def test_a_field_added_to_a_dataclass_is_a_change_of_the_class():
    after, edits = _history(SRC, "    y: int\n", "    y: int\n    z: int\n")
    change = last_signature_change(after, edits)
    assert change is not None and (change.kind, change.name, change.index, change.param.name) == \
        ("added", "Point", 2, "z")
    assert after[change.name_at:change.name_at + 5] == "Point" and not change.bound
    assert change.signature.startswith("@dataclass\nclass Point:\n    x: int") and "    z: int" in change.signature
    assert "ClassVar" not in change.signature and "cache" not in change.signature  # the fields __init__ takes
    assert signature_of(after, change) is not None and signature_of(after, change).text == change.signature


def test_fields_that_are_no_parameter_or_have_a_default_change_nothing():
    for new in ("    z: ClassVar[int]\n", "    z: int = 0\n", "    z: list = field(default_factory=list)\n",
                "    z: int = field(init=False)\n"):
        after, edits = _history(SRC, "    y: int\n", "    y: int\n" + new)
        assert last_signature_change(after, edits) is None, new
    # a class with a base: its inherited fields come first, in an order the module does not show
    based = SRC.replace("@dataclass\nclass Point:", "@dataclass\nclass Point(Base):")
    after, edits = _history(based, "    y: int\n", "    y: int\n    z: int\n")
    assert last_signature_change(after, edits) is None
    # a plain class's annotation is no field
    plain = SRC.replace("@dataclass\nclass Point:", "class Point:")
    after, edits = _history(plain, "    y: int\n", "    y: int\n    z: int\n")
    assert last_signature_change(after, edits) is None


def test_namedtuple_attrs_and_keyword_only_fields():
    after, edits = _history(SRC, "    left: str\n", "    left: str\n    middle: str\n")
    change = last_signature_change(after, edits)
    assert change is not None and (change.name, change.index, change.param.kind) == ("Pair", 1, "pos")
    kw = SRC.replace("@dataclass\nclass", "@dataclass(kw_only=True)\nclass")
    after, edits = _history(kw, "    y: int\n", "    y: int\n    z: int\n")
    change = last_signature_change(after, edits)
    assert change is not None and change.param.kind == "kwonly"
    attrs = SRC.replace("@dataclass\nclass", "@attrs.define\nclass")
    after, edits = _history(attrs, "    x: int\n", "    w: int\n    x: int\n")
    change = last_signature_change(after, edits)
    assert change is not None and (change.name, change.index, change.param.name) == ("Point", 0, "w")
    e = edits[-1]
    assert field_change(e.undo(after), after, e.start, e.new_end) == change


def test_an_added_field_gives_a_jump_at_each_constructor_call(analyser):
    after, edits = _next(SRC, "    y: int\n", "    y: int\n    z: int\n", analyser)
    assert len(edits) == 2 and all(e.jump and e.note == "z" for e in edits)
    spots = sorted(e.range_start for e in edits)
    assert after[spots[0] - 1:spots[0] + 1] == "2)"  # after Point(1, 2)'s last argument
    assert after[spots[1] - 1:spots[1] + 1] == "4)"  # by keyword after Point(x=3, y=4)
    by_kw = next(e for e in edits if e.range_start == spots[1])
    assert by_kw.fill is not None and by_kw.fill.keyword == "z"


def test_an_init_parameter_follows_to_the_class_calls(analyser):
    after, edits = _next(SRC, "def __init__(self, host, port):", "def __init__(self, host):", analyser)
    out = apply_all(after, edits)
    assert 'Client("localhost")' in out and 'Client(host="h")' in out
    after, edits = _next(SRC, "def __init__(self, host, port):", "def __init__(self, address, port):", analyser)
    assert 'Client(address="h", port=1)' in apply_all(after, edits)  # (jedi's rename has the keyword too)
    change = last_signature_change(*_history(SRC, "self, host, port)", "self, host, port, timeout)"))
    assert change is not None and (change.name, change.index, change.kind) == ("Client", 2, "added")
    assert change.signature == "class Client:\n    def __init__(self, host, port, timeout):"


def test_the_prompt_stub_of_a_class_puts_the_body_under_its_last_def_or_class():
    after, edits = _history(SRC, "self, host, port)", "self, host, port, timeout)")
    change = last_signature_change(after, edits)
    assert change is not None
    jumps = [e for e in exact_next_edits(after, edits) if e.jump]  # no analyser: no call sites
    assert jumps == []
    from engine.edits.common import Fill, NextEdit

    at = after.index('Client("localhost", 80)') + len('Client("localhost", 80')
    jump = NextEdit(at, at, "", "", "signature", 0.9, note="timeout", fill=Fill(", ", ""))
    prefix, _ = fill_prompt(after, jump, change.signature)
    assert prefix.startswith("class Client:\n    def __init__(self, host, port, timeout):\n        ...\n")
