"""The syntax tree's references (engine/edits/local.py) against jedi's, name by name (issue 50).

The parameters and first two locals of the first 25 functions of every module in bench_next_edit's packages
(fetched into ~/.cache/flint/bench by ``python scripts/bench_next_edit.py``) and of eight standard-library
modules, and every module-level function and class: where the tree answers, jedi's references (asked as
rename.py asks, with its re-asks at leftovers) are compared with the tree's. Prints each difference (the
lines only the tree found, the lines only jedi found) and the counts.

    python scripts/check_local_references.py
"""

from __future__ import annotations

import ast
import glob
import os
import re
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.edits.local import module_references, own_references  # noqa: E402
from engine.edits.rename import _completed, _leftovers, _Outline, jedi_references  # noqa: E402
from engine.guidance.jedi_analyser import JediAnalyser  # noqa: E402

BENCH = Path.home() / ".cache/flint/bench"
STDLIB = ("argparse.py", "difflib.py", "textwrap.py", "configparser.py", "csv.py", "json/decoder.py", "shutil.py",
          "tarfile.py")


def sites(text: str, tree: ast.Module) -> list[tuple[str, int]]:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    out = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)][:25]:
        out += [(x.arg, starts[x.lineno - 1] + x.col_offset) for x in fn.args.args if x.arg != "self"]
        out += [(n.id, starts[n.lineno - 1] + n.col_offset) for n in ast.walk(fn)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)][:2]
    for st in tree.body:
        if isinstance(st, ast.FunctionDef | ast.ClassDef):
            m = re.compile(rf"(?:def|class)\s+({st.name})\b").search(text, starts[st.lineno - 1])
            if m is not None:
                out.append((st.name, m.start(1)))
    return [(name, at) for name, at in out if text[at:at + len(name)] == name]


def tree_answer(tree: ast.Module, text: str, site: int, name: str) -> list[int] | None:
    """What rename.py takes from the tree (local.py), else None (jedi's turn)."""
    own = own_references(tree, text, site, name)
    if own is not None:
        return None if _leftovers(text, own[1], name, set(own[0])) else own[0]
    return module_references(tree, text, site, name)


def main() -> None:
    files = sorted(p for p in glob.glob(str(BENCH / "*/**/*.py"), recursive=True) if "/wheels/" not in p)
    files += [os.path.join(sysconfig.get_paths()["stdlib"], m) for m in STDLIB]
    analyser = JediAnalyser()
    compared = differ = 0
    t_tree = t_jedi = 0.0
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if len(text) > 150_000:
            continue
        outline = _Outline(text, tree)
        for name, site in sites(text, tree):
            t0 = time.perf_counter()
            got = tree_answer(tree, text, site, name)
            t1 = time.perf_counter()
            t_tree += t1 - t0
            if got is None:
                continue
            refs = jedi_references(text, site, path=path, analyser=analyser, deadline=time.monotonic() + 30)
            if refs:
                refs = _completed(text, site, name, refs, outline, path, analyser, time.monotonic() + 30)
            t_jedi += time.perf_counter() - t1
            compared += 1
            theirs = sorted(off for off, _ in refs or [])
            if theirs != got:
                differ += 1
                line = [text.count("\n", 0, o) + 1 for o in sorted(set(got) - set(theirs))]
                jedi_line = [text.count("\n", 0, o) + 1 for o in sorted(set(theirs) - set(got))]
                print(f"{path.replace(str(BENCH) + '/', '')} {name} (line {text.count(chr(10), 0, site) + 1}): "
                      f"only the tree {line[:6]}, only jedi {jedi_line[:6]}")
    analyser.close()
    n = max(compared, 1)
    print(f"compared {compared} names, {differ} differ; the tree {t_tree * 1000 / n:.2f} ms a name, "
          f"jedi {t_jedi * 1000 / n:.1f} ms")


if __name__ == "__main__":
    main()
