"""engine/syntax/languages.py: LSP language ids map to grammars that load once; anything that cannot load
is None with one warning, never an exception."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine.syntax.languages import EXTENSIONS, LANGUAGE_IDS, LanguageRegistry, grammar_for, language_for_path
from engine.syntax.tree import parse

SAMPLES = {
    "python": ("def f(a):\n    return a\n", "module"),
    "javascript": ("function f(a) { return a; }\n", "program"),
    "javascriptreact": ("const x = <div className=\"a\">{y}</div>;\n", "program"),
    "typescript": ("function f(a: number): number { return a; }\n", "program"),
    "typescriptreact": ("const x = <T,>(a: T) => <b>{a}</b>;\n", "program"),
    "go": ("package main\n\nfunc f(a int) int { return a }\n", "source_file"),
    "rust": ("fn f(a: i32) -> i32 { a }\n", "source_file"),
    "c": ("int f(int a) { return a; }\n", "translation_unit"),
    "cpp": ("template <class T> T f(T a) { return a; }\n", "translation_unit"),
    "java": ("class A { int f(int a) { return a; } }\n", "program"),
    "csharp": ("class A { int F(int a) { return a; } }\n", "compilation_unit"),
}


@pytest.mark.parametrize("language_id", sorted(SAMPLES))
def test_each_main_language_parses_its_sample_without_errors(language_id):
    source, root = SAMPLES[language_id]
    tree = parse(language_id, source)
    assert tree is not None
    assert tree.root.type == root
    assert not tree.root.has_error


def test_language_ids_are_case_insensitive_and_jsx_uses_the_javascript_grammar():
    assert grammar_for("TypeScriptReact") is grammar_for("typescriptreact")
    assert grammar_for("javascriptreact").name == "javascript"
    assert grammar_for("typescriptreact").name == "tsx"


def test_a_grammar_loads_once_and_is_shared_by_the_ids_that_name_it():
    registry = LanguageRegistry()
    first = registry.grammar_for("javascript")
    assert first is not None
    assert registry.grammar_for("javascript") is first
    assert registry.grammar_for("javascriptreact") is first


@pytest.mark.parametrize("language_id", [None, "", "plaintext", "no-such-language"])
def test_an_unknown_language_id_has_no_grammar(language_id):
    assert grammar_for(language_id) is None
    assert parse(language_id, "x = 1\n") is None


def test_every_mapped_grammar_loads_from_the_pack():
    missing = sorted({name for name in LANGUAGE_IDS.values()
                      if LanguageRegistry({name: name}).grammar_for(name) is None})
    assert missing == []


def _warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "flint.syntax" and r.levelno == logging.WARNING]


def test_a_grammar_path_that_does_not_exist_is_none_with_one_warning(caplog, tmp_path):
    registry = LanguageRegistry()
    registry.add("zig", str(tmp_path / "missing-zig.so"))
    with caplog.at_level(logging.WARNING, logger="flint.syntax"):
        assert registry.grammar_for("zig") is None
        assert registry.grammar_for("zig") is None
        assert registry.grammar_for("ZIG") is None
    assert len(_warnings(caplog)) == 1
    assert "zig" in _warnings(caplog)[0].getMessage()


def test_a_file_that_is_no_library_is_none_with_one_warning(caplog, tmp_path):
    bogus = tmp_path / "libtree-sitter-odd.so"
    bogus.write_bytes(b"not an ELF file")
    registry = LanguageRegistry()
    registry.add("odd", str(bogus))
    with caplog.at_level(logging.WARNING, logger="flint.syntax"):
        assert registry.grammar_for("odd") is None
        assert registry.grammar_for("odd") is None
    assert len(_warnings(caplog)) == 1


def test_a_library_without_the_grammar_symbol_is_none_with_one_warning(caplog):
    import tree_sitter_language_pack

    # a real shared library that exports no `tree_sitter_golang`
    lib = next((Path(tree_sitter_language_pack.__file__).parent / "bindings").glob("go.*so"))
    registry = LanguageRegistry()
    registry.add("golang", str(lib))
    with caplog.at_level(logging.WARNING, logger="flint.syntax"):
        assert registry.grammar_for("golang") is None
        assert registry.grammar_for("golang") is None
    assert len(_warnings(caplog)) == 1
    # the pack's Go grammar is another one
    assert registry.grammar_for("go") is not None


def test_a_grammar_name_the_pack_lacks_is_none_with_one_warning(caplog):
    registry = LanguageRegistry({"cobolish": "no_such_grammar", "cobolish2": "no_such_grammar"})
    with caplog.at_level(logging.WARNING, logger="flint.syntax"):
        assert registry.grammar_for("cobolish") is None
        assert registry.grammar_for("cobolish2") is None
    assert len(_warnings(caplog)) == 1


def test_a_workspace_file_gets_its_language_id_from_its_extension():
    assert language_for_path("/w/src/cart.ts") == "typescript"
    assert language_for_path("C:\\w\\App.TSX") == "typescriptreact"
    assert language_for_path("/w/Dockerfile") == "dockerfile"
    assert language_for_path("/w/README") is None
    assert language_for_path("/w/.gitignore") is None
    assert all(lang in LANGUAGE_IDS for lang in EXTENSIONS.values())
