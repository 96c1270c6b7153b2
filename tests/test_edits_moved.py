"""A module-level function or class moved to another file (engine/edits/moved.py): the imports of it follow,
in the other open documents and in the workspace's files on disk."""

from __future__ import annotations

import time

from engine.edits.common import apply_all
from engine.edits.exact import workspace_next_edits
from engine.edits.history import EditHistory
from engine.edits.moved import Moved, find_move, import_edits, retarget
from engine.edits.ondisk import DiskSearch
from engine.edits.workspace import OpenDoc

UTIL = '''import os


def slug(text):
    return text.lower().replace(" ", "-")


def other():
    return 1
'''
TEXTS = '''"""Text helpers."""
'''
MOVED_DEF = '''def slug(text):
    return text.lower().replace(" ", "-")


'''


def _move(tmp_path, *, cut_first: bool = True):
    """``slug`` cut from pkg/util.py and pasted into pkg/texts.py: (histories, util path, texts path)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    util, texts = str(pkg / "util.py"), str(pkg / "texts.py")
    h = EditHistory()
    h.open(util, UTIL)
    h.open(texts, TEXTS)
    at = UTIL.index(MOVED_DEF)
    steps = [(util, at, at + len(MOVED_DEF), ""), (texts, len(TEXTS), len(TEXTS), "\n\n" + MOVED_DEF.rstrip() + "\n")]
    for i, (doc, a, b, new) in enumerate(steps if cut_first else steps[::-1]):
        h.change(doc, a, b, new, now=float(i))
    return h, util, texts


def test_a_cut_and_a_paste_in_either_order_are_a_move(tmp_path):
    for cut_first in (True, False):
        h, util, texts = _move(tmp_path, cut_first=cut_first)
        last, other = (texts, util) if cut_first else (util, texts)
        found = find_move(last, h.text(last), h.edits(last), [OpenDoc(other, other, h.text(other),
                                                                       tuple(h.edits(other)))])
        assert found == Moved("slug", util, texts), cut_first
    # a def pasted with no cut anywhere (a copy), or cut where the source still defines it: no move
    h, util, texts = _move(tmp_path)
    assert find_move(texts, h.text(texts), h.edits(texts), [OpenDoc(util, util, UTIL, ())]) is None
    assert find_move(texts, h.text(texts), h.edits(texts), [OpenDoc(util, util, UTIL, tuple(h.edits(util)))]) is None


def test_import_modules_follow_absolute_and_relative(tmp_path):
    m = Moved("slug", str(tmp_path / "src/pkg/util.py"), str(tmp_path / "src/pkg/text/texts.py"))
    importer = str(tmp_path / "src/app/main.py")
    assert retarget(importer, "pkg.util", 0, m) == "pkg.text.texts"
    assert retarget(importer, "util", 0, m) == "text.texts"  # (src/pkg is its root: the target's name from there)
    assert retarget(importer, "other.util", 0, m) is None
    inner = str(tmp_path / "src/pkg/views.py")
    assert retarget(inner, "util", 1, m) == ".text.texts"
    deep = str(tmp_path / "src/pkg/sub/views.py")
    assert retarget(deep, "util", 2, m) == "..text.texts"
    assert retarget(deep, "util", 1, m) is None  # pkg/sub/util.py is another module
    out = Moved("slug", str(tmp_path / "src/pkg/util.py"), str(tmp_path / "elsewhere/texts.py"))
    assert retarget(inner, "util", 1, out) is None  # beyond what the import reached: no relative name


def test_import_edits_rewrite_the_name_alone_or_take_it_out_of_a_list(tmp_path):
    m = Moved("slug", str(tmp_path / "pkg/util.py"), str(tmp_path / "pkg/texts.py"))
    path = str(tmp_path / "app.py")
    one = "from pkg.util import slug\n\nprint(slug('A b'))\n"
    assert apply_all(one, import_edits(path, one, m)) == "from pkg.texts import slug\n\nprint(slug('A b'))\n"
    many = "import os\nfrom pkg.util import other, slug as s, thing\n"
    assert apply_all(many, import_edits(path, many, m)) == \
        "import os\nfrom pkg.util import other, thing\nfrom pkg.texts import slug as s\n"
    last = "def f():\n    from pkg.util import other, slug\n    return slug\n"
    assert apply_all(last, import_edits(path, last, m)) == \
        "def f():\n    from pkg.util import other\n    from pkg.texts import slug\n    return slug\n"
    lines = "from pkg.util import (\n    other,\n    slug,\n    thing,\n)\n"
    assert apply_all(lines, import_edits(path, lines, m)) == \
        "from pkg.util import (\n    other,\n    thing,\n)\nfrom pkg.texts import slug\n"
    assert import_edits(path, "from pkg.other import slug\nimport pkg.util\n", m) == []
    assert import_edits(m.target, one, m) == []  # the target's own text is not rewritten


def test_after_the_paste_the_imports_elsewhere_follow_open_and_on_disk(tmp_path):
    h, util, texts = _move(tmp_path)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    on_disk = tmp_path / "pkg" / "views.py"
    on_disk.write_text("from .util import other, slug\n\nprint(slug('x'), other())\n")
    (tmp_path / "unrelated.py").write_text("from pkg.util import other\n")
    app = str(tmp_path / "app.py")
    app_text = "from pkg.util import slug\n"
    others = [OpenDoc("file://util", util, h.text(util), tuple(h.edits(util))), OpenDoc("file://app", app, app_text)]
    parts: list = []
    disk = DiskSearch((str(tmp_path),), frozenset({util, app}))
    here, elsewhere = workspace_next_edits(h.text(texts), h.edits(texts), path=texts, language="python",
                                           analyser=None, deadline=time.monotonic() + 10, others=others, disk=disk,
                                           emit=lambda d, e: parts.append((d.key if d else None, e)))
    assert here == [] and parts[0] == (None, [])
    assert apply_all(app_text, elsewhere["file://app"]) == "from pkg.texts import slug\n"
    key = on_disk.as_uri()
    assert apply_all(on_disk.read_text(), elsewhere[key]).startswith(
        "from .util import other\nfrom .texts import slug\n")
    assert set(elsewhere) == {"file://app", key} and [k for k, _ in parts[1:]] == ["file://app", key]
