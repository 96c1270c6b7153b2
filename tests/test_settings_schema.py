"""One settings schema for every editor: lsp_server/settings.py is the source.

A server setting missing from the VS Code extension's package.json (same name, type, default, enum,
range, and a description) or from the settings table in docs/editors.md (which the Neovim and JetBrains
sections point to) fails here. Secrets are the exception: they must NOT be VS Code settings (they live in
SecretStorage, set by a command).
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from dataclasses import fields
from pathlib import Path

import pytest

from lsp_server.settings import _FIELDS, SECRET_FIELDS, Settings, parse_settings

ROOT = Path(__file__).resolve().parent.parent
PKG = json.loads((ROOT / "editor-extension" / "vscode" / "package.json").read_text())
PROPS: dict = PKG["contributes"]["configuration"]["properties"]
DOCS = (ROOT / "docs" / "editors.md").read_text()
UTIL_TS = (ROOT / "editor-extension" / "vscode" / "src" / "util.ts").read_text()

HINTS = typing.get_type_hints(Settings)
DEFAULTS = Settings()
SERVER = [(camel, name) for camel, (name, _) in _FIELDS.items() if name not in SECRET_FIELDS]
SECRETS = [camel for camel, (name, _) in _FIELDS.items() if name in SECRET_FIELDS]


def _json_type(name: str) -> str | list[str]:
    t = HINTS[name]
    args = typing.get_args(t)
    if type(None) in args:  # optional: null means the server's own choice
        (inner,) = [a for a in args if a is not type(None)]
        assert inner in (float, bool), f"no JSON type for {name}: {t}"
        return ["number" if inner is float else "boolean", "null"]
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "number"
    if t is str or typing.get_origin(t) is typing.Literal:
        return "string"
    if typing.get_origin(t) is tuple:
        return "array"
    raise AssertionError(f"no JSON type for {name}: {t}")


def _default(name: str):
    v = getattr(DEFAULTS, name)
    return list(v) if isinstance(v, tuple) else v


def _checker_vars(camel: str) -> dict:
    """The bounds (lo, hi) or choices a field's parser closes over; empty for the plain ones."""
    return dict(inspect.getclosurevars(_FIELDS[camel][1]).nonlocals)


def _client_keys() -> set[str]:
    m = re.search(r"export const CLIENT_KEYS = \[([^\]]*)\]", UTIL_TS)
    assert m, "CLIENT_KEYS not found in util.ts"
    return set(re.findall(r"'([^']+)'", m.group(1)))


def test_fields_table_covers_the_dataclass():
    assert {n for _, n in SERVER} | SECRET_FIELDS == {f.name for f in fields(Settings)}


@pytest.mark.parametrize("camel,name", SERVER)
def test_package_json_has_every_server_setting(camel, name):
    prop = PROPS.get(f"flint.{camel}")
    assert prop is not None, f"flint.{camel} is missing from package.json"
    assert prop["type"] == _json_type(name), (camel, prop["type"])
    assert prop["default"] == _default(name), (camel, prop["default"], _default(name))
    assert len(prop.get("description", "")) > 20, f"flint.{camel} needs a description"
    # The default must be a value the server accepts without a warning.
    _, warnings = parse_settings({camel: prop["default"]})
    assert not [w for w in warnings if camel in w], warnings
    cv = _checker_vars(camel)
    if "choices" in cv:
        assert prop.get("enum") == list(cv["choices"]), (camel, prop.get("enum"), cv["choices"])
    if "lo" in cv:
        assert (prop.get("minimum"), prop.get("maximum")) == (cv["lo"], cv["hi"]), camel
    if prop["type"] == "array":
        assert prop["items"]["type"] == "string"


def test_remote_for_items_are_the_server_kinds():
    from engine.policy.routing import REMOTE_KINDS

    assert PROPS["flint.remoteFor"]["items"]["enum"] == list(REMOTE_KINDS)


def test_secrets_are_not_settings_but_have_a_command():
    assert SECRETS == ["remoteApiKey"]
    for camel in SECRETS:
        assert f"flint.{camel}" not in PROPS, "secrets belong in SecretStorage, not settings.json"
    commands = {c["command"] for c in PKG["contributes"]["commands"]}
    assert "flint.setRemoteApiKey" in commands
    assert re.search(r"SECRET_KEYS = \['remoteApiKey'\]", UTIL_TS)


def test_no_unknown_vscode_settings():
    """Every flint.* property is a server setting or one of the client's own (util.ts CLIENT_KEYS)."""
    server = {c for c, _ in SERVER}
    client = _client_keys()
    assert not server & client, server & client
    extra = {k[len("flint."):] for k in PROPS} - server - client
    assert not extra, f"package.json settings the server does not know: {extra}"
    assert client <= {k[len("flint."):] for k in PROPS}, "a client-only key without a package.json entry"


def _docs_table() -> dict[str, list[str]]:
    """docs/editors.md, section 'Settings': {name: [type, default, description]}."""
    sec = DOCS.split("\n## Settings", 1)
    assert len(sec) == 2, "docs/editors.md needs a '## Settings' section"
    rows: dict[str, list[str]] = {}
    for line in sec[1].split("\n## ", 1)[0].splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_docs_table_has_every_setting():
    rows = _docs_table()
    assert set(rows) == {c for c, _ in _FIELDS.items()}, set(rows) ^ set(_FIELDS)
    for camel, name in SERVER:
        typ, default, desc = rows[camel]
        prop = PROPS[f"flint.{camel}"]
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        assert typ.split(" ")[0].rstrip(":") == types[0], (camel, typ)
        assert ("or null" in typ) == ("null" in types), (camel, typ)
        assert json.loads(default.strip("`")) == _default(name), (camel, default)
        assert desc == prop["description"], f"docs/editors.md and package.json describe {camel} differently"
        cv = _checker_vars(camel)
        for choice in cv.get("choices", ()):
            assert choice in typ, (camel, choice, typ)
        if "lo" in cv:
            assert f"{cv['lo']}..{cv['hi']}" in typ.replace(",", ""), (camel, typ)


def test_neovim_docs_point_to_the_table_and_defaults_are_the_servers():
    nv = DOCS.split("\n## Neovim", 1)[1].split("\n## ", 1)[0]
    assert "settings = {" in nv and "Settings" in nv
    lua = (ROOT / "editor-extension" / "neovim" / "lua" / "flint" / "init.lua").read_text()
    m = re.search(r"\n  settings = \{([^}]*)\}", lua)
    assert m, "M.defaults.settings not found"
    # The plugin sends only what the user sets; any default it does list must be the server's.
    for key, value in re.findall(r"(\w+) = ([^,\n]+)", m.group(1)):
        assert key in _FIELDS, key
        assert json.loads(value.replace("'", '"')) == _default(_FIELDS[key][0]), key
