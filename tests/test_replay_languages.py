"""scripts/replay_languages.py: the rule that chooses the function bodies bench_replay types in JavaScript,
TypeScript, Go and Rust (tree-sitter definitions, replay_corpus.py's limits)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from replay_languages import PACKAGES, candidates, function_bodies, function_segment  # noqa: E402

GO = """package p

// Sum adds.
func Sum(xs []int) int {
\ttotal := 0
\tfor _, x := range xs {
\t\ttotal += x
\t}
\treturn total
}

func (s *Stack) Push(x int) {
\ts.items = append(s.items, x)
\ts.n++
\tif s.n > s.max {
\t\ts.max = s.n
\t}
}

func withClosure() {
\tf := func() int { return 1 }
\t_ = f
\t_ = f()
}
"""

RUST = """impl Buf {
    pub fn len(&self) -> usize {
        let n = self.end - self.start;
        n + self.extra
    }
}

#[cfg(test)]
mod tests {
    fn helper() {
        let x = 1;
        assert_eq!(x, 1);
    }
}
"""


def test_bodies_between_braces_are_found_with_qualnames_and_closures_are_left_out():
    bodies = function_bodies(GO, "go")
    assert set(bodies) == {"Sum", "Stack.Push"}  # a body defining a closure is no candidate
    start, end = bodies["Sum"]
    assert GO[start:end] == "\ttotal := 0\n\tfor _, x := range xs {\n\t\ttotal += x\n\t}\n\treturn total"
    assert set(function_bodies(RUST, "rust")) == {"Buf.len"}  # `mod tests` is no code to type


def test_the_size_limits_apply_as_in_the_python_corpus():
    assert [q for q, _ in candidates(GO, "go", lines=(3, 12), chars=(40, 180))] == ["Sum", "Stack.Push"]
    assert candidates(GO, "go", lines=(6, 12), chars=(40, 180)) == []


def test_a_segment_cut_short_stops_at_a_line_of_the_body_s_own_level(tmp_path):
    f = tmp_path / "sum.go"
    f.write_text(GO)
    seg = function_segment(f, "Sum", "go", "t", max_chars=14)
    assert seg.typed == "total := 0\n\tfor _, x := range xs {\n\t\ttotal += x\n\t}"  # the first tab: auto-indent
    assert seg.after.startswith("\n\treturn total\n}") and seg.language == "go"
    assert seg.before + seg.typed + seg.after == GO


def test_every_language_pins_its_packages():
    assert set(PACKAGES) == {"javascript", "typescript", "go", "rust"}
    assert all(p.version and p.source in ("npm", "deb") for ps in PACKAGES.values() for p in ps)
