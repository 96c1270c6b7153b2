"""Boosted shallow trees for the learned gate's heads (issue 49: "logistic regression or a few shallow trees"),
numpy only: each round fits one tree of depth ``depth`` to the logistic loss's gradient (Newton leaf values,
splits chosen on each feature's quantiles, at least ``min_leaf`` examples a side). The nodes are the format
engine/policy/gate.py walks: (feature, threshold, left, right) with x < threshold going left, or (-1, value)."""

from __future__ import annotations

import numpy as np

Tree = list[list[float]]


def fit_trees(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None, *, start: np.ndarray | None = None,
              rounds: int = 100, depth: int = 3, lr: float = 0.05, l2: float = 1.0, min_leaf: float = 40.0,
              bins: int = 32) -> list[Tree]:
    """Trees whose summed leaves, added to the logits ``start`` (default 0), fit ``y`` (0/1), each example counted
    ``weight`` times."""
    n, d = x.shape
    w = np.ones(n) if weight is None else weight
    edges = [_edges(x[:, j], bins) for j in range(d)]
    # codes[i, j]: how many of feature j's edges are <= x[i, j]; a split after code b sends x < edges[j][b] left
    codes = np.stack([np.searchsorted(edges[j], x[:, j], side="right") for j in range(d)], axis=1)
    f = np.zeros(n) if start is None else start.astype(float).copy()
    trees: list[Tree] = []
    for _ in range(rounds):
        p = 1 / (1 + np.exp(-f))
        tree: Tree = []
        _grow(tree, np.arange(n), 0, codes, w * (p - y), w * p * (1 - p), edges,
              dict(depth=depth, lr=lr, l2=l2, min_leaf=min_leaf))
        trees.append(tree)
        f += predict_tree(tree, x)
    return trees


def _edges(values: np.ndarray, bins: int) -> np.ndarray:
    """A feature's split points: about ``bins`` quantiles, each moved halfway between the two values it falls
    between, so that no example lies on one (a file's rounded standardization cannot send it the other way)."""
    seen = np.unique(values)
    at = np.unique(np.searchsorted(seen, np.quantile(values, np.linspace(0, 1, bins + 1)[1:-1]), side="left"))
    at = at[(at > 0) & (at < len(seen))]
    return (seen[at - 1] + seen[at]) / 2


def _grow(tree: Tree, rows: np.ndarray, level: int, codes: np.ndarray, g: np.ndarray, h: np.ndarray,
          edges: list[np.ndarray], o: dict) -> int:
    """Append the node for ``rows`` (and its subtree) to ``tree``; its index."""
    at = len(tree)
    split = _best_split(codes[rows], g[rows], h[rows], edges, o["l2"], o["min_leaf"]) if level < o["depth"] else None
    if split is None:
        tree.append([-1.0, float(-o["lr"] * g[rows].sum() / (h[rows].sum() + o["l2"]))])
        return at
    j, b = split
    tree.append([float(j), float(edges[j][b]), 0.0, 0.0])
    left = codes[rows, j] <= b
    tree[at][2] = float(_grow(tree, rows[left], level + 1, codes, g, h, edges, o))
    tree[at][3] = float(_grow(tree, rows[~left], level + 1, codes, g, h, edges, o))
    return at


def _best_split(codes: np.ndarray, g: np.ndarray, h: np.ndarray, edges: list[np.ndarray], l2: float,
                min_leaf: float) -> tuple[int, int] | None:
    """The (feature, code) split of these rows with the largest gain in the loss's second-order estimate."""
    n = len(g)
    big_g, big_h = g.sum(), h.sum()
    parent = big_g * big_g / (big_h + l2)
    best, found = 1e-9, None
    for j, e in enumerate(edges):
        k = len(e) + 1
        if k < 2:
            continue
        gl = np.bincount(codes[:, j], g, k).cumsum()[:-1]
        hl = np.bincount(codes[:, j], h, k).cumsum()[:-1]
        cl = np.bincount(codes[:, j], None, k).cumsum()[:-1]
        gain = gl ** 2 / (hl + l2) + (big_g - gl) ** 2 / (big_h - hl + l2) - parent
        gain[(cl < min_leaf) | (n - cl < min_leaf)] = -np.inf
        b = int(np.argmax(gain))
        if gain[b] > best:
            best, found = float(gain[b]), (j, b)
    return found


def predict_tree(tree: Tree, x: np.ndarray) -> np.ndarray:
    """One tree's leaf value for every row of ``x``."""
    out = np.zeros(len(x))
    stack = [(0, np.arange(len(x)))]
    while stack:
        at, rows = stack.pop()
        node = tree[at]
        if node[0] < 0:
            out[rows] = node[1]
            continue
        left = x[rows, int(node[0])] < node[1]
        stack += [(int(node[2]), rows[left]), (int(node[3]), rows[~left])]
    return out


def predict(trees: list[Tree], x: np.ndarray) -> np.ndarray:
    """The trees' summed logits for every row of ``x``."""
    return sum((predict_tree(t, x) for t in trees), np.zeros(len(x)))
