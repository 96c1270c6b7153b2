"""The LSP4IJ template for JetBrains IDEs (editor-extension/jetbrains/flint/): no JetBrains IDE runs here,
so the template is checked against what LSP4IJ's importer reads (LanguageServerTemplateManager /
LanguageServerTemplateDeserializer: a folder with template.json, settings.json, initializationOptions.json,
settings.schema.json, README.md) and against Flint itself (the command parses, the settings are the
server's, with its defaults, and the server takes them without a warning).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from lsp_server.settings import _FIELDS, SECRET_FIELDS, Settings, parse_settings

ROOT = Path(__file__).resolve().parent.parent
DIR = ROOT / "editor-extension" / "jetbrains" / "flint"
PKG = json.loads((ROOT / "editor-extension" / "vscode" / "package.json").read_text())
PROPS = PKG["contributes"]["configuration"]["properties"]
SERVER = {camel: name for camel, (name, _) in _FIELDS.items() if name not in SECRET_FIELDS}
SECRETS = {camel for camel, (name, _) in _FIELDS.items() if name in SECRET_FIELDS}
# The keys LSP4IJ's template deserializer reads; anything else in template.json is silently dropped.
TEMPLATE_KEYS = {"id", "name", "programArgs", "fileTypeMappings", "languageMappings"}
PROGRAM_ARG_OS = {"default", "windows", "mac", "unix"}


def _load(name: str):
    return json.loads((DIR / name).read_text())


def _default(name: str):
    v = getattr(Settings(), name)
    return list(v) if isinstance(v, tuple) else v


def test_folder_has_what_the_importer_reads():
    names = {p.name for p in DIR.iterdir()}
    assert {"template.json", "settings.json", "initializationOptions.json", "settings.schema.json",
            "README.md"} <= names, names
    for n in names:
        if n.endswith(".json"):
            _load(n)  # valid JSON


def test_template_descriptor():
    t = _load("template.json")
    assert set(t) <= TEMPLATE_KEYS, f"LSP4IJ ignores {set(t) - TEMPLATE_KEYS}"
    assert t["id"] == "flint" and t["name"] == "Flint"
    assert isinstance(t["programArgs"], dict) and "default" in t["programArgs"]
    assert set(t["programArgs"]) <= PROGRAM_ARG_OS
    assert t["fileTypeMappings"], "no file mappings: the server would attach to nothing"
    langs = set()
    for m in t["fileTypeMappings"]:
        assert set(m) == {"fileType", "languageId"}, m
        ft = m["fileType"]
        assert set(ft) <= {"name", "patterns"} and ft, m
        if "patterns" in ft:
            assert ft["patterns"] and all(isinstance(p, str) and p.startswith("*.") for p in ft["patterns"]), m
        langs.add(m["languageId"])
    assert "python" in langs
    for m in t.get("languageMappings", []):
        assert set(m) == {"language", "languageId"}, m


def test_command_is_one_flint_accepts():
    """Each OS's command, with its interpreter replaced by this one, parses (`--help` exits 0)."""
    for os_key, cmd in _load("template.json")["programArgs"].items():
        argv = shlex.split(cmd)
        assert argv[0] in ("python3", "python"), (os_key, argv)
        assert argv[1:4] == ["-m", "lsp_server.cli", "serve"], (os_key, argv)
        proc = subprocess.run([sys.executable, *argv[1:], "--help"], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
        assert proc.returncode == 0, (os_key, proc.stderr[-2000:])


def test_settings_are_the_servers_with_its_defaults():
    settings = _load("settings.json")
    assert set(settings) == {"flint"}
    flint = settings["flint"]
    assert set(flint) == set(SERVER), set(flint) ^ set(SERVER)
    assert not SECRETS & set(flint), "the API key belongs in the environment, not IDE settings"
    for camel, name in SERVER.items():
        assert flint[camel] == _default(name), camel
    parsed, warnings = parse_settings(settings)
    assert warnings == [] and parsed == Settings()
    assert _load("initializationOptions.json") == flint


def _check(value, schema: dict, where: str) -> None:
    """The parts of JSON Schema the settings schema uses (type, enum, items, minimum/maximum, objects)."""
    types = {"boolean": bool, "integer": int, "number": int | float, "string": str, "array": list, "object": dict}
    t = schema["type"]
    if isinstance(t, list):  # e.g. ["number", "null"]: null is the server's own choice
        if value is None:
            assert "null" in t, where
            return
        (t,) = [x for x in t if x != "null"]
    assert isinstance(value, types[t]) and not (t == "integer" and isinstance(value, bool)), (where, value)
    if "enum" in schema:
        assert value in schema["enum"], where
    if "minimum" in schema:
        assert schema["minimum"] <= value <= schema["maximum"], where
    if t == "array":
        for v in value:
            _check(v, schema["items"], where + "[]")
    if t == "object":
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            assert set(value) <= set(props), (where, set(value) - set(props))
        for k, v in value.items():
            if k in props:
                _check(v, props[k], f"{where}.{k}")


def test_schema_matches_the_vscode_settings_and_validates_settings_json():
    schema = _load("settings.schema.json")
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    flint = schema["properties"]["flint"]
    assert flint["additionalProperties"] is False
    assert set(flint["properties"]) == set(SERVER)
    for camel, prop in flint["properties"].items():
        vs = PROPS[f"flint.{camel}"]
        for k in ("type", "default", "description", "enum", "minimum", "maximum", "items"):
            assert prop.get(k) == vs.get(k), (camel, k)
    _check(_load("settings.json"), schema, "settings")
    # and it would catch a wrong value
    bad = {"flint": {"maxVariants": 99}}
    try:
        _check(bad, schema, "bad")
    except AssertionError:
        pass
    else:
        raise AssertionError("the schema check let maxVariants=99 through")


def test_readme_maps_every_switch():
    readme = (ROOT / "editor-extension" / "jetbrains" / "README.md").read_text()
    for needle in ("Import from custom template", "editor-extension/jetbrains/flint", "FLINT_REMOTE_API_KEY",
                   "Server configuration", "Initialization options", "Mappings", "Trace", "snooze",
                   "Pick Variant", "flint-lsp", "window/logMessage"):
        assert needle in readme, needle
