"""The learned gate (issue 49): whether an automatic suggestion is shown whole, up to its first doubt, or not at all.

What the server knows when an automatic suggestion is ready becomes a vector of named features (``features``):
the model's token probabilities (the first visible token's, the lowest, the mean over the tokens, where the first
doubt falls), the suggestion's length and lines, the syntax at the cursor (tree-sitter: comment or string, the
kind of the node the cursor ends and of its parent), what is right of the cursor, the language, how the last
ghosts in this document fared (taken, typed through, typed over) and the typing rhythm. A ``GateModel`` (two
heads, each a logistic regression plus optional boosted shallow trees, trained offline by scripts/train_gate.py
from the replay benchmark's records, shipped as engine/data/gate.json) gives the probability that the whole
suggestion, and that its part before the first doubt, is what the typist writes next; ``decide`` shows the
longest one that clears the model's threshold.

Pure: no I/O but ``load``; no model, no LSP. Explicit requests are never gated (the caller's rule).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.syntax.languages import grammar_for
from engine.syntax.queries import literal_kind
from engine.syntax.tree import parse_text
from engine.syntax.window import statement_window
from engine.text.gates import conditions
from engine.text.postprocess import doubt_cut
from engine.text.statements import split_cursor
from engine.types import DOUBT_KEEP, Doubts

SHOW_ALL, SHOW_HEAD, SHOW_NONE = "all", "head", "none"
FORMAT = 2  # 2: a head may add boosted trees to its linear part
DEFAULT_PATH = Path(__file__).resolve().parents[1] / "data" / "gate.json"
OUTCOMES = ("taken", "through", "over")  # what became of a ghost: Tab, typed as shown, typed over / left
LANGUAGES = {"python": "python", "javascript": "js", "javascriptreact": "js", "typescript": "js",
             "typescriptreact": "js", "go": "go", "rust": "rust"}
LEAVES = ("name", "keyword", "punct", "other")
# parent node kinds, grouped by words grammars share in their node type names (the first match wins)
PARENTS = (("call", ("call", "argument")), ("params", ("parameter",)), ("assign", ("assignment", "declarat")),
           ("member", ("attribute", "member", "field", "selector")), ("import", ("import", "use_")),
           ("control", ("if_", "for_", "while", "condition", "match", "switch", "else")),
           ("return", ("return",)), ("block", ("block", "body", "module", "source_file", "program")))
_FLOOR = 1e-4  # a probability's log is taken no lower than this


@dataclass(frozen=True)
class History:
    """How the last ghosts in a document fared, newest last (each one of ``OUTCOMES``)."""

    outcomes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rhythm:
    """The typing rhythm: the median interval between recent keystrokes and the time since the last one (s)."""

    interval: float | None = None
    since: float | None = None


def head_of(text: str, doubts: Doubts) -> str:
    """``text`` before its first doubt (a token the model gave less than DOUBT_KEEP, as ``doubt_cut`` cuts),
    or "" when no shorter visible part is left."""
    head = doubt_cut(text, doubts, DOUBT_KEEP)
    return head if head.strip() and len(head) < len(text) else ""


def syntax_at(language: str | None, prefix: str, line_suffix: str) -> tuple[str | None, str, str, bool]:
    """(literal: "comment" | "string" | None, the kind of the last token before the cursor, the group of the
    nearest of its three ancestors that has one, whether the parse there is an error), read from the parse of the
    cursor's statement window (the text engine/text/gates parses: memoized)."""
    grammar = grammar_for(language)
    if grammar is None:
        return None, "other", "other", False
    before = statement_window(prefix)
    tree = parse_text(grammar, before + line_suffix)
    literal = literal_kind(tree, len(before))
    b = tree.byte_at(len(before.rstrip()))  # the token before the blanks the cursor follows
    if b <= 0:
        return literal, "other", "block", False
    leaf = tree.root.descendant_for_byte_range(b - 1, b)
    kind = str(leaf.type)
    if "identifier" in kind or kind == "name":
        leaf_group = "name"
    elif kind.isalpha() and not leaf.is_named:
        leaf_group = "keyword"
    elif not leaf.is_named and not any(ch.isalnum() for ch in kind):
        leaf_group = "punct"
    else:
        leaf_group = "other"
    group, node = "other", leaf.parent
    error = node is not None and node.is_error
    if error:  # an unfinished statement: read from the tokens the parser left loose
        group = _loose_group(kind, [str(c.type) for c in node.children[:12]])
    for _ in range(3 if not error else 0):
        if node is None:
            break
        ptype = str(node.type)
        found = next((name for name, words in PARENTS if any(w in ptype for w in words)), None)
        if found is not None:
            group = found
            break
        node = node.parent
    return literal, leaf_group, group, error


def _loose_group(last: str, kinds: list[str]) -> str:
    """The group of an unfinished statement from its loose tokens (``last``: the one before the cursor)."""
    if last == ".":
        return "member"
    for k in kinds:
        if k in ("import", "from", "use", "require"):
            return "import"
        if k == "return":
            return "return"
        if k in ("if", "for", "while", "elif", "match", "switch", "else"):
            return "control"
    if "(" in kinds and kinds.count("(") > kinds.count(")"):
        return "call"
    if any(k in ("=", ":=", "+=", "-=", "let", "const", "var") for k in kinds):
        return "assign"
    return "other"


def features(text: str, doubts: Doubts, tokens: int, prefix: str, suffix: str, language: str | None,
             history: History = History(), rhythm: Rhythm = Rhythm(), source: str = "model") -> dict[str, float]:
    """The gate's features for a suggestion ``text`` (LF, what would be shown) at a cursor (``prefix`` /
    ``suffix``: the text before and after it); ``doubts``: (offset in ``text``, probability) of the tokens the
    model gave less than DOUBT_KEEP; ``tokens``: how many it generated."""
    f: dict[str, float] = {}
    inside = [(at, p) for at, p in doubts if at < len(text)]
    lead = 1.0
    for at, p in inside:  # the lead doubt: the lowest before any visible character, or the first visible token
        if text[:at].strip():
            break
        lead = min(lead, p)
    later = [(at, p) for at, p in inside if text[:at].strip()]
    f["lead_logp"] = math.log(max(_FLOOR, lead))
    f["min_logp"] = math.log(max(_FLOOR, min([lead] + [p for _, p in later])))
    f["mean_logp"] = sum(math.log(max(_FLOOR, p)) for _, p in inside) / max(1, tokens)
    f["doubts"] = min(len(later), 8) / 8
    f["first_doubt_at"] = later[0][0] / len(text) if later and text else 1.0
    f["no_doubt"] = float(not inside)
    head = head_of(text, doubts)
    f["log_chars"] = math.log1p(len(text.strip()))
    f["lines"] = min(text.strip("\n").count("\n"), 8) / 8
    f["head_share"] = len(head) / len(text) if head else 1.0
    f["starts_newline"] = float(text.startswith("\n"))
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    gates = conditions(prefix, suffix, None)  # the line's gates; the syntax is read below, from one parse
    for g in ("word", "after_block"):
        f[g] = float(g in gates)
    f["mid_line"] = float(bool(line_prefix.strip()))
    f["suffix_blank"] = float(not line_suffix.strip())
    last = line_prefix.rstrip(" \t")[-1:]
    f["prev_open"] = float(bool(last) and last in "([{")
    f["prev_dot"] = float(last == ".")
    f["prev_op"] = float(bool(last) and last in "=,:+-*/<>!&|")
    f["prev_space"] = float(line_prefix[-1:] in (" ", "\t"))
    literal, leaf, parent, error = syntax_at(language, prefix, line_suffix) if language else \
        (None, "other", "other", False)
    f["in_comment"] = float(literal == "comment")
    f["in_string"] = float(literal == "string")
    f["parse_error"] = float(error)
    for name in LEAVES:
        f[f"leaf_{name}"] = float(leaf == name)
    for name in [p for p, _ in PARENTS] + ["other"]:
        f[f"parent_{name}"] = float(parent == name)
    lang = LANGUAGES.get(language or "", "other")
    for name in ("python", "js", "go", "rust", "other"):
        f[f"lang_{name}"] = float(lang == name)
    recent = history.outcomes[-8:]
    f["hist_n"] = math.log1p(len(recent))
    for o in OUTCOMES:
        f[f"hist_{o}"] = sum(x == o for x in recent) / len(recent) if recent else 0.0
        f[f"last_{o}"] = float(bool(recent) and recent[-1] == o)
    f["gap_log"] = math.log(min(5.0, max(0.02, rhythm.interval))) if rhythm.interval else math.log(0.2)
    f["since_log"] = math.log(min(5.0, max(0.02, rhythm.since))) if rhythm.since is not None else math.log(5.0)
    f["src_typethrough"] = float(source in ("memory", "type-through"))
    f["src_disk"] = float(source == "disk")
    return f


Node = tuple[float, ...]  # (feature index, threshold, left, right): x < threshold goes left; (-1, value): a leaf


@dataclass(frozen=True)
class Head:
    """One logit over the standardized features: a linear part plus boosted shallow trees (either may be empty)."""

    weights: tuple[float, ...]
    bias: float
    trees: tuple[tuple[Node, ...], ...] = ()
    _flat: _Flat | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_flat", _Flat.of(self.trees) if self.trees else None)

    def logit(self, x: list[float]) -> float:
        z = self.bias + sum(w * v for w, v in zip(self.weights, x, strict=True))
        if self._flat is not None:
            for leaf in self._flat.leaves(x):  # added one by one, in order: the same sum as a walk tree by tree
                z += leaf
        return z


@dataclass(frozen=True)
class _Flat:
    """A head's trees as arrays, walked all at once a level per step (a walk in Python, node by node, was most of
    the gate's decision; docs/benchmarks/gate.md, "Cost"). A leaf points to itself, so a shallower tree stays there."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    depth: int

    @classmethod
    def of(cls, trees: tuple[tuple[Node, ...], ...]) -> _Flat:
        feature: list[int] = []
        left: list[int] = []
        right: list[int] = []
        roots: list[int] = []
        threshold: list[float] = []
        value: list[float] = []
        depth = 0
        for nodes in trees:
            base = len(feature)
            roots.append(base)
            level = [0] * len(nodes)  # children come after their parent (checked by _trees)
            for at, node in enumerate(nodes):
                if node[0] >= 0:
                    feature.append(int(node[0]))
                    threshold.append(node[1])
                    left.append(base + int(node[2]))
                    right.append(base + int(node[3]))
                    value.append(0.0)
                    for child in (int(node[2]), int(node[3])):
                        level[child] = level[at] + 1
                else:
                    feature.append(0)
                    threshold.append(0.0)
                    left.append(base + at)
                    right.append(base + at)
                    value.append(node[1])
            depth = max(depth, max(level))
        return cls(np.array(feature, np.intp), np.array(threshold, np.float64), np.array(left, np.intp),
                   np.array(right, np.intp), np.array(value, np.float64), np.array(roots, np.intp), depth)

    def leaves(self, x: list[float]) -> list[float]:
        """Each tree's leaf value for the standardized features ``x``, in tree order."""
        xs = np.asarray(x, np.float64)
        at = self.roots
        for _ in range(self.depth):
            at = np.where(xs[self.feature[at]] < self.threshold[at], self.left[at], self.right[at])
        return self.value[at].tolist()


def _trees(raw: list, width: int) -> tuple[tuple[Node, ...], ...]:
    """A head's trees from its file, checked: every split names a feature and its children come after it (so a
    walk from the root ends at a leaf)."""
    trees = tuple(tuple(tuple(float(v) for v in node) for node in tree) for tree in raw)
    for nodes in trees:
        if not nodes:
            raise ValueError("gate model: an empty tree")
        for at, node in enumerate(nodes):
            split = node[0] >= 0
            if len(node) != (4 if split else 2) or split and (node[0] >= width or not all(
                    at < node[i] < len(nodes) and node[i] == int(node[i]) for i in (2, 3))):
                raise ValueError("gate model: a tree node is (feature, threshold, left, right) or (-1, value)")
    return trees


@dataclass(frozen=True)
class GateModel:
    names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    heads: dict[str, Head]  # "all": the whole suggestion is right; "head": its part before the first doubt is
    threshold: float  # shown when the probability of being right is at least this
    trained: dict[str, Any]  # how it was made (scripts/train_gate.py): shown by docs/benchmarks/gate.md

    def logits(self, f: dict[str, float]) -> dict[str, float]:
        """Each head's logit for a feature dict (a feature the dict lacks counts as its training mean)."""
        x = [(f.get(n, m) - m) / s for n, m, s in zip(self.names, self.mean, self.scale, strict=True)]
        return {k: h.logit(x) for k, h in self.heads.items()}

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "features": list(self.names), "mean": list(self.mean), "scale": list(self.scale),
                "heads": {k: {"w": list(h.weights), "b": h.bias, "trees": [[list(n) for n in t] for t in h.trees]}
                          for k, h in self.heads.items()},
                "threshold": self.threshold, "trained": self.trained}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GateModel:
        if data.get("format") not in (1, FORMAT):  # 1: linear heads only
            raise ValueError(f"gate model format {data.get('format')!r}, expected {FORMAT}")
        names = tuple(str(n) for n in data["features"])
        heads = {k: Head(tuple(float(w) for w in h["w"]), float(h["b"]), _trees(h.get("trees", []), len(names)))
                 for k, h in data["heads"].items()}
        if set(heads) != {SHOW_ALL, SHOW_HEAD} or any(len(h.weights) != len(names) for h in heads.values()):
            raise ValueError("gate model: heads 'all' and 'head', one weight per feature")
        mean, scale = tuple(float(v) for v in data["mean"]), tuple(float(v) or 1.0 for v in data["scale"])
        if len(mean) != len(names) or len(scale) != len(names):
            raise ValueError("gate model: one mean and scale per feature")
        return cls(names, mean, scale, heads, float(data["threshold"]), dict(data.get("trained", {})))


def load(path: Path | None = None) -> GateModel | None:
    """The shipped model (engine/data/gate.json), or None when there is none (the gate then shows everything)."""
    path = path or DEFAULT_PATH
    try:
        return GateModel.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def decide(logits: dict[str, float], threshold: float, *, has_head: bool, bias: float = 0.0,
           mid_line: bool = True) -> str:
    """Show the whole suggestion, its part before the first doubt, or nothing: the longest whose probability of
    being right (the model's logit plus the user's ``bias``, lsp_server/gate_user.py) clears ``threshold``.
    At a line's indentation (``mid_line`` False: after Enter) always the whole: users stop there to read what
    comes next, and a ghost hidden there costs a pause shown (docs/benchmarks/gate.md, session 71)."""
    if not mid_line or sigmoid(logits[SHOW_ALL] + bias) >= threshold:
        return SHOW_ALL
    if has_head and sigmoid(logits[SHOW_HEAD] + bias) >= threshold:
        return SHOW_HEAD
    return SHOW_NONE
