"""Issue 48's design rules, executable (like test_layout.py): no attribute probes where a protocol can be
typed, no reach into another object's thread pool, one request handle (no wait of many parameters, no
submit-then-let-go pairs), and a job whose life is one value. Plus that value's transitions."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from lsp_server.completion.jobs import Job, Life, State
from tests.test_layout import py_files

ROOT = Path(__file__).resolve().parent.parent
MAX_PROBES = 4  # engine/model/hf_source.py (a transformers version switch), engine/edits/rename.py (jedi's private switch)


def trees(*folders: str) -> list[tuple[Path, ast.Module]]:
    return [(f, ast.parse(f.read_text(encoding="utf-8"))) for folder in folders for f in py_files(folder)]


def probes(tree: ast.AST) -> int:
    return sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")
               for n in ast.walk(tree))


def test_the_probe_counter_counts_calls_not_words():
    assert probes(ast.parse("x = getattr(a, 'b', None)\nif hasattr(a, 'c'): pass\n# getattr(\n")) == 2


def test_at_most_four_attribute_probes_in_engine_and_lsp_server():
    found = {f.relative_to(ROOT).as_posix(): n for f, t in trees("engine", "lsp_server") if (n := probes(t))}
    assert sum(found.values()) <= MAX_PROBES, found


def test_no_reach_into_another_objects_thread_pool():
    bad = [f"{f.relative_to(ROOT)}:{n.lineno}" for f, t in trees("engine", "lsp_server") for n in ast.walk(t)
           if isinstance(n, ast.Attribute) and n.attr == "_pool"
           and not (isinstance(n.value, ast.Name) and n.value.id == "self")]
    assert not bad, "use the owner's public call (JediAnalyser.submit):\n" + "\n".join(bad)


def test_no_wait_takes_more_than_four_parameters():
    bad = []
    for f, t in trees("lsp_server"):
        for n in ast.walk(t):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "wait":
                a = n.args
                count = len(a.posonlyargs + a.args + a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                if count > 4:
                    bad.append(f"{f.relative_to(ROOT)}:{n.lineno} wait has {count} parameters")
    assert not bad, "\n".join(bad)


def _calls(stmt: ast.stmt, names: tuple[str, ...]) -> bool:
    """A simple statement (an expression, an assignment) that calls one of these methods."""
    return isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) and \
        any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in names
            for n in ast.walk(stmt))


def test_the_pair_finder_sees_a_pair_and_nothing_else():
    pair, apart = ast.parse("t = w.submit(s)\nt.detach()\n").body, ast.parse("if x:\n    w.submit(s)\nt.detach()\n").body
    assert _calls(pair[0], ("submit",)) and _calls(pair[1], ("detach",))
    assert not _calls(apart[0], ("submit",))


def test_no_submit_followed_at_once_by_letting_go():
    """Background work at a request's priority is a submit mode (jobs.Ask.BACKGROUND, Ask.AWAITED), not a
    submission its caller lets go of in the next statement."""
    bad = []
    for f, t in trees("lsp_server"):
        for n in ast.walk(t):
            body = getattr(n, "body", None)  # (any statement list: functions, loops, branches)
            if not isinstance(body, list):
                continue
            for a, b in zip(body, body[1:], strict=False):
                if _calls(a, ("submit",)) and _calls(b, ("detach", "release", "abandon")):
                    bad.append(f"{f.relative_to(ROOT)}:{a.lineno}")
    assert not bad, "\n".join(bad)


def test_a_job_has_one_lifecycle_value_and_no_boolean_flag():
    fields = {f.name: str(f.type) for f in dataclasses.fields(Job)}
    assert [name for name, kind in fields.items() if kind == "Life"] == ["life"]
    assert not [name for name, kind in fields.items() if kind == "bool"], fields


def _job() -> Job:
    from engine.types import GenParams

    return Job(State("u", 1, 0, "", "", "single", GenParams()), 0, 1, waiters=1)


def test_a_job_asked_for_stops_when_its_request_leaves_and_goes_on_when_let_go():
    assert _job().leave() is True  # only a request's: it stops
    let_go = _job()
    assert let_go.leave(Life.BACKGROUND) is False and let_go.life is Life.BACKGROUND and let_go.idle_work
    awaited = _job()
    assert awaited.leave(Life.AWAITED) is False and awaited.life is Life.AWAITED and not awaited.idle_work
    awaited.waiters = 1
    awaited.leave(Life.BACKGROUND)  # a later request let go: the user still waits there
    assert awaited.life is Life.AWAITED


def test_a_job_kept_through_an_edit_tracks_the_typing_and_an_ended_one_stays_ended():
    running, queued = _job(), _job()
    running.rebase(2, 5, running=True)
    queued.rebase(2, 6, running=False)
    assert running.life is Life.TRACKING and running.state.revision == 2 and running.waiters == 0
    assert queued.life is Life.BACKGROUND  # its requests asked about the old text: it is speculation now
    running.waiters = 1
    running.leave(Life.AWAITED)
    assert running.life is Life.TRACKING  # tracking wins: the user typed on from that spot
    ended = _job()
    ended.life = Life.ENDED
    assert ended.leave() is False and ended.life is Life.ENDED and not ended.serves(ended.state)


# lsp_server/completion's size: no module over 300 lines (a module is the size of one idea), and the whole no
# larger than today (2,403 lines, from 2,971 and 3,433 before: routings race and pause, debounceMs and
# forwarders deleted; the scheduler's clock added; +4 on 2026-12-01 for a fresh line's partial after
# knobs.FRESH_LINE_WHOLE_S; +6 on 2026-12-02 for how each job ended, in the work accounting; +29 on
# 2026-12-02 for the look-ahead line held until the typist nears the line's end; +2 on 2026-12-04: a variants
# batch cut off answers whole only with as many variants as asked; +6 on 2026-12-06: a streaming head answers open
# on a fresh line in Python, Store.shows and knobs.FRESH_LINE_HEAD; +5 the same day: one definition of a fresh
# line, planner.on_fresh_line, for the wait and Store.shows; +18 on 2026-12-07: idle work whose prompt pass outlasts
# the idle time is not begun, Worker.beyond_idle); issue 48 asked for 2,500
MAX_COMPLETION_LINES, MAX_COMPLETION_MODULE = 2_473, 300


def test_the_completion_core_stays_small_and_each_module_one_idea():
    sizes = {f.relative_to(ROOT).as_posix(): len(f.read_text(encoding="utf-8").splitlines())
             for f in py_files("lsp_server/completion")}
    assert len(sizes) > 10, sizes
    assert sum(sizes.values()) <= MAX_COMPLETION_LINES, sum(sizes.values())
    too_long = {f: n for f, n in sizes.items() if n > MAX_COMPLETION_MODULE}
    assert not too_long, too_long
