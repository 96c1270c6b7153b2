"""LSP language ids -> tree-sitter grammars, each loaded lazily and once.

``grammar_for(language_id)`` is the one entry point: a ``Grammar`` for a language Flint can parse, else
None. None means "no syntax here": the callers keep their text heuristics. A grammar that fails to load
(the package missing, a broken shared library, an ABI the runtime rejects) is logged once as a warning on
the ``flint.syntax`` logger and the language stays None for the life of the registry; no exception ever
leaves this module.

Grammars come from ``tree-sitter-language-pack`` 0.13 (its wheel carries the compiled grammars; the 1.x
line downloads them at run time, which a local, offline server cannot do). ``LanguageRegistry.add`` also
loads a grammar from a shared library path (``tree_sitter_<name>`` exported), for a language the pack
lacks.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("flint.syntax")

# LSP languageId (VS Code's identifiers, plus common spellings) -> the grammar's name in the pack
LANGUAGE_IDS: dict[str, str] = {
    "python": "python",
    "javascript": "javascript",
    "javascriptreact": "javascript",  # the JavaScript grammar parses JSX
    "jsx": "javascript",
    "typescript": "typescript",
    "typescriptreact": "tsx",
    "tsx": "tsx",
    "go": "go",
    "rust": "rust",
    "c": "c",
    "cpp": "cpp",
    "cuda-cpp": "cuda",
    "objective-c": "objc",
    "java": "java",
    "csharp": "csharp",
    "kotlin": "kotlin",
    "scala": "scala",
    "swift": "swift",
    "dart": "dart",
    "ruby": "ruby",
    "php": "php",
    "lua": "lua",
    "perl": "perl",
    "r": "r",
    "julia": "julia",
    "elixir": "elixir",
    "erlang": "erlang",
    "haskell": "haskell",
    "ocaml": "ocaml",
    "fsharp": "fsharp",
    "clojure": "clojure",
    "zig": "zig",
    "nim": "nim",
    "solidity": "solidity",
    "shellscript": "bash",
    "bash": "bash",
    "powershell": "powershell",
    "sql": "sql",
    "html": "html",
    "css": "css",
    "scss": "scss",
    "vue": "vue",
    "svelte": "svelte",
    "json": "json",
    "jsonc": "json",
    "yaml": "yaml",
    "toml": "toml",
    "dockerfile": "dockerfile",
    "makefile": "make",
    "cmake": "cmake",
    "terraform": "hcl",
    "hcl": "hcl",
    "proto3": "proto",
    "proto": "proto",
    "graphql": "graphql",
    "groovy": "groovy",
}


# file extension -> LSP language id, for workspace files the editor has not opened (no languageId)
EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascriptreact", ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "typescriptreact", ".go": "go", ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".cu": "cuda-cpp", ".m": "objective-c",
    ".java": "java", ".cs": "csharp", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".swift": "swift",
    ".dart": "dart", ".rb": "ruby", ".php": "php", ".lua": "lua", ".pl": "perl", ".r": "r", ".jl": "julia",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".fs": "fsharp",
    ".clj": "clojure", ".zig": "zig", ".nim": "nim", ".sol": "solidity", ".sh": "shellscript",
    ".bash": "shellscript", ".ps1": "powershell", ".sql": "sql", ".html": "html", ".css": "css",
    ".scss": "scss", ".vue": "vue", ".svelte": "svelte", ".json": "json", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".tf": "terraform", ".proto": "proto3", ".graphql": "graphql", ".groovy": "groovy",
}


def language_for_path(path: str) -> str | None:
    """The LSP language id of a file by its extension (``Dockerfile``/``Makefile`` by name), or None."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    if name in ("Dockerfile", "Makefile", "makefile", "GNUmakefile"):
        return "dockerfile" if name == "Dockerfile" else "makefile"
    dot = name.rfind(".")
    return EXTENSIONS.get(name[dot:].lower()) if dot > 0 else None


@dataclass(frozen=True)
class Grammar:
    """A loaded grammar: ``name`` as in the pack (``tsx``), ``language`` the ``tree_sitter.Language``."""
    name: str
    language: Any

    def parser(self) -> Any:
        """A new ``tree_sitter.Parser`` (a parser is not thread-safe: one per thread or per call)."""
        from tree_sitter import Parser
        return Parser(self.language)


def _from_pack(name: str) -> Any:
    from tree_sitter_language_pack import get_language
    return get_language(name)  # type: ignore[arg-type]  # a Literal of the pack's names


def _from_library(path: str, name: str) -> Any:
    """A ``tree_sitter.Language`` from a compiled grammar: ``tree_sitter_<name>()`` returns its pointer,
    handed to py-tree-sitter as the capsule it expects."""
    from tree_sitter import Language
    lib = ctypes.CDLL(path)
    fn = lib[f"tree_sitter_{name}"]
    fn.restype = ctypes.c_void_p
    ptr = fn()
    if not ptr:
        raise OSError(f"tree_sitter_{name} returned NULL")
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return Language(new_capsule(ptr, b"tree_sitter.Language", None))


class LanguageRegistry:
    """Which grammar serves a language id, and the grammars loaded so far (thread-safe, each loaded once).

    ``ids`` maps language ids to grammar names (``LANGUAGE_IDS`` by default); ``add`` maps one more id to a
    grammar in a shared library. A grammar that fails to load is remembered as None with one warning."""

    def __init__(self, ids: dict[str, str] | None = None) -> None:
        self._ids = dict(LANGUAGE_IDS if ids is None else ids)
        self._paths: dict[str, str] = {}  # grammar name -> shared library
        self._loaded: dict[str, Grammar | None] = {}
        self._lock = threading.Lock()

    def add(self, language_id: str, path: str, name: str | None = None) -> None:
        """Serve ``language_id`` from the compiled grammar at ``path`` (exporting ``tree_sitter_<name>``,
        ``name`` defaulting to the language id). Loaded on first use like the others."""
        grammar = name or language_id.lower()
        with self._lock:
            self._ids[language_id.lower()] = grammar
            self._paths[grammar] = path
            self._loaded.pop(grammar, None)

    def grammar_name(self, language_id: str | None) -> str | None:
        if not language_id:
            return None
        return self._ids.get(language_id.lower())

    def grammar_for(self, language_id: str | None) -> Grammar | None:
        """The grammar for an LSP language id, or None (unknown id, or a grammar that did not load)."""
        name = self.grammar_name(language_id)
        if name is None:
            return None
        try:
            return self._loaded[name]  # asked on every query: no lock once loaded
        except KeyError:
            pass
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            grammar: Grammar | None
            try:
                path = self._paths.get(name)
                language = _from_library(path, name) if path else _from_pack(name)
                grammar = Grammar(name, language)
            except Exception as e:  # ImportError, OSError, LookupError, ValueError (ABI): all mean "no syntax"
                log.warning("syntax: the %s grammar did not load (%s: %s); %s falls back to text heuristics",
                            name, type(e).__name__, e, language_id)
                grammar = None
            self._loaded[name] = grammar
            return grammar


REGISTRY = LanguageRegistry()


def grammar_for(language_id: str | None) -> Grammar | None:
    """The grammar for an LSP language id from the process-wide registry, or None."""
    return REGISTRY.grammar_for(language_id)
