"""What syntax costs a keystroke: ``python -m engine.syntax.timing [lines] [edits]`` parses a generated
JavaScript, Go and Python file of ``lines`` lines afresh, then types ``edits`` characters one by one in its
middle through a ``TreeCache`` (incremental reparse, the edit given and inferred), and times the queries
post-processing would ask at that cursor. Prints milliseconds (p50/p95/max). Figures depend on the machine
and its load: docs/syntax.md says under which they were taken.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

from engine.syntax.queries import in_string_or_comment, is_complete, statement_cut_points
from engine.syntax.tree import TextEdit, TreeCache, parse

_UNITS = {
    "javascript": [
        "export function handler{i}(req, res) {{",
        "  const items = req.body.items.filter((x) => x.id !== {i});",
        "  const total = items.reduce((acc, x) => acc + x.price * x.qty, 0);",
        "  if (total > {i}) {{",
        "    res.status(400).json({{ error: `too much: ${{total}}` }});",
        "    return;",
        "  }}",
        "  // handler {i}: answer with the total",
        "  res.json({{ total, count: items.length }});",
        "}}",
        "",
    ],
    "go": [
        "// Handler{i} answers with the total.",
        "func Handler{i}(w http.ResponseWriter, r *http.Request) error {{",
        "\titems := filter(r.Items, func(x Item) bool {{ return x.ID != {i} }})",
        "\ttotal := 0",
        "\tfor _, x := range items {{",
        "\t\ttotal += x.Price * x.Qty",
        "\t}}",
        "\tif total > {i} {{",
        "\t\treturn fmt.Errorf(\"too much: %d\", total)",
        "\t}}",
        "\treturn json.NewEncoder(w).Encode(total)",
        "}}",
        "",
    ],
    "typescript": [
        "export function handler{i}(req: Request, res: Response): void {{",
        "  const items: Item[] = req.body.items.filter((x: Item) => x.id !== {i});",
        "  const total = items.reduce((acc: number, x: Item) => acc + x.price * x.qty, 0);",
        "  if (total > {i}) {{",
        "    res.status(400).json({{ error: `too much: ${{total}}` }});",
        "    return;",
        "  }}",
        "  // handler {i}: answer with the total",
        "  res.json({{ total, count: items.length }} as Answer);",
        "}}",
        "",
    ],
    "rust": [
        "/// Answers with the total.",
        "pub fn handler_{i}(req: &Request) -> Result<u64, Error> {{",
        "    let items: Vec<&Item> = req.items.iter().filter(|x| x.id != {i}).collect();",
        "    let mut total = 0;",
        "    for x in &items {{",
        "        total += x.price * x.qty;",
        "    }}",
        "    if total > {i} {{",
        "        return Err(Error::TooMuch(total));",
        "    }}",
        "    Ok(total)",
        "}}",
        "",
    ],
    "python": [
        "def handler_{i}(request, response):",
        "    \"\"\"Answer with the total.\"\"\"",
        "    items = [x for x in request.items if x.id != {i}]",
        "    total = sum(x.price * x.qty for x in items)",
        "    if total > {i}:",
        "        raise ValueError(f\"too much: {{total}}\")",
        "    # handler {i}",
        "    return response.json(total=total, count=len(items))",
        "",
        "",
    ],
}
_HEAD = {"javascript": "", "typescript": "", "rust": "", "go": "package main\n\n", "python": ""}


def generated(language_id: str, lines: int) -> str:
    """A file of about ``lines`` lines of ``language_id`` (javascript, typescript, go, rust, python) made of one
    function repeated with its numbers changed."""
    out: list[str] = []
    i = 0
    while len(out) < lines:
        out += [u.format(i=i) for u in _UNITS[language_id]]
        i += 1
    return _HEAD[language_id] + "\n".join(out[:lines]) + "\n"


def _ms(f: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return {"p50": round(statistics.median(xs), 3), "p95": round(p95, 3), "max": round(xs[-1], 3)}


def measure(language_id: str = "javascript", lines: int = 5000, edits: int = 40) -> dict[str, dict[str, float]]:
    """Timings in milliseconds for one language: ``full`` parses, ``incremental_edit`` /
    ``incremental_inferred`` one-character edits through a ``TreeCache`` (the edit given / found by
    comparing the texts), and the queries at the edited cursor."""
    text = generated(language_id, lines)
    out: dict[str, dict[str, float]] = {"size": {"lines": float(text.count("\n")), "bytes": float(len(text))}}
    out["full"] = _summary(_ms(lambda: parse(language_id, text), 5))
    # a cursor in the middle, at the end of a line that ends a statement
    mid = text.find("\n", len(text) // 2)
    for mode in ("edit", "inferred"):
        cache = TreeCache()
        cache.get("file:///a", 0, text, language_id)
        doc, times = text, []
        for k in range(edits):
            at = mid + k
            new = doc[:at] + "x" + doc[at:]
            given = [TextEdit(at, at, "x")] if mode == "edit" else None
            t0 = time.perf_counter()
            cache.get("file:///a", k + 1, new, language_id, given)
            times.append((time.perf_counter() - t0) * 1e3)
            doc = new
        out[f"incremental_{mode}"] = _summary(times)
    tree = parse(language_id, text)
    assert tree is not None
    out["in_string_or_comment"] = _summary(_ms(lambda: in_string_or_comment(tree, mid), 20))
    before = text[: text.find("\n", mid) + 1] + ("    " if language_id == "python" else "  ")
    completion = "result = compute(items, total)" if language_id == "python" else "const result = compute(items, total);"
    if language_id == "go":
        completion = "result := compute(items, total)"
    out["is_complete"] = _summary(_ms(lambda: is_complete(language_id, before, completion), 20))
    out["statement_cut_points"] = _summary(_ms(lambda: statement_cut_points(language_id, before, completion), 5))
    return out


def main(argv: list[str]) -> None:
    lines = int(argv[0]) if argv else 5000
    edits = int(argv[1]) if len(argv) > 1 else 40
    for lang in ("javascript", "go", "python"):
        print(lang, measure(lang, lines, edits))


if __name__ == "__main__":
    main(sys.argv[1:])
