"""scripts/bench_next_edit_workspace.py's cases and truth: which functions, which calls must change."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_next_edit_workspace as bench  # noqa: E402


def test_cases_and_the_calls_that_must_change(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/util.py": "def scale(x, y):\n    return x * y\n\n\ndef tail(a, b=2):\n    return a + b\n",
        "pkg/a.py": "from pkg.util import scale, tail\n\nscale(1, 2)\ntail(1)\ntail(1, 3)\ntail(1, b=4)\n",
        "pkg/b.py": "from pkg import util as u\n\nu.scale(3, 4)\nscale(5, 6)\n",  # the bare one is not ours
        "pkg/c.py": "import pkg.util as m\n\nm.scale(*args)\n",  # unpacked: where the argument goes is unknown
        "pkg/e.py": "import pkg.util\n\npkg.util.scale(9, 9)\n",
        ".venv/lib/d.py": "from pkg.util import scale\nscale(7, 8)\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cases = {c.name: c for c in bench.cases_of(tmp_path, 10)}
    assert set(cases) == {"scale", "tail"}
    scale, tail = cases["scale"], cases["tail"]
    text = (tmp_path / "pkg/util.py").read_text()
    s, e, new = scale.span
    assert (scale.kind, text[s:e], new) == ("added", "x, y", "x, y, flint_extra")
    a = (tmp_path / "pkg/a.py").read_text()
    assert {Path(p).name: [Path(p).read_text()[lo:hi] for lo, hi in v] for p, v in scale.truth.items()} == \
        {"a.py": ["scale(1, 2)"], "b.py": ["u.scale(3, 4)"], "e.py": ["pkg.util.scale(9, 9)"]}
    s, e, new = tail.span
    assert (tail.kind, text[s:e], new) == ("removed", "a, b=2", "a")
    assert {Path(p).name: [a[lo:hi] for lo, hi in v] for p, v in tail.truth.items()} == \
        {"a.py": ["tail(1, 3)", "tail(1, b=4)"]}  # the call that does not pass b needs nothing
