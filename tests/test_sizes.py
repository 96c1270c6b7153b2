"""No module over 400 lines and no function over 60 (issue 33), checked in the fast tier: the Python of engine/
and lsp_server/, the Neovim plugin's Lua and the VS Code extension's TypeScript sources (whose functions
editor-extension/vscode/src/test/layout.test.ts checks)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES, MAX_FUNCTION = 400, 60


def python_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, length in lines) of every function in a Python source, nested ones included."""
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


_LUA_TOKEN = re.compile(r"""--\[(?P<lc>=*)\[.*?\](?P=lc)\]|--[^\n]*|\[(?P<ls>=*)\[.*?\](?P=ls)\]"""
                        r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\b(?P<kw>function|if|do|repeat|until|end)\b""",
                        re.S)


def lua_functions(text: str) -> list[tuple[int, int]]:
    """(first line, length in lines) of every function in a Lua source."""
    out: list[tuple[int, int]] = []
    stack: list[tuple[str, int]] = []
    for m in _LUA_TOKEN.finditer(text):
        kw = m.group("kw")
        if not kw:
            continue
        line = text.count("\n", 0, m.start()) + 1
        if kw in ("function", "if", "do", "repeat"):
            stack.append((kw, line))
        else:  # end, until
            opened, start = stack.pop()
            if opened == "function":
                out.append((start, line - start + 1))
    assert not stack, "unbalanced blocks"
    return out


def test_the_readers_see_long_functions():
    long_py = "def f():\n" + "    x = 1\n" * 60
    assert python_functions(long_py) == [("f", 1, 61)]
    long_lua = "local function f()\n" + "  x = 1\n" * 60 + "end\n"
    assert lua_functions(long_lua) == [(1, 62)]
    assert lua_functions("local s = 'end' -- function\nif x then y() end\n") == []


def test_no_python_module_or_function_too_long():
    files = sorted(f for part in ("engine", "lsp_server") for f in (ROOT / part).rglob("*.py"))
    assert len(files) > 50, files
    too_long = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        name = f.relative_to(ROOT)
        if len(text.splitlines()) > MAX_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        too_long += [f"{name}:{line}: {fn} has {n} lines" for fn, line, n in python_functions(text) if n > MAX_FUNCTION]
    assert not too_long, "\n".join(too_long)


def test_neovim_plugin_stays_split_by_concern():
    files = sorted((ROOT / "editor-extension" / "neovim").rglob("*.lua"))
    assert len(files) >= 10, files
    too_long = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        name = f.relative_to(ROOT)
        if len(text.splitlines()) > MAX_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        too_long += [f"{name}:{line}: a function of {n} lines" for line, n in lua_functions(text) if n > MAX_FUNCTION]
    assert not too_long, "\n".join(too_long)


def test_no_vscode_source_too_long():
    files = sorted(f for f in (ROOT / "editor-extension" / "vscode" / "src").rglob("*.ts"))
    assert len(files) >= 5, files
    too_long = [f"{f.relative_to(ROOT)}: {n} lines" for f in files
                if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not too_long, "\n".join(too_long)
