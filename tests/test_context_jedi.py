"""Context from what jedi resolves (engine/context/resolved.py, jedi_source.py): the questions asked about the
names near the cursor, the stubs, their ranking and the block's budget (pure), then real jedi on a small
two-module project through the Workspace (where jedi answers, the imports source's outline goes)."""

import time

import pytest

from engine.context.block import approx_tokens
from engine.context.jedi_source import JediContext, answer
from engine.context.resolved import (
    Definition,
    Member,
    definition_chunks,
    function_span,
    questions,
    render,
    standard_library,
)
from engine.context.sources import imported_names
from engine.context.workspace import Workspace
from engine.guidance.jedi_analyser import JediAnalyser

APP = '''import json
from pkg import models
from pkg.models import connect


def unrelated(x):
    return x.far_away()


def run(url, retries):
    s = connect(url)
    r = s.get("/x")  # a comment naming fake.attr
    data = r.json()
    text = "a string with fake.attr"
    CURSOR
    return json.dumps(data), models.LIMIT
'''

MODELS = '''"""Models."""

LIMIT = 3


class Session:
    """A session that talks to a server.

    More text."""

    timeout: float = 3.0

    def __init__(self, url: str, retries: int = 2) -> None:
        self.url = url

    def get(self, path: str, *, params=None) -> "Response":
        """Fetch a path."""
        return Response(200)

    def close(self) -> None:
        """Close it."""

    def _private(self):
        pass


class Response:
    def __init__(self, status):
        self.status = status

    def json(self) -> dict:
        """The body as JSON."""
        return {}


def connect(url, retries=3):
    """Open a session to url."""
    return Session(url, retries)
'''


def app_at_cursor() -> tuple[str, int]:
    text = APP.replace("CURSOR\n", "\n")
    return text, text.index("    \n    return") + 4


# ---- the questions -----------------------------------------------------------------------------------------
def test_imported_names_say_which_are_modules():
    got = imported_names("import os.path\nimport numpy as np\nfrom a import b, c as d\nfrom e import *\n")
    assert got == {"os": True, "np": True, "b": False, "d": False}


def test_function_span_is_the_function_around_the_cursor():
    text, at = app_at_cursor()
    lo, hi = function_span(text, at)
    assert text[lo:].startswith("def run(url, retries):")
    assert text[lo:hi].rstrip().endswith("models.LIMIT") and "unrelated" not in text[lo:hi]
    assert function_span("x = 1\ny = 2\n", 6) == (0, 12)  # module level: the lines around it


def test_questions_ask_about_imported_names_and_receivers_nearest_first():
    text, at = app_at_cursor()
    qs = questions(text, at)
    by = {q.expr: q for q in qs}
    assert set(by) == {"connect", "s", "r", "json.dumps", "models.LIMIT"}  # not x (another function)
    assert by["connect"].kind == "goto" and text[by["connect"].at:].startswith("connect(url)")
    assert by["json.dumps"].kind == "goto" and text[by["json.dumps"].at:].startswith("dumps(")
    assert by["r"].kind == "members" and by["r"].attr == "json" and text[by["r"].at - 1:].startswith(".json")
    assert text[by["r"].name_at:].startswith("r.json")
    assert [q.distance for q in qs] == sorted(q.distance for q in qs)
    assert qs[0].expr in ("r", "json.dumps")  # the lines next to the cursor
    assert "fake" not in {q.expr.split(".")[0] for q in qs}  # strings and comments are not code


def test_a_receiver_typed_at_the_cursor_is_the_nearest_question():
    text, _ = app_at_cursor()
    text = text.replace("    \n    return", "    r.\n    return")
    at = text.index("    r.\n") + 6
    first = questions(text, at)[0]
    # nearest (at the cursor), with the member the function calls on it elsewhere
    assert (first.kind, first.expr, first.attr, first.distance) == ("members", "r", "json", 0)
    at = text.index("    r.\n") + 6
    text2 = text.replace("    data = r.json()\n", "")
    assert questions(text2, text2.index("    r.\n") + 6)[0].attr == ""


def test_self_alone_is_not_asked_but_self_attributes_are():
    text = "class A:\n    def f(self):\n        self.g()\n        self.conn.send(1)\n        \n"
    qs = questions(text, len(text) - 1)
    assert [(q.kind, q.expr, q.attr) for q in qs] == [("members", "self.conn", "send")]


def test_questions_are_capped():
    text = "import m\n\n\ndef f():\n" + "".join(f"    m.f{i}()\n" for i in range(30)) + "    \n"
    assert len(questions(text, len(text) - 1, max_questions=4)) == 4


# ---- the stubs -----------------------------------------------------------------------------------------------
SESSION = Definition("s", "instance", "Session", "pkg.models", "/w/pkg/models.py", 6, "class Session(Base):",
                     "", "A session.", (Member("close", "function", "close() -> None", "Close it."),
                                        Member("get", "function", "get(path: str) -> Response", "Fetch."),
                                        Member("_private", "function", "_private()"),
                                        Member("__init__", "function", "__init__(url: str)"),
                                        Member("timeout", "statement")), 5, ("get",))


def test_an_instance_shows_its_used_members_first_with_their_docstring():
    assert render(SESSION) == ('class Session(Base):\n    """A session."""\n'
                               '    def get(self, path: str) -> Response:\n        """Fetch."""\n'
                               '    def close(self) -> None:\n    timeout = ...\n')


def test_a_class_shows_its_constructor_and_members_are_capped():
    cls = Definition("models.Session", "class", "Session", "pkg.models", "/w/pkg/models.py", 6, "", "", "",
                     SESSION.members)
    text = render(cls, max_members=2)
    assert text == "class Session:\n    def close(self) -> None:\n    def get(self, path: str) -> Response:\n"
    assert "__init__(self, url: str)" in render(cls)


def test_functions_constants_and_modules():
    f = Definition("connect", "function", "connect", "pkg.models", "/w/m.py", 9, "def connect(url):",
                   "connect(url, retries=3)", "Open a session.")
    assert render(f) == 'def connect(url, retries=3):\n    """Open a session."""\n'
    c = Definition("LIMIT", "statement", "LIMIT", "pkg.models", "/w/m.py", 3, "LIMIT = 3")
    assert render(c) == "LIMIT = 3\n"
    assert render(Definition("m", "module", "m", "m", "/w/m.py", 1)) == ""
    long = Definition("g", "function", "g", "m", "/w/m.py", 1, signature="g(" + "a, " * 100 + "z)")
    assert len(render(long).splitlines()[0]) < 180


def test_chunks_rank_by_distance_merge_repeats_and_leave_builtins_out():
    near = Definition("r", "instance", "Response", "pkg.models", "/w/pkg/models.py", 20, distance=3,
                      used=("json",))
    again = Definition("resp", "instance", "Response", "pkg.models", "/w/pkg/models.py", 20, distance=40,
                       used=("status",))
    far = Definition("connect", "function", "connect", "pkg.models", "/w/pkg/models.py", 30, distance=50)
    std = Definition("json.dumps", "function", "dumps", "json", "/usr/lib/python3.11/json/__init__.py", 183,
                     distance=1)
    builtin = Definition("x", "instance", "str", "builtins", None, 0, distance=0)
    chunks = definition_chunks([far, again, std, near, builtin], lambda p, m: m.replace(".", "/") + ".py")
    assert [c.text.splitlines()[0] for c in chunks] == ["class Response:", "def connect(...):", "def dumps(...):"]
    assert [c.line for c in chunks] == [19, 29, 182] and {c.source for c in chunks} == {"jedi"}
    assert chunks[0].score > chunks[1].score > chunks[2].score  # the stdlib's last, however near
    assert chunks[0].path == "pkg/models.py"


def test_standard_library_paths():
    assert standard_library("/usr/lib/python3.11/json/__init__.py")
    assert standard_library("/x/jedi/third_party/typeshed/stdlib/re.pyi") and standard_library(None)
    assert not standard_library("/venv/lib/python3.11/site-packages/requests/models.py")
    assert not standard_library("/work/project/pkg/models.py")


def test_the_block_budget_holds_with_jedi_chunks(tmp_path):
    class Fixed:
        def definitions(self, file, text, offset):
            return [Definition(f"n{i}", "function", f"n{i}", "pkg.big", str(tmp_path / "big.py"), i * 10 + 1,
                               signature=f"n{i}(" + ", ".join(f"arg{j}" for j in range(12)) + ")",
                               doc="A function with a docstring line.", distance=i) for i in range(40)]

    ws = Workspace([tmp_path], budget=120, sources=("jedi",), resolver=Fixed())
    text = "def f():\n    pass\n"
    block = ws.gather(tmp_path / "a.py", text, len(text) - 1)
    assert block is not None
    cost = sum(approx_tokens(c.path) + approx_tokens(c.text) + 2 for c in block.chunks)
    assert cost <= 120 and "def n0(" in block.chunks[0].text and "n39" not in block.chunks[0].text


def test_answers_stop_at_the_deadline():
    class Script:
        def goto(self, line, col, follow_imports):
            raise AssertionError("asked past the deadline")

    text, at = app_at_cursor()
    assert answer(Script(), text, questions(text, at), deadline=time.monotonic() - 1) == []


# ---- real jedi on a two-module project ---------------------------------------------------------------------
@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(MODELS)
    an = JediAnalyser()
    an.add_root(str(tmp_path))
    yield tmp_path, an
    an.close()


def test_jedi_resolves_receivers_and_imports_across_modules(project):
    root, an = project
    text, at = app_at_cursor()
    found = JediContext(an, budget_s=60).definitions(root / "pkg" / "app.py", text, at)
    assert found is not None
    by = {d.expr: d for d in found}
    assert by["r"].name == "Response" and by["r"].used == ("json",)
    assert by["r"].members[0].signature == "json() -> dict" and by["r"].members[0].doc == "The body as JSON."
    assert by["s"].name == "Session" and "get" in {m.name for m in by["s"].members}
    assert by["connect"].signature == "connect(url, retries=3)" and by["connect"].line == 36
    assert by["models.LIMIT"].header == "LIMIT = 3"
    assert "json.dumps" not in by  # the standard library's are left out by default


def test_the_workspace_block_takes_jedi_over_the_hand_written_imports(project):
    root, an = project
    text, at = app_at_cursor()
    ws = Workspace([root], budget=512, sources=("imports", "jedi"), resolver=JediContext(an, budget_s=60))
    block = ws.gather(root / "pkg" / "app.py", text, at)
    assert block is not None
    labels = block.labels()
    assert labels == ["pkg/models.py:3 (jedi)"]  # LIMIT, Session, Response, connect: one stub of the module
    assert not [lb for lb in labels if lb.endswith("(import)")]  # jedi answered for every imported name used
    stub = next(c.text for c in block.chunks if c.source == "jedi")
    assert "def get(self, path: str, *, params=None)" in stub and "def connect(url, retries=3):" in stub
    assert "def json(self) -> dict:" in stub and "_private" not in stub
    without = Workspace([root], budget=512, sources=("imports",)).gather(root / "pkg" / "app.py", text, at)
    assert without is not None and {c.source for c in without.chunks} == {"import"}


def test_where_jedi_has_nothing_the_imports_source_stays(project):
    root, an = project

    class Silent:
        def definitions(self, file, text, offset):
            return None

    text, at = app_at_cursor()
    ws = Workspace([root], budget=512, sources=("imports", "jedi"), resolver=Silent())
    block = ws.gather(root / "pkg" / "app.py", text, at)
    assert block is not None and {c.source for c in block.chunks} == {"import"}
    assert "def connect(url, retries=3):" in block.chunks[0].text


def test_broken_huge_or_environmentless_files_give_nothing(project, tmp_path):
    root, an = project
    jc = JediContext(an, budget_s=60)
    broken = "import pkg.models\n\ndef f(:\n    x = pkg.models.\n    ]]]\n"
    found = jc.definitions(root / "b.py", broken, len(broken) - 6)  # never raises
    assert found is None or all(isinstance(d, Definition) for d in found)
    small = JediAnalyser(max_chars=100)
    try:
        text, at = app_at_cursor()
        assert JediContext(small, budget_s=60).definitions(root / "pkg" / "app.py", text, at) is None
    finally:
        small.close()
    lost = JediAnalyser(environment=str(tmp_path / "no-such-venv"))
    try:
        text, at = app_at_cursor()
        assert JediContext(lost, budget_s=60).definitions(tmp_path / "elsewhere" / "app.py", text, at) is None
    finally:
        lost.close()


def test_a_late_answer_serves_the_next_gather(project):
    root, an = project
    text, at = app_at_cursor()
    jc = JediContext(an, budget_s=0.0, late_s=60)  # the caller waits not at all, jedi goes on
    assert jc.definitions(root / "pkg" / "app.py", text, at) is None  # no wait at all
    an.idle()
    again = jc.definitions(root / "pkg" / "app.py", text, at)
    assert again is not None and jc.stats["late"] == 1 and "r" in {d.expr for d in again}


def test_path_shown_for_installed_libraries(tmp_path):
    ws = Workspace([tmp_path])
    assert ws.shown_path(str(tmp_path / "pkg" / "m.py"), "pkg.m") == "pkg/m.py"
    assert ws.shown_path("/venv/site-packages/requests/models.py", "requests.models") == "requests/models.py"
    assert ws.shown_path("/venv/site-packages/rich/__init__.py", "rich") == "rich/__init__.py"
    assert ws.shown_path(None, "_socket") == "_socket.py"


# ---- the server's switch -----------------------------------------------------------------------------------
def test_the_jedi_source_is_asked_for_by_name_only():
    from lsp_server.settings import Settings, parse_settings

    assert "jedi" not in Settings().context_sources  # not a default until measured
    s, warnings = parse_settings({"contextSources": ["jedi", "imports"]})
    assert s.context_sources == ("imports", "jedi") and not warnings


def test_the_server_context_makes_its_resolver_when_jedi_is_asked_for(project):
    from types import SimpleNamespace

    from lsp_server.context import RepoContext
    from lsp_server.settings import Settings

    root, _ = project
    settings = Settings(context_budget=512, context_sources=("imports", "jedi"))
    ctx = RepoContext(lambda: settings, lambda: (6000, 600))
    ctx.set_folders([root.as_uri()])
    text, at = app_at_cursor()
    uri = (root / "pkg" / "app.py").as_uri()
    ctx.changed(uri, text, typed=False, active=None)
    assert ctx.workspace.resolver is None
    state = SimpleNamespace(uri=uri, offset=at)  # what block_for reads of a completion State
    ctx.block_for(state)  # type: ignore[arg-type]
    assert ctx.workspace.resolver is not None
    # a gather waits for jedi a bounded time and a late answer serves the next one; jedi's first questions in a
    # cold process (its caches loading) can outlast that on a loaded machine, so gather until it has answered
    deadline = time.monotonic() + 60
    while True:
        ctx.workspace.resolver.runner.idle()
        block = ctx.block_for(state)  # type: ignore[arg-type]
        if time.monotonic() > deadline or (block is not None and "jedi" in {c.source for c in block.chunks}):
            break
    assert block is not None and "jedi" in {c.source for c in block.chunks}


def test_unused_imports_are_asked_last_the_package_own_first():
    text = ("from os.path import join, split\nfrom .sibling import helper, Thing as T\nfrom pkg import models\n\n\n"
            "def f(x):\n    return helper(x)\n    \n")
    at = text.rindex("    \n") + 4
    assert all(not q.brief for q in questions(text, at))  # off by default
    qs = questions(text, at, unused_imports=3)
    assert [q.expr for q in qs] == ["helper", "T", "join", "split"]  # not models: the cap
    assert [q.brief for q in qs] == [False, True, True, True]
    assert text[qs[1].at:].startswith("Thing as T")  # jedi goes from the imported name to its definition


def test_an_unbound_method_signature_keeps_its_one_self():
    cls = Definition("T", "class", "T", "m", "/w/m.py", 1, "class T:", members=(
        Member("__init__", "function", "__init__(self, x)"),))
    assert "def __init__(self, x):" in render(cls)
