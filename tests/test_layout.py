"""Which way imports run, read with ``ast`` from every file (imports inside functions and under
``if TYPE_CHECKING:`` count too): engine/ never imports the language server or its LSP libraries; engine's
parts import each other only in the directions ``ALLOWED`` lists; lsp_server/completion/ (and lsp_server/nextedit/) never imports
pygls, lsprotocol or lsp_server.protocol, not even through another lsp_server module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# engine's parts (its subpackages and its top-level modules) -> the other parts each may import. Read from
# the bottom: types, paths and syntax import no other part, text and context only syntax (and context text/window.py's
# window size); the facade (engine.engine) and the
# backends sit on top. text/, policy/ and cache/ never reach the model or decoding; decoding never reaches
# the facade (it sees the Engine as decoding.host.Host).
ALLOWED: dict[str, frozenset[str]] = {
    "types": frozenset(),
    "paths": frozenset(),
    "text": frozenset({"syntax"}),
    "context": frozenset({"syntax", "text"}),  # text/window.py: the prompt window's default size
    "policy": frozenset({"syntax", "text", "types"}),  # gate.py: the syntax at the cursor, the doubts
    "model": frozenset({"paths"}),
    "cache": frozenset({"paths", "text", "types"}),
    "remote": frozenset({"policy", "text", "types"}),
    "decoding": frozenset({"model", "text", "types"}),
    "config": frozenset({"decoding", "model", "paths", "text"}),
    "engine": frozenset({"config", "decoding", "guidance", "model", "text", "types"}),
    "backends": frozenset({"config", "engine", "remote", "types"}),
    # the monitor reaches decoding as decoding.monitored.Monitor (the engine makes it); the trie reads the
    # tokenizer's byte table
    "guidance": frozenset({"decoding", "types"}),
    # tree-sitter syntax (docs/syntax.md): text/ and context/ ask it; it imports no other part
    "syntax": frozenset(),
    "edits": frozenset({"guidance", "types"}),
}
NOT_IN_ENGINE = ("lsp_server", "pygls", "lsprotocol")
NOT_IN_COMPLETION = ("pygls", "lsprotocol", "lsp_server.protocol")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of everything a file imports: ``import a.b`` gives a.b, ``from a import b``
    gives a.b (b may be a module or a name in a: either way the file imports a), relative imports resolved
    against the file's package."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return out


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def part(name: str) -> str | None:
    """The engine part a dotted name lies in (engine.text.budget.Budget -> text), None outside engine."""
    bits = name.split(".")
    return bits[1] if bits[0] == "engine" and len(bits) > 1 else None


def py_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_the_allowed_graph_runs_one_way():
    seen: dict[str, int] = {}  # 1: being visited, 2: done

    def visit(p: str, path: list[str]) -> None:
        assert seen.get(p) != 1, f"a cycle in ALLOWED: {' -> '.join(path + [p])}"
        if seen.get(p) == 2:
            return
        seen[p] = 1
        for q in ALLOWED[p]:
            assert q in ALLOWED, f"{p} may import {q}, which ALLOWED does not describe"
            visit(q, path + [p])
        seen[p] = 2

    for p in ALLOWED:
        visit(p, [])


def test_every_engine_file_belongs_to_a_part_in_the_graph():
    parts = {part(module_name(f)) for f in py_files("engine")} - {None}
    assert parts == set(ALLOWED), "a new part of engine/: give it its place in ALLOWED"


def test_engine_never_imports_the_language_server():
    bad = [f"{f.relative_to(ROOT)}:{line} imports {name}" for f in py_files("engine")
           for line, name in imports(f) if within(name, NOT_IN_ENGINE)]
    assert not bad, "\n".join(bad)


def test_engine_parts_import_in_the_allowed_direction():
    bad = []
    for f in py_files("engine"):
        mine = part(module_name(f))
        for line, name in imports(f):
            theirs = part(name)
            if mine is not None and theirs is not None and theirs != mine and theirs not in ALLOWED[mine]:
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {name}: {mine} may not import {theirs}")
    assert not bad, "\n".join(bad)


def _first_party_file(name: str) -> Path | None:
    """The lsp_server file a dotted name comes from (the longest prefix that is a module or package)."""
    bits = name.split(".")
    for n in range(len(bits), 0, -1):
        base = ROOT.joinpath(*bits[:n])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


@pytest.mark.parametrize("path", py_files("lsp_server/completion") + py_files("lsp_server/nextedit"),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_completion_service_never_imports_the_protocol(path):
    """Followed through every lsp_server module it imports (and the packages those sit in)."""
    chains = [[path]]
    done: set[Path] = set()
    while chains:
        chain = chains.pop()
        here = chain[-1]
        if here in done:
            continue
        done.add(here)
        for line, name in imports(here):
            where = " -> ".join(str(p.relative_to(ROOT)) for p in chain)
            assert not within(name, NOT_IN_COMPLETION), f"{where}:{line} imports {name}"
            if within(name, ("lsp_server",)):
                target = _first_party_file(name)
                packages = [ROOT.joinpath(*name.split(".")[:n], "__init__.py") for n in range(1, name.count(".") + 1)]
                chains += [chain + [p] for p in [target, *packages] if p is not None and p.is_file()]


# ---- lsp_server/completion: its policy in one module, its folders in one direction -------------------------

KNOBS = ROOT / "lsp_server" / "completion" / "policy" / "knobs.py"
_TIMING = ("_S", "_MS")  # a time (seconds, milliseconds)
_SIZES = ("_CHARS", "_TOKENS", "_BUDGET", "_DELAY", "_HOLD", "_FACTOR", "_HISTORY")  # a window, a budget, a rhythm


def module_constants(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every UPPER_CASE name a module assigns at its top level."""
    out: list[tuple[int, str]] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and n.id.isupper():
                    out.append((node.lineno, n.id))
    return out


def test_every_timing_window_and_budget_constant_lives_in_the_policy_module():
    """A timing rule is changed in one file: knobs.py. Elsewhere in lsp_server/completion no module defines a
    time, a window, a token count or a budget, and engine/policy defines no time."""
    assert any(name == "IDLE_WORK_S" for _, name in module_constants(KNOBS))
    bad = []
    for f in py_files("lsp_server/completion"):
        if f != KNOBS:
            bad += [f"{f.relative_to(ROOT)}:{line} {name}" for line, name in module_constants(f)
                    if name.endswith(_TIMING + _SIZES) or "BUDGET" in name]
    for f in py_files("engine/policy"):
        bad += [f"{f.relative_to(ROOT)}:{line} {name}" for line, name in module_constants(f) if name.endswith(_TIMING)]
    assert not bad, "move these to lsp_server/completion/policy/knobs.py:\n" + "\n".join(bad)


def _module_graph(folders: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of these folders -> the first-party modules it imports (under TYPE_CHECKING too)."""
    files = [f for folder in folders for f in py_files(folder)]
    known = {module_name(f) for f in files}
    graph: dict[str, set[str]] = {}
    for f in files:
        targets = set()
        for _, name in imports(f):
            bits = name.split(".")
            found = next((".".join(bits[:n]) for n in range(len(bits), 0, -1) if ".".join(bits[:n]) in known), None)
            if found is not None and found != module_name(f):
                targets.add(found)
        graph[module_name(f)] = targets
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path + [m, n]
            if n not in state and (found := visit(n, path + [m])) is not None:
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m, [])) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_the_modules():
    """Not even one hidden under ``if TYPE_CHECKING:`` (package __init__ files that re-export excepted)."""
    graph = {m: {n for n in deps if not ROOT.joinpath(*n.split("."), "__init__.py").is_file()}
             for m, deps in _module_graph(("engine", "lsp_server")).items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


# lsp_server/completion's folders, bottom first: each imports only from the ones before it
COMPLETION_ORDER = ("jobs", "events", "policy", "store", "scheduler", "requests")


def test_the_completion_folders_import_one_way():
    bad = []
    for mod, deps in _module_graph(("lsp_server/completion",)).items():
        mine = mod.split(".")[2] if mod.count(".") >= 2 else None
        for dep in deps:
            theirs = dep.split(".")[2] if dep.count(".") >= 2 else None
            if mine in COMPLETION_ORDER and theirs in COMPLETION_ORDER and \
                    COMPLETION_ORDER.index(theirs) > COMPLETION_ORDER.index(mine):
                bad.append(f"{mod} imports {dep}")
    assert not bad, "\n".join(bad)
