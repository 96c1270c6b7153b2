"""Repository context sources (engine/context/workspace.py): pure logic and guarded reads of a temporary workspace."""

import logging
import os
from pathlib import Path

from engine.context.block import Chunk, ContextBlock, dice, order_stably, select_chunks, split_chunks, words
from engine.context.definitions import python_definitions, regex_definitions
from engine.context.sources import edit_diff, names_near, read_text, resolve_imports
from engine.context.workspace import Workspace

SHAPES = '''"""Shapes."""

SCALE = 2


def area(width: int,
         height: int = 1) -> int:
    """Area of a rectangle.

    Both sides in pixels.
    """
    return width * height * SCALE


class Box:
    """A box on screen."""

    kind: str = "box"

    def __init__(self, w: int, h: int) -> None:
        self.w, self.h = w, h

    def grow(self, by: int) -> "Box":
        """A bigger box."""
        return Box(self.w + by, self.h + by)

    def _secret(self):
        return 1
'''


def make_ws(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "shapes.py").write_text(SHAPES)
    (tmp_path / "pkg" / "util.py").write_text("def helper(a, b):\n    return a\n")
    return tmp_path


def test_dice_and_words():
    assert dice(words("a b c"), words("a b c")) == 1.0
    assert dice(words("a b"), words("c d")) == 0.0
    assert dice(words("alpha beta"), words("alpha gamma")) == 0.5
    assert dice(frozenset(), words("x")) == 0.0


def test_split_chunks_bounds_size_and_prefers_top_level_starts():
    text = "".join(f"def f{i}():\n" + "    x = 1\n" * 9 + "\n" for i in range(20))  # 11-line defs
    chunks = split_chunks(text, max_lines=64)
    assert "".join(c for _, c in chunks) == text
    for line, c in chunks:
        assert c.count("\n") <= 64 and c.startswith("def ")
        assert text.splitlines()[line] == c.splitlines()[0]


def test_select_drops_chunks_like_the_cursor_text_merges_duplicates_and_keeps_the_budget():
    around = "result = area(width, height)\nprint(result)\n" + "".join(f"v{i} = load(v{i - 1})\n" for i in range(30))
    same = Chunk("a.py", around[:200], "open", 0, 9.0)
    good = Chunk("s.py", "def area(width, height):\n    return width * height\n", "import", 0, 3.0)
    dup = Chunk("t.py", "def area(width, height):\n    return width * height  # copy\n", "open", 0, 1.0)
    other = Chunk("u.py", "class Box:\n    pass\n" * 40, "open", 0, 2.0)
    got = select_chunks([same, good, dup, other], around, budget=60, count=lambda s: len(s) // 4)
    assert got == [good]  # `same` copies the cursor text, `dup` merges into `good`, `other` is over budget
    assert select_chunks([same, good, dup, other], around, budget=10_000) == [good, other]


def test_order_is_stable_old_chunks_first_new_best_last():
    a, b, c, d = (Chunk(p, p, "open", 0, s) for p, s in (("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 0.5)))
    assert order_stably([], [c, a, b]) == [a, b, c]
    assert order_stably([a, b, c], [c, d, a]) == [a, c, d]  # b left; a and c keep their order; d appended


def test_block_digest_depends_on_every_chunk():
    c1, c2 = Chunk("a.py", "x = 1\n", "open"), Chunk("a.py", "x = 2\n", "open")
    b1 = ContextBlock("r", (c1,), "b.py")
    assert b1.digest() == ContextBlock("r", (c1,), "b.py").digest()
    assert b1.digest() != ContextBlock("r", (c2,), "b.py").digest() != ContextBlock("r", (c1,), "c.py").digest()
    assert b1.labels() == ["a.py:1 (open)"]


def test_python_definitions_give_signature_and_docstring():
    defs = python_definitions(SHAPES, ["area", "Box", "SCALE"])
    line, area = defs["area"]
    assert line == 5 and area.startswith("def area(width: int,\n         height: int = 1) -> int:\n")
    assert "Area of a rectangle." in area and "return width" not in area
    box = defs["Box"][1]
    assert "def __init__(self, w: int, h: int) -> None:" in box and "def grow(self, by: int)" in box
    assert "A bigger box." in box and "_secret" not in box and 'kind: str = "box"' in box
    assert "self.w, self.h = w, h" not in box
    assert defs["SCALE"][1] == "SCALE = 2\n"
    # a broken file falls back to the regex
    assert python_definitions(SHAPES + "\ndef broken(:\n", ["area"])["area"][1].startswith("def area(")


def test_regex_definitions_for_other_languages():
    js = "import x from 'y'\n\nexport function total(items, tax) {\n  return 1\n}\n\nconst other = 2\n"
    d = regex_definitions(js, ["total", "missing"])
    assert d == {"total": (2, "export function total(items, tax) {\n  return 1\n}\n")}


def test_names_near_the_cursor_nearest_first():
    text = "far_away = 1\n" + "\n" * 50 + "x = shapes.area(w)\ny = helper(\n"
    names = names_near(text, len(text) - 1, lines=3)
    assert names.index("helper") < names.index("shapes.area") and "far_away" not in names
    assert "shapes" in names
    # names in import statements are bound there, not used
    assert names_near("from x import (a,\n  b)\nimport c\nd(\n", 18) == ["d"]


def test_resolve_imports_relative_absolute_and_module_forms(tmp_path):
    root = make_ws(tmp_path)
    me = root / "pkg" / "main.py"
    src = ("import os\nfrom .shapes import area, Box as B\nfrom pkg import util\nimport pkg.shapes as sh\n"
           "from pkg.util import helper\nimport numpy\n")
    got = {(i.local, i.module.name, i.attr) for i in resolve_imports(src, me, [root])}
    assert got == {("area", "shapes.py", "area"), ("B", "shapes.py", "Box"), ("util", "util.py", None),
                   ("sh", "shapes.py", None), ("helper", "util.py", "helper")}
    # a file mid-edit that does not parse still has its imports read
    broken = "from .shapes import (area,\n    Box)\n\ndef f(:\n"
    assert {i.local for i in resolve_imports(broken, me, [root])} == {"area", "Box"}


def test_imports_resolving_outside_the_workspace_are_never_read(tmp_path, caplog):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("def token(): ...\n")
    root = make_ws(tmp_path / "ws")
    os.symlink(outside / "secret.py", root / "pkg" / "secret.py")
    me = root / "pkg" / "main.py"
    with caplog.at_level(logging.DEBUG, logger="flint.context"):
        assert resolve_imports("from .secret import token\nfrom .. import outside\n", me, [root]) == []
    assert "outside the workspace" in caplog.text


def test_bad_files_are_skipped(tmp_path, caplog):
    root = make_ws(tmp_path)
    (root / "bin.py").write_bytes(b"\x00\x01\x02def")
    (root / "latin.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    (root / "huge.py").write_text("x = 1\n" * 100)
    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "loop_a", root / "loop_b")
    with caplog.at_level(logging.DEBUG, logger="flint.context"):
        assert read_text(root / "bin.py", [root]) is None
        assert read_text(root / "latin.py", [root]) is None
        assert read_text(root / "huge.py", [root], max_bytes=100) is None
        assert read_text(root / "loop_a", [root]) is None
        assert read_text(root / "gone.py", [root]) is None
    assert read_text(root / "pkg" / "util.py", [root.resolve()]) is not None
    assert all(w in caplog.text for w in ("binary", "not UTF-8", "larger than"))


def test_edit_diff_is_small_or_nothing():
    d = edit_diff("a.py", "x = 1\ny = 2\n", "x = 1\ny = 3\n")
    assert d is not None and "-y = 2\n+y = 3\n" in d and d.startswith("--- a/a.py\n+++ b/a.py\n")
    assert edit_diff("a.py", "same", "same") is None
    assert edit_diff("a.py", "".join(f"{i}\n" for i in range(100)), "", max_lines=24) is None


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 1.0
        return self.t


def test_workspace_gathers_imported_definitions_used_near_the_cursor(tmp_path):
    root = make_ws(tmp_path)
    me = root / "pkg" / "main.py"
    text = ("from .shapes import area, Box\nfrom .util import helper\nfrom .util import unused\n\n\n"
            "def f(w, h):\n    b = Box(w, h)\n    helper(b, 1)\n    return area(")
    ws = Workspace([root], clock=Clock())
    block = ws.gather(me, text, len(text))
    assert block is not None and block.repo == root.name and block.current_path == "pkg/main.py"
    paths = [c.label for c in block.chunks]
    assert paths[-1] == "pkg/shapes.py:6 (import)"  # `area`, used at the cursor, is last (nearest the window)
    assert all(c.source == "import" for c in block.chunks) and len(block.chunks) == 2
    shapes = block.chunks[-1].text  # one chunk per module: its used definitions in source order
    assert shapes.index("def area(") < shapes.index("class Box:") and "return width" not in shapes
    assert "unused" not in "".join(c.text for c in block.chunks)  # imported, not used near the cursor
    # a small budget keeps the best that fits (area: 44 estimated tokens, helper: 14, Box: 66)
    small = Workspace([root], budget=50, clock=Clock()).gather(me, text, len(text))
    assert small is not None and [c.path for c in small.chunks] == ["pkg/shapes.py"]  # helper no longer fits
    assert "def area(" in small.chunks[0].text
    assert Workspace([root], budget=0).gather(me, text, len(text)) is None


def test_workspace_open_documents_by_recency_and_edits_as_diffs(tmp_path):
    root = make_ws(tmp_path)
    ws = Workspace([root], sources=("open", "edits"), clock=Clock())
    a, b, me = root / "a.py", root / "b.py", root / "main.py"
    ws.open(a, "def alpha_fn(value):\n    return value + 1\n")
    ws.open(b, "def beta_fn(item):\n    return item * 2\n")
    ws.open(me, "x = 1\n")
    ws.focus(a)  # a was looked at last
    ws.change(b, "def beta_fn(item):\n    return item * 3\n")
    ws.checkpoint(b)
    ws.focus(me)
    block = ws.gather(me, "x = 1\n", 6)
    assert block is not None
    labels = block.labels()
    assert "b.py.diff:1 (edit)" in labels and "a.py:1 (open)" in labels and "b.py:1 (open)" in labels
    diff = next(c for c in block.chunks if c.source == "edit").text
    assert "-    return item * 2\n+    return item * 3\n" in diff
    # a later block keeps the chunks of the block the engine holds in front, in their order
    again = ws.gather(me, "x = 1\n", 6, previous=ContextBlock(block.repo, block.chunks[::-1], block.current_path))
    assert again is not None and again.chunks == block.chunks[::-1]
    ws.close(a)
    assert "a.py:1 (open)" not in (ws.gather(me, "x = 1\n", 6) or block).labels()
    # an open binary document never feeds the context
    ws.open(root / "blob.py", "\0\0\0 binary")
    assert all(c.path != "blob.py" for c in (ws.gather(me, "x = 1\n", 6) or block).chunks)


def test_uri_path_takes_file_uris_only(tmp_path):
    from lsp_server.documents import uri_path

    f = tmp_path / "a b" / "m.py"
    assert uri_path(f.as_uri()) == f  # percent-escapes decoded once
    assert uri_path("untitled:Untitled-1") is None


def test_workspace_roots_set_later_resolve_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "util.py").write_text("def helper(x, *, scale=2):\n    return x * scale\n")
    app = tmp_path / "pkg" / "app.py"
    text = "from .util import helper\n\n\ndef run(v):\n    return helper("
    ws = Workspace(roots=[])
    ws.open(app, text)
    assert ws.text(app) == text
    assert ws.gather(app, text, len(text)) is None  # no workspace folder: imports resolve nowhere
    ws.set_roots([tmp_path])
    block = ws.gather(app, text, len(text))
    assert block is not None and block.labels() == ["pkg/util.py:1 (import)"]


# ---- the "file" source: the current file's own definitions the prompt window does not show ----------------
FAR_TOP = ('"""A long module."""\n\n_UNSET = object()\nDEFAULT_TIMEOUT: int = 30\n\n\n'
           'def fetch_all(urls, *, timeout=DEFAULT_TIMEOUT):\n    """Fetch every URL; a list of bodies."""\n'
           '    return [u for u in urls]\n\n\ndef never_used_here(x):\n    return x\n')
FILLER = "".join(f"def filler_{i}(v):\n    return v + {i}\n\n\n" for i in range(200))  # ~6,800 characters


def far_file(tail: str) -> str:
    return FAR_TOP + "\n\n" + FILLER + tail


def test_file_source_gives_far_definitions_used_near_the_cursor(tmp_path):
    me = tmp_path / "mod.py"
    tail = ("def near_helper(a):\n    return a\n\n\n"
            "def run(urls, value=_UNSET):\n    if value is _UNSET:\n        value = near_helper(1)\n"
            "    return fetch_all(")
    text = far_file(tail)
    assert text.index("def fetch_all") < len(text) - 6000  # outside the window before the cursor
    ws = Workspace([tmp_path], sources=("file",), clock=Clock())
    block = ws.gather(me, text, len(text))
    assert block is not None and [c.source for c in block.chunks] == ["file"]  # one stub of the file
    chunk = block.chunks[0]
    assert chunk.path == "mod.py" and block.current_path == "mod.py" and chunk.label == "mod.py:3 (file)"
    assert chunk.text.index("_UNSET = object()") < chunk.text.index("def fetch_all(urls, *, timeout=")
    assert "Fetch every URL" in chunk.text and "return [u for u in urls]" not in chunk.text
    assert "DEFAULT_TIMEOUT:" not in chunk.text  # its definition: not used near the cursor
    assert "near_helper" not in chunk.text  # defined inside the window: the prompt shows it already
    assert "never_used_here" not in chunk.text and "filler_" not in chunk.text  # not used near the cursor
    # a smaller window shows fetch_all's definition: only the sentinel is still missing from it
    near = ws.gather(me, text, len(text), window_before=len(text) - text.index("def fetch_all"))
    assert near is not None and "_UNSET = object()" in near.chunks[0].text
    assert "def fetch_all" not in near.chunks[0].text
    # the source off: nothing from it
    assert Workspace([tmp_path], sources=("imports", "open", "edits")).gather(me, text, len(text)) is None


def test_file_source_reads_definitions_below_the_window_and_other_names_near_the_cursor(tmp_path):
    me = tmp_path / "mod.py"
    text = far_file("def run():\n    return DEFAULT_TIMEOUT + later(")
    cursor = len(text)
    text += "\n\n" + "# padding\n" * 80 + '\n\ndef later(n):\n    """Defined far below."""\n    return n\n'
    got = Workspace([tmp_path], sources=("file",)).gather(me, text, cursor)
    assert got is not None
    body = got.chunks[0].text
    assert "DEFAULT_TIMEOUT: int = 30" in body and "def later(n):" in body and "Defined far below." in body
    assert "_UNSET" not in body and "fetch_all" not in body


def test_file_source_survives_a_file_mid_edit(tmp_path):
    me = tmp_path / "mod.py"
    tail = "def run(urls):\n    x = fetch_all(urls, timeout=(\n    if _UNSET is"  # being typed: no parse
    text = far_file(tail)
    block = Workspace([tmp_path], sources=("file",)).gather(me, text, len(text))
    assert block is not None
    assert "def fetch_all(" in block.chunks[0].text and "_UNSET = object()" in block.chunks[0].text
    # broken above the window too: the regex fallback still finds the definitions, assignments included
    broken = FAR_TOP.replace("def never_used_here(x):", "def never_used_here(x:") + "\n\n" + FILLER + tail
    block = Workspace([tmp_path], sources=("file",)).gather(me, broken, len(broken))
    assert block is not None
    assert "_UNSET = object()\n" in block.chunks[0].text and "def fetch_all(" in block.chunks[0].text
    # not Python: nothing from this source
    assert Workspace([tmp_path], sources=("file",)).gather(tmp_path / "mod.js", text, len(text)) is None


def test_file_definitions_keep_whole_statements_outside_the_window():
    from engine.context.definitions import file_definitions

    text = "A = 1\n\n@deco\ndef f():\n    return A\n\n\nclass C:\n    B = 2\n\nZ = 3\n"
    lo = text.index("    return A")  # the window starts inside f: f is partly shown, so not given
    hi = text.index("Z = 3") - 1
    got = file_definitions(text, ["A", "f", "C", "Z", "B"], lo, hi)
    assert got == {"A": (0, "A = 1\n"), "Z": (10, "Z = 3\n")}
    calls = []
    file_definitions(text, ["A"], lo, hi, defs=lambda piece: calls.append(piece) or {})
    assert calls == ["Z = 3\n", "A = 1\n\n"]  # the decorator stays with its definition, out of the head


def test_long_assignments_are_clipped_and_the_file_chunks_are_never_dropped_as_copies():
    from engine.context.definitions import MAX_ASSIGN_LINE

    src = "TABLE = [" + ", ".join(str(i) for i in range(500)) + "]\nBIG = {\n" + "    'k': 1,\n" * 10 + "}\n"
    defs = python_definitions(src, ["TABLE", "BIG"])
    assert len(defs["TABLE"][1]) <= MAX_ASSIGN_LINE + 5 and defs["TABLE"][1].endswith(" ...\n")
    assert defs["BIG"][1] == "BIG = {\n    ...\n"
    assert regex_definitions(src + "def (:\n", ["TABLE"])["TABLE"][1] == defs["TABLE"][1]
    around = "def run(a):\n    return helper(a)\n"
    outline = "def helper(a):\n    ...\n"
    assert select_chunks([Chunk("m.py", outline, "open", 0, 1.0)], around, 500) == []  # a copy of the cursor
    assert select_chunks([Chunk("m.py", outline, "file", 0, 1.0)], around, 500) != []  # a definition it uses


# ---- the block in the engine's prompts (the comments layout, the default) --------------------------------
import pytest  # noqa: E402

from engine.decoding.layout import comment_ids, comment_text, context_ids  # noqa: E402
from engine.types import GenParams  # noqa: E402

BLOCK = ContextBlock("proj", (Chunk("pkg/shapes.py", SHAPES, "open"),), "pkg/main.py")
MAIN = ("from .shapes import area, Box\n\n\ndef total(boxes):\n    return sum(area(b.w, b.h) for b in boxes)\n\n\n"
        "def main():\n    b = Box(2, 3)\n    x = are")


@pytest.fixture(scope="module")
def eng(model_dir):
    from engine.config import EngineConfig
    from engine.engine import Engine

    e = Engine.load(model_dir, warm=False, config=EngineConfig(threads=2))
    assert e.config.context_layout == "comments" and e.fim is not None
    return e


@pytest.mark.model
def test_comment_ids_end_where_the_file_text_tokenizes_on_its_own(eng):
    """The block's ids and the file text's are encoded apart; on the real tokenizer that is how the text
    reads as a whole too (the comments end on a line break), for a window starting at a line's start."""
    head = "".join(comment_text(c) for c in BLOCK.chunks)
    ids = comment_ids(eng.tok, BLOCK.chunks, BLOCK.current_path)
    assert ids == eng.tok.encode(head)
    for text in ("import os\n", "    x = 1\n", "\tif x:\n", "@property\n", "# note\n", '"""Doc."""\n', "}\n"):
        assert eng.tok.encode(head + text) == ids + eng.tok.encode(text), text


@pytest.mark.model
def test_the_engine_keeps_the_block_after_the_fim_prefix_across_keystrokes_and_window_cuts(eng):
    eng.set_context(None)
    bare = eng.build(MAIN, "\n")
    assert eng.set_context(BLOCK) and not eng.set_context(BLOCK)
    block = comment_ids(eng.tok, BLOCK.chunks, BLOCK.current_path)
    bos = eng.manifest.bos_token_id
    lead = ([bos] if bos is not None else []) + [eng.tok.special_id(eng.fim.prefix)]
    k1 = eng.build(MAIN, "\n")
    assert k1.head == len(lead) + len(block) and k1.ids[: k1.head] == lead + block
    assert k1.ids[k1.head:] == bare.ids[len(lead):]  # the file text's ids as without the block
    # the next keystroke: the same anchor, so everything up to the middle token is shared (its KV reused)
    k2 = eng.build(MAIN + "a", "\n", previous=k1.anchor)
    middle = k1.ids.index(eng.tok.special_id(eng.fim.middle)) + 1
    assert k2.anchor == k1.anchor and k2.ids[:middle] == k1.ids[:middle] and middle > k1.head
    # a window too long for the KV: the cut drops the oldest file text, never the block
    far = "".join(f"def filler_{i}(v):\n    return v + {i}\n\n\n" for i in range(60)) + MAIN
    whole = eng.build(far, "\n")
    cut = eng.build(far, "\n", max_new=eng.decoder.capacity - 16 - (len(whole.ids) - 200))
    excess = len(whole.ids) - len(cut.ids)
    assert excess == 200 and cut.ids[: cut.head] == lead + block
    assert cut.ids[cut.head:] == whole.ids[whole.head + excess:]
    # the digest names the layout too (a suggestion from another prompt is another cache entry)
    digest = eng.context_digest
    assert len(digest) == 16 and digest != BLOCK.digest()
    eng.set_context(None)


@pytest.mark.model
def test_a_keystroke_reuses_the_prefilled_block_and_reports_it(eng):
    eng.set_context(BLOCK)
    eng.reset()
    eng.prefill(MAIN, "\n")
    _, t = eng.complete(MAIN + "a", "\n", GenParams(max_tokens=1))
    head = eng.build(MAIN, "\n").head
    assert t.reused_tokens > head and t.prompt_tokens - t.reused_tokens <= 3, (t.prompt_tokens, t.reused_tokens)
    assert eng.last_context == tuple(BLOCK.labels())  # the status names the chunks the prompt carried
    eng.set_context(None)
    eng.reset()


@pytest.mark.model
def test_the_repository_layout_stays_for_measurement(eng):
    eng.set_context(BLOCK)
    comments = eng.context_digest
    eng.config.context_layout = "repository"
    try:
        assert eng.set_context(BLOCK)  # the same block in another layout is another block
        assert eng.context_digest == BLOCK.digest() != comments
        ctx = context_ids(eng.tok, BLOCK.repo, BLOCK.chunks, BLOCK.current_path)
        p = eng.build(MAIN, "\n")
        bos = [eng.manifest.bos_token_id] if eng.manifest.bos_token_id is not None else []
        assert p.ids[: len(bos) + len(ctx)] == bos + ctx and p.head == len(bos) + len(ctx) + 1
    finally:
        eng.config.context_layout = "comments"
        eng.set_context(None)
