"""Definitions in a document from its tree: ``definitions(tree)`` (top-level ones and their members, each
with kind, name, extent and signature), ``enclosing_definition(tree, offset)`` (the innermost one around a
position) and ``outlines(tree, names)``, the context block's outlines with the return shape of
``engine.context.sources.regex_definitions`` (name -> (line, outline text)).

Definitions are node types per grammar (functions, methods, classes, structs, interfaces, traits, impls,
enums, namespaces; a variable bound to an arrow function counts as a function). An outline is the
definition's text with every function body inside it replaced by ``{ ... }`` (Python: ``...`` after the
docstring), with the comments and attributes right above it: signatures, fields and doc comments are
what the model needs to use a name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.syntax.nodes import ancestors, is_comment, is_string
from engine.syntax.tree import SyntaxTree

# ---- definition nodes -----------------------------------------------------------------------------------------
_FUNCTION_KINDS = {"function", "method", "constructor"}
_DEFINITIONS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class"},
    "javascript": {"function_declaration": "function", "generator_function_declaration": "function",
                   "class_declaration": "class", "method_definition": "method"},
    "go": {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
    "rust": {"function_item": "function", "function_signature_item": "function", "struct_item": "struct",
             "enum_item": "enum", "union_item": "union", "trait_item": "trait", "impl_item": "impl",
             "mod_item": "module", "macro_definition": "macro"},
    "c": {"function_definition": "function", "struct_specifier": "struct", "enum_specifier": "enum",
          "union_specifier": "union"},
    "java": {"class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
             "record_declaration": "record", "annotation_type_declaration": "interface",
             "method_declaration": "method", "constructor_declaration": "constructor"},
    "csharp": {"class_declaration": "class", "interface_declaration": "interface", "struct_declaration": "struct",
               "enum_declaration": "enum", "record_declaration": "record", "method_declaration": "method",
               "constructor_declaration": "constructor", "namespace_declaration": "namespace"},
    "kotlin": {"class_declaration": "class", "object_declaration": "class", "function_declaration": "function"},
    "ruby": {"method": "method", "singleton_method": "method", "class": "class", "module": "module"},
    "php": {"function_definition": "function", "class_declaration": "class", "interface_declaration": "interface",
            "trait_declaration": "trait", "method_declaration": "method"},
}
_DEFINITIONS["typescript"] = _DEFINITIONS["javascript"] | {
    "abstract_class_declaration": "class", "interface_declaration": "interface", "type_alias_declaration": "type",
    "enum_declaration": "enum", "function_signature": "function", "method_signature": "method",
    "abstract_method_signature": "method", "internal_module": "namespace"}
_DEFINITIONS["tsx"] = _DEFINITIONS["typescript"]
_DEFINITIONS["cpp"] = _DEFINITIONS["c"] | {"class_specifier": "class", "namespace_definition": "namespace"}
_DEFINITIONS["cuda"] = _DEFINITIONS["cpp"]
# a variable bound to a function (`const f = (a) => ...`) is a function definition
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration"})
_NAME_NODES = frozenset({"identifier", "field_identifier", "type_identifier", "qualified_identifier",
                         "destructor_name", "operator_name", "property_identifier", "constant", "name",
                         "simple_identifier"})
MAX_OUTLINE_LINES = 48
MAX_DOC_LINES = 12


@dataclass(frozen=True)
class Definition:
    """A definition in a document: ``kind`` (function, method, class, struct, impl, ...), ``name``, its extent
    in code points (decorators, ``export`` and the like included), its first line (0-based), ``signature``
    (its text up to the body, e.g. ``func (s *S) Get(k string) (int, error)``) and the enclosing
    definition's name (None at the top)."""
    kind: str
    name: str
    start: int
    end: int
    line: int
    signature: str
    parent: str | None
    node: Any = field(default=None, repr=False, compare=False)


def _kind(grammar: str, node: Any) -> str | None:
    table = _DEFINITIONS.get(grammar)
    if table is None:
        return None
    kind = table.get(node.type)
    if kind is None and node.type == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is not None and value.type in _FUNCTION_VALUES:
            return "function"
    if kind in ("struct", "enum", "union") and grammar in ("c", "cpp", "cuda") and \
            node.child_by_field_name("body") is None:
        return None  # `struct p *x;` uses a type, it does not define one
    return kind


def _name(tree: SyntaxTree, node: Any) -> str:
    n = node.child_by_field_name("name")
    if n is not None:
        return tree.node_text(n)
    d = node.child_by_field_name("declarator")
    while d is not None:
        if d.type in _NAME_NODES:
            return tree.node_text(d)
        nxt = d.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in d.named_children if c.type in _NAME_NODES), None)
        d = nxt
    t = node.child_by_field_name("type")  # Rust's `impl Trait for Type`: named by the type
    if t is not None:
        return tree.node_text(t)
    first = next((c for c in node.named_children if c.type in _NAME_NODES), None)
    return tree.node_text(first) if first is not None else ""


def _body(node: Any) -> Any:
    body = node.child_by_field_name("body")
    if body is None and node.type == "variable_declarator":
        value = node.child_by_field_name("value")
        body = value.child_by_field_name("body") if value is not None else None
    if body is None:  # Go's `type S struct {...}`: the braces of its type
        for c in node.named_children:
            for g in [c, *c.named_children]:
                brace = next((k for k in g.children if k.type == "{"), None)
                if brace is not None:
                    return brace
    return body


def _outer(node: Any) -> Any:
    """The node a definition's text starts with: its ``export``/decorators/declaration wrapper."""
    while node.parent is not None and (node.parent.type in _WRAPPERS or
                                       node.type == "variable_declarator" and
                                       node.parent.type in ("lexical_declaration", "variable_declaration")):
        node = node.parent
    if node.type == "type_spec" and node.parent is not None and node.parent.type == "type_declaration" \
            and node.parent.named_child_count == 1:
        node = node.parent
    return node


def _definition(tree: SyntaxTree, node: Any, kind: str, parent: str | None) -> Definition:
    outer = _outer(node)
    body = _body(node)
    sig_end = body.start_byte if body is not None else node.end_byte
    signature = tree.source[outer.start_byte: sig_end].decode("utf-8", errors="replace").rstrip()
    if body is not None and signature.endswith(":"):
        signature = signature[:-1].rstrip() if tree.grammar.name != "python" else signature
    start, end = tree.offset_at(outer.start_byte), tree.offset_at(outer.end_byte)
    return Definition(kind, _name(tree, node), start, end, outer.start_point[0], signature, parent, node)


def definitions(tree: SyntaxTree) -> list[Definition]:
    """The document's definitions in order: top-level ones and their members (methods, nested classes),
    not the functions local to a function body."""
    out: list[Definition] = []
    gname = tree.grammar.name
    stack: list[tuple[Any, str | None]] = [(tree.root, None)]  # iterative: deep trees do not recurse
    while stack:
        node, parent = stack.pop()
        kind = _kind(gname, node) if node is not tree.root else None
        if kind is not None:
            d = _definition(tree, node, kind, parent)
            out.append(d)
            if kind in _FUNCTION_KINDS:
                continue
            parent = d.name
        stack.extend((c, parent) for c in reversed(node.named_children))
    return out


def enclosing_definition(tree: SyntaxTree, offset: int) -> Definition | None:
    """The innermost definition (local functions included) containing code point ``offset``."""
    b = tree.byte_at(offset)
    node = tree.root.descendant_for_byte_range(b, b)
    found: list[tuple[Any, str]] = []
    for a in ancestors(node):
        kind = _kind(tree.grammar.name, a)
        if kind is not None:
            found.append((a, kind))
    if not found:
        return None
    node, kind = found[0]
    parent = None
    if len(found) > 1:
        parent = _name(tree, found[1][0])
    return _definition(tree, node, kind, parent)


# ---- outlines for the context block ----------------------------------------------------------------------
def _doc_above(tree: SyntaxTree, outer: Any) -> int:
    """Start byte of the comments and attributes right above a definition (no blank line between)."""
    start = outer.start_byte
    prev = outer.prev_sibling
    lines = 0
    while prev is not None and (is_comment(prev) or prev.type in ("attribute_item", "decorator")) and \
            lines < MAX_DOC_LINES and prev.end_point[0] >= tree.root.descendant_for_byte_range(
                start, start).start_point[0] - 1:
        lines += prev.end_point[0] - prev.start_point[0] + 1
        start = prev.start_byte
        prev = prev.prev_sibling
    return start


def outline(tree: SyntaxTree, d: Definition) -> str:
    """A definition as the model needs it to use it: the comments right above it, its text with every
    function body inside replaced by ``{ ... }`` (Python: ``...``), at most ``MAX_OUTLINE_LINES`` lines."""
    outer = _outer(d.node)
    start = _doc_above(tree, outer)
    cuts: list[tuple[int, int, bytes]] = []

    def collect(node: Any, is_root: bool) -> None:
        kind = _kind(tree.grammar.name, node)
        if kind in _FUNCTION_KINDS and (is_root or node is not d.node):
            body = _body(node)
            if body is not None:
                if tree.grammar.name == "python":
                    col = body.start_point[1]
                    doc = body.named_children[0] if body.named_child_count else None
                    if doc is not None and doc.type == "expression_statement" and doc.named_child_count:
                        doc = doc.named_children[0]
                    keep = doc.end_byte if doc is not None and is_string(doc) else body.start_byte
                    sep = b"\n" + b" " * col if keep != body.start_byte else b""
                    cuts.append((keep, body.end_byte, sep + b"..."))
                else:
                    cuts.append((body.start_byte, body.end_byte, b"{ ... }"))
                return
        for c in node.named_children:
            collect(c, False)

    collect(d.node, True)
    parts: list[bytes] = []
    pos = start
    for lo, hi, rep in sorted(cuts):
        if lo < pos:
            continue
        parts += [tree.source[pos:lo], rep]
        pos = hi
    parts.append(tree.source[pos: outer.end_byte])
    text = b"".join(parts).decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(lines) > MAX_OUTLINE_LINES:
        lines = lines[:MAX_OUTLINE_LINES] + ["    ..."]
    return "\n".join(lines) + "\n"


def outlines(tree: SyntaxTree, names: Iterable[str] | None = None) -> dict[str, tuple[int, str]]:
    """Top-level definitions (all when ``names`` is None) as name -> (first line, outline), the shape of
    ``engine.context.sources.regex_definitions``. A name defined twice (Rust's ``struct S`` and its ``impl S``
    blocks) gets its outlines one after the other, at the first one's line."""
    want = None if names is None else set(names)
    out: dict[str, tuple[int, str]] = {}
    for d in definitions(tree):
        if d.parent is not None or (want is not None and d.name not in want):
            continue
        text = outline(tree, d)
        if d.name in out:
            line, prev = out[d.name]
            out[d.name] = (line, prev + text)
        else:
            out[d.name] = (d.line, text)
    return out
