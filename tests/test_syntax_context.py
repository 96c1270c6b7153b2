"""The context block's definitions for languages other than Python come from tree-sitter outlines
(engine/context/definitions.py ``syntax_definitions``; the ``file`` source of engine/context/workspace.py)."""

from __future__ import annotations

from engine.context.definitions import syntax_definitions
from engine.context.workspace import Workspace

TS_FAR = (
    "/** How long a request may take. */\n"
    "export const DEFAULT_TIMEOUT = 30;\n\n"
    "export function fetchAll(urls: string[], timeout: number): Promise<string[]> {\n"
    "  const out: string[] = [];\n"
    "  for (const u of urls) {\n    out.push(u);\n  }\n"
    "  return Promise.resolve(out);\n}\n\n"
)
FILLER = "".join(f"export function pad{i}(x: number): number {{\n  return x + {i};\n}}\n\n" for i in range(400))


def test_syntax_definitions_outline_a_typescript_function_without_its_body():
    defs = syntax_definitions(TS_FAR, "mod.ts", ["fetchAll", "DEFAULT_TIMEOUT"])
    assert defs is not None and "fetchAll" in defs
    line, outline = defs["fetchAll"]
    assert line == 3 and "fetchAll(urls: string[], timeout: number)" in outline and "out.push" not in outline


def test_python_and_unknown_files_are_left_to_the_existing_readers():
    assert syntax_definitions("def f():\n    pass\n", "mod.py") is None
    assert syntax_definitions("whatever", "notes.unknown-ext") is None


def test_the_file_source_gives_a_typescript_definition_far_above_the_window(tmp_path):
    text = TS_FAR + FILLER + "export function run(urls: string[]) {\n  return fetchAll("
    block = Workspace([tmp_path], sources=("file",)).gather(tmp_path / "mod.ts", text, len(text))
    assert block is not None
    body = block.chunks[0].text
    assert "fetchAll(urls: string[], timeout: number)" in body and "pad3" not in body
