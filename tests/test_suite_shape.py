"""Issue 48's targets for the test suite itself: no test file over 500 lines (split by concern, as
tests/editors/nvim_driver.py and the test_neovim*.py files), and the wall-clock sleeps halved (88 when the
issue was filed, 106 at its start): a test that waits for something polls for it (tests/fakes.py: ``until``,
``wait_for``), and a test whose subject is time moves a fake clock (``fakes.Clock``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MAX_LINES = 500
MAX_SLEEPS = 44
SLEEP = re.compile(r"(time|asyncio)\.sleep")


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "artifacts" not in p.parts)


def test_no_test_file_is_over_500_lines():
    long = {p.relative_to(TESTS).as_posix(): n for p in python_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these by concern (at most {MAX_LINES} lines): {long}"


def sleeps(text: str) -> int:
    """Lines that name time's or asyncio's sleep: what `grep -rnE "(time|asyncio)[.]sleep" tests | wc -l`
    counts (a line of a comment or a child process's source included)."""
    return sum(1 for line in text.splitlines() if SLEEP.search(line))


def test_the_sleep_counter_counts_lines_that_call_a_sleep():
    calls = "\n".join(f"{m}.sleep({s})" for m, s in (("time", 1), ("await asyncio", 0.1)))  # (not counted here)
    assert sleeps(calls + "\nwait_for(ok)\n# no sleep here\n") == 2


def test_at_most_44_wall_clock_sleeps_in_the_tests():
    found = {p.relative_to(TESTS).as_posix(): n for p in python_files() if (n := sleeps(p.read_text(encoding="utf-8")))}
    assert sum(found.values()) <= MAX_SLEEPS, (
        f"{sum(found.values())} sleeps (at most {MAX_SLEEPS}): poll for the condition (fakes.until / "
        f"fakes.wait_for) or move a fake clock (fakes.Clock); by file: {found}")


def test_no_sleep_under_another_name():
    """The count above holds only if every sleep is spelled as the module's attribute: no `from time import
    sleep`, no name bound to a sleep function."""
    bad = []
    for p in python_files():
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom) and n.module in ("time", "asyncio") and \
                    any(a.name == "sleep" for a in n.names):
                bad.append(f"{p.relative_to(TESTS)}:{n.lineno} imports sleep")
            elif isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Attribute) and \
                    n.value.attr == "sleep":
                bad.append(f"{p.relative_to(TESTS)}:{n.lineno} binds a sleep to a name")
    assert not bad, bad
