"""The text search over the workspace's files on disk (engine/edits/ondisk.py, issue 50): which files it
reads, which it keeps and in what order, and that it stops when told to. Real files in a temporary tree."""

from __future__ import annotations

import os
import time
from pathlib import Path

from engine.edits.ondisk import MAX_FILE_BYTES, DiskSearch, candidates, module_name, python_files


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def rel(root: Path, paths) -> list[str]:
    return [os.path.relpath(p, root) for p in paths]


def test_the_walk_skips_what_is_not_the_users_code(tmp_path):
    tree(tmp_path, {
        "pkg/a.py": "", "pkg/sub/b.py": "", "pkg/notes.txt": "",
        ".git/hooks/c.py": "", "node_modules/x/d.py": "", "build/lib/e.py": "", "pkg/__pycache__/f.py": "",
        ".hidden/g.py": "", "env1/pyvenv.cfg": "home = /usr\n", "env1/lib/h.py": "",
        "venv/lib/python3.11/site-packages/i.py": "",
    })
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    tree(outside, {"j.py": ""})
    os.symlink(outside, tmp_path / "pkg" / "linked")
    os.symlink(outside / "j.py", tmp_path / "pkg" / "k.py")
    assert sorted(rel(tmp_path, python_files([str(tmp_path)]))) == ["pkg/a.py", "pkg/sub/b.py"]
    assert len(list(python_files([str(tmp_path)], max_files=1))) == 1


def test_candidates_hold_the_name_as_a_word_importers_of_the_module_first(tmp_path):
    tree(tmp_path, {
        "pkg/util.py": "def scale(x):\n    return x\n",
        "pkg/a.py": "from pkg import api\napi.scale(1)\n",  # through a package that re-exports it
        "pkg/e.py": "from pkg.util import (\n    other,\n    scale,\n)\n",  # imported by name, over lines
        "pkg/f.py": "from pkg import util\nutil.scale(1)\n",  # through its module
        "pkg/g.py": "import pkg.util as u\nu.scale(1)\n",  # through its module, renamed
        "pkg/b.py": "from pkg.util import scale\nscale(2)\n",
        "pkg/c.py": "rescale = 1\nscaled = 2\n",  # the name only inside other words
        "pkg/d.py": "x = 1\n",
        "pkg/big.py": "scale(3)\n" + "#" * MAX_FILE_BYTES,
    })
    s = DiskSearch((str(tmp_path),), exclude=frozenset({str(tmp_path / "pkg" / "util.py")}))
    found, scan = candidates(s, "scale", module_name(str(tmp_path / "pkg" / "util.py")), time.monotonic() + 5)
    assert rel(tmp_path, [p for p, _ in found]) == ["pkg/b.py", "pkg/e.py", "pkg/f.py", "pkg/g.py", "pkg/a.py"]
    assert found[0][1] == (tmp_path / "pkg" / "b.py").read_text()
    assert (scan.files, scan.read, scan.matched, scan.stopped) == (9, 7, 5, "")
    imported, _ = candidates(s, "scale", "util", time.monotonic() + 5, imported=True)  # a module's function
    assert rel(tmp_path, [p for p, _ in imported]) == ["pkg/b.py", "pkg/e.py", "pkg/f.py", "pkg/g.py"]
    few, _ = candidates(DiskSearch((str(tmp_path),), max_candidates=1), "scale", "util", time.monotonic() + 5)
    assert rel(tmp_path, [p for p, _ in few]) == ["pkg/b.py"]


def test_the_search_stops_when_cancelled_or_past_its_deadline(tmp_path):
    tree(tmp_path, {f"m{i:03d}.py": "scale(1)\n" for i in range(200)})
    found, scan = candidates(DiskSearch((str(tmp_path),), cancelled=lambda: True), "scale", "", time.monotonic() + 5)
    assert scan.stopped == "cancelled" and scan.files < 200 and len(found) < 200
    found, scan = candidates(DiskSearch((str(tmp_path),), max_candidates=500), "scale", "", time.monotonic() - 1)
    assert scan.stopped == "deadline" and scan.files < 200
    found, scan = candidates(DiskSearch((str(tmp_path),), max_candidates=500), "scale", "", time.monotonic() + 5)
    assert scan.stopped == "" and len(found) == 200


def test_module_name():
    assert module_name("/w/pkg/util.py") == "util"
    assert module_name("/w/pkg/__init__.py") == "pkg"
