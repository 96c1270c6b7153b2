"""engine/edits/signature.py and callsites.py: a def's parameters changed, its call sites follow (issue 50).
The pure functions on real-looking code; then through exact_next_edits with real jedi."""

from __future__ import annotations

import time

from engine.edits.common import apply_all
from engine.edits.exact import exact_next_edits
from engine.edits.history import EditHistory
from engine.edits.rename import find_rename
from engine.edits.signature import call_edits, calls, signature_change
from engine.guidance.jedi_analyser import JediAnalyser

SRC = '''import socket


def connect(host, port, timeout=10.0, *, retries=3):
    """Open a TCP connection, retrying on refusal."""
    for attempt in range(retries):
        try:
            return socket.create_connection((host, port), timeout=timeout)
        except ConnectionRefusedError:
            if attempt == retries - 1:
                raise


class Client:
    def __init__(self, host, port):
        self.sock = connect(host, port, 5.0)

    def send(self, payload, flush=True):
        self.sock.sendall(payload)

    def ping(self):
        self.send(b"ping", flush=False)
        self.send(b"pong")


def main(args):
    conn = connect("localhost", 8080, timeout=2.5, retries=1)
    backup = connect(args.host,
                     args.port)
    Client("a", 1).send(b"x", True)
    return conn, backup
'''


def _edit(src: str, old: str, new: str, nth: int = 0) -> tuple[str, int, int, int]:
    """``src`` with the ``nth`` ``old`` replaced by ``new``: (text after, start, old end, new end)."""
    at = -1
    for _ in range(nth + 1):
        at = src.index(old, at + 1)
    return src[:at] + new + src[at + len(old):], at, at + len(old), at + len(new)


def _calls_of(text: str, name: str) -> list:
    """Every call of ``name`` by its name token (what jedi's references give, without jedi)."""
    offs, at = [], text.find(name)
    while at >= 0:
        offs.append(at)
        at = text.find(name, at + 1)
    return calls(text, offs)


def _after(text: str, name: str, old: str, new: str, nth: int = 0) -> tuple[str, list]:
    after, s, oe, ne = _edit(text, old, new, nth)
    ch = signature_change(text, after, s, oe, ne)
    assert ch is not None and ch.name == name
    edits = call_edits(after, ch, _calls_of(after, name))
    return after, edits


def test_a_renamed_parameter_renames_its_keyword_at_each_call():
    after, edits = _after(SRC, "connect", "timeout=10.0", "deadline=10.0")
    assert [(e.old_text, e.new_text, e.source) for e in edits] == [("timeout", "deadline", "signature")]
    # socket.create_connection's own timeout= is another function's: untouched
    assert "deadline=2.5" in apply_all(after, edits) and "timeout=timeout" in apply_all(after, edits)


def test_a_removed_parameter_is_removed_at_each_call_by_position_or_keyword():
    after, edits = _after(SRC, "connect", "timeout=10.0, ", "")
    out = apply_all(after, edits)
    assert 'self.sock = connect(host, port)\n' in out
    assert 'connect("localhost", 8080, retries=1)' in out
    assert "connect(args.host,\n                     args.port)" in out  # not passed here: untouched
    assert len(edits) == 2


def test_a_removed_last_argument_on_its_own_line_and_an_only_argument():
    src = "def f(a, b):\n    pass\n\n\nf(1,\n  2)\nf(b=2, a=1)\n"
    after, edits = _after(src, "f", ", b", "")
    assert apply_all(after, edits) == "def f(a):\n    pass\n\n\nf(1)\nf(a=1)\n"
    src = "def g(x):\n    pass\n\n\ng(\n    1,\n)\n"
    after, edits = _after(src, "g", "x", "")
    assert apply_all(after, edits) == "def g():\n    pass\n\n\ng()\n"


def test_a_method_call_binds_self():
    after, edits = _after(SRC, "send", ", flush=True", "")
    out = apply_all(after, edits)
    assert 'self.send(b"ping")' in out and 'self.send(b"pong")' in out and 'send(b"x")' in out


def test_an_added_parameter_gets_a_jump_target_where_its_argument_goes():
    after, edits = _after(SRC, "connect", "host, port,", "host, port, family,")
    assert all(e.jump and e.note == "family" and e.old_text == e.new_text == "" for e in edits)
    at = {after[e.range_start - 12:e.range_start] + "|" + after[e.range_start:e.range_start + 6] for e in edits}
    # before the positional argument now in its place, else after the last positional one
    assert at == {"host, port, |5.0)\n\n", 'lhost", 8080|, time', "   args.port|)\n    "}


def test_a_keyword_only_parameter_goes_after_every_argument_and_unpacking_is_left_alone():
    src = "def f(a, *, b=1):\n    pass\n\n\nf(1, b=2)\nf(*xs)\nf(**kw)\nf()\n"
    after, edits = _after(src, "f", "*, b=1", "*, b=1, c")
    assert [after[:e.range_start].splitlines()[-1] + "|" for e in edits] == ["f(1, b=2|", "f(*xs|", "f(|"]
    assert all(e.note == "c" for e in edits)


def test_no_change_outside_a_parameter_list_or_with_a_default_or_two_at_once():
    assert signature_change(SRC, *_args(SRC, "socket.create_connection", "socket.connect")) is None
    assert signature_change(SRC, *_args(SRC, "host, port, timeout", "host, port, family=2, timeout")) is None
    assert signature_change(SRC, *_args(SRC, "host, port, timeout", "h, p, timeout")) is None
    assert signature_change(SRC, *_args(SRC, "def connect(", "def connect_to(")) is None


def _args(src: str, old: str, new: str) -> tuple[str, int, int, int]:
    return _edit(src, old, new)


# ---- through exact_next_edits: jedi finds the calls ----

def _next(src: str, old: str, new: str, analyser, nth: int = 0) -> tuple[str, list]:
    h = EditHistory()
    h.open("d", src)
    after, s, oe, _ne = _edit(src, old, new, nth)
    h.change("d", s, oe, new, now=0.0)
    assert h.text("d") == after
    return after, exact_next_edits(after, h.edits("d"), path="/tmp/flint_sig_test.py", analyser=analyser,
                                   deadline=time.monotonic() + 60)


def test_a_parameter_renamed_at_its_definition_offers_the_body_and_the_keywords(analyser):
    after, edits = _next(SRC, "timeout=10.0", "limit=10.0", analyser)
    assert [(e.old_text, e.new_text) for e in edits] == [("timeout", "limit")] * 2  # the keyword once
    out = apply_all(after, edits)
    assert "timeout=limit)" in out and "limit=2.5" in out


def _history(src: str, old: str, new: str) -> list:
    h = EditHistory()
    h.open("d", src)
    _after, s, oe, _ = _edit(src, old, new)
    h.change("d", s, oe, new, now=0.0)
    return h.edits("d")


def _parts(src: str, old: str, new: str, analyser) -> tuple[str, int, list[list], list]:
    """The edit made, through workspace_next_edits: (text after, where, each part as emitted, the edits here)."""
    from engine.edits.exact import workspace_next_edits

    after, s, _oe, _ = _edit(src, old, new)
    parts: list[list] = []
    here, _ = workspace_next_edits(after, _history(src, old, new), path="/tmp/flint_sig_test.py", analyser=analyser,
                                   deadline=time.monotonic() + 60, emit=lambda d, e: parts.append(e))
    return after, s, parts, here


def test_a_renamed_parameters_uses_come_first_and_its_keywords_then_replace_them(analyser):
    """The parts as they are found (``emit``): the uses in the def's body at once, from the syntax tree
    (jedi not asked yet), then the whole list with the call sites' keywords (which wait for jedi's
    references), the part the plan keeps."""
    after, _s, parts, here = _parts(SRC, "timeout=10.0", "limit=10.0", analyser)
    body = after.index("timeout=timeout")
    assert len(parts) >= 2 and parts[-1] == here
    assert [(e.range_start, e.new_text) for e in parts[0]] == [(body + len("timeout="), "limit")]
    assert {e.range_start for e in parts[0]} < {e.range_start for e in here}
    assert "timeout=limit)" in apply_all(after, parts[0])
    assert "limit=2.5" in apply_all(after, here) and "limit=2.5" not in apply_all(after, parts[0])
    uses = find_rename(after, _history(SRC, "timeout=10.0", "limit=10.0"), in_function=True)  # no analyser
    assert uses is not None and uses.edits == parts[0]


def test_a_methods_self_calls_come_first_from_the_syntax_alone(analyser):
    """A method's ``self.`` calls in its own class are a first part, found without jedi; the whole list (here
    with a call through an instance, which only jedi places) replaces it. A module's function has none."""
    from engine.edits.callsites import self_calls_here

    src = SRC + "\n\nclass Inner:\n    def ping(self):\n        self.send(b'other', flush=True)\n"
    after, s, parts, here = _parts(src, ", flush=True", "", analyser)
    assert len(parts) == 2 and parts[1] == here
    assert [after[e.range_start:e.range_end] for e in parts[0]] == [", flush=False"]  # (not Inner's self)
    assert sorted(after[e.range_start:e.range_end] for e in here) == [", True", ", flush=False"]
    change = signature_change(src, after, s, s + len(", flush=True"), s)
    assert change is not None and self_calls_here(after, change) == parts[0]
    after2, s2, oe2, ne2 = _edit(SRC, "timeout=10.0, ", "")
    assert self_calls_here(after2, signature_change(SRC, after2, s2, oe2, ne2)) == []  # a module's function


def test_a_parameter_removed_through_jedi(analyser):
    after, edits = _next(SRC, ", flush=True", "", analyser)
    assert sorted(after[e.range_start:e.range_end] for e in edits) == [", True", ", flush=False"]
    assert all(e.source == "signature" for e in edits)


def test_a_parameter_added_through_jedi_gives_jumps_only(analyser):
    after, edits = _next(SRC, "(self, payload", "(self, payload, tag", analyser)
    assert len(edits) == 3 and all(e.jump and e.note == "tag" for e in edits)
    assert apply_all(after, edits) == after


def test_a_name_that_only_looks_like_the_function_is_not_a_call_site(analyser):
    src = SRC + "\n\nclass Other:\n    def send(self, payload, flush=True):\n        pass\n\n\nOther().send(1, False)\n"
    after, edits = _next(src, ", flush=True", "", analyser)
    assert "Other().send(1, False)" in apply_all(after, edits)  # another class's send: jedi tells them apart
    assert len(edits) == 2


# ---- the other open documents ----

USE = '''from lib import connect
import lib as net


def fetch(host):
    first = connect(host, 80, timeout=1.0)
    second = net.connect(host, 443, 2.0, retries=5)
    return first, second
'''


def test_the_call_sites_in_other_open_documents_follow(tmp_path):
    from engine.edits.exact import workspace_next_edits
    from engine.edits.workspace import OpenDoc

    (tmp_path / "lib.py").write_text(SRC)
    (tmp_path / "use.py").write_text(USE)
    a = JediAnalyser()
    a.add_root(str(tmp_path))
    try:
        def ask(old: str, new: str) -> dict:
            h = EditHistory()
            h.open("lib", SRC)
            after, s, oe, _ = _edit(SRC, old, new)
            h.change("lib", s, oe, new, now=0.0)
            return workspace_next_edits(after, h.edits("lib"), path=str(tmp_path / "lib.py"), analyser=a,
                                        deadline=time.monotonic() + 60,
                                        others=[OpenDoc("use", str(tmp_path / "use.py"), USE)])[1]
        renamed = ask("timeout=10.0", "wait=10.0")
        assert apply_all(USE, renamed["use"]) == USE.replace("timeout=1.0", "wait=1.0")
        removed = ask("timeout=10.0, ", "")
        assert apply_all(USE, removed["use"]) == USE.replace("80, timeout=1.0", "80").replace("443, 2.0,", "443,")
        added = ask("(host, port", "(host, port, family")
        assert [USE[e.range_start - 4:e.range_start] for e in added["use"]] == [", 80", "43, "]  # before 2.0, now in its place
    finally:
        a.close()


def test_a_method_made_static_or_back_changes_no_call():
    src = ("class Checker:\n    @staticmethod\n    def name_of(node):\n        return node.name\n\n"
           "    def visit(self, node):\n        return self.name_of(node)\n")
    at = src.index("(node):")
    gained = src[:at + 1] + "self, " + src[at + 1:]  # `self` added first (the decorator goes next)
    assert signature_change(src, gained, at + 1, at + 1, at + 7) is None
    assert signature_change(gained, src, at + 1, at + 7, at + 1) is None  # and taken away
    # another first parameter added is a change its calls follow
    other = src[:at + 1] + "ctx, " + src[at + 1:]
    ch = signature_change(src, other, at + 1, at + 1, at + 6)
    assert ch is not None and ch.kind == "added" and ch.param.name == "ctx"
