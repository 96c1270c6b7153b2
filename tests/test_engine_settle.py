"""The engine's budget and settled stop (pure helpers of engine/decoding/stops.py; the model loop is in
tests/test_engine_model.py)."""

from engine.decoding.stops import budgeted, stop_rule
from engine.types import GenParams

BLOCK = GenParams(max_tokens=216, max_lines=9, n=3)  # planner.gen_params for an invoked block


def test_a_block_in_the_middle_of_code_stops_after_its_statement():
    prefix = "def f(xs):\n    total = 0\n    "
    suffix = "\n    return total\n"
    params, settle = budgeted(prefix, suffix, BLOCK)
    assert settle is not None and settle.budget.kind == "statement"
    # the statement's body is still going: not settled
    assert stop_rule("for x in xs:\n        total += x\n        ", params, settle) == \
        (None, "for x in xs:\n        total += x\n        ")
    # a line back at the statement's indentation started: settled, with the complete lines only
    assert stop_rule("for x in xs:\n        total += x\n    ret", params, settle) == \
        ("stop", "for x in xs:\n        total += x")


def test_a_body_stops_when_it_dedents_out_and_not_before():
    prefix = "def f(xs):\n    "
    suffix = "\n\n\ndef g():\n    pass\n"
    params, settle = budgeted(prefix, suffix, BLOCK)
    assert settle is not None and settle.budget.kind == "body"
    assert stop_rule("total = 0\n    for x in xs:\n        total += x\n    return total\n", params, settle)[0] is None
    assert stop_rule("total = 0\n    return total\n\ndef h", params, settle) == ("stop", "total = 0\n    return total\n")


def test_one_line_generations_keep_their_own_stops():
    # text right of the cursor: one line, no settled rule (the line count stops it)
    params, settle = budgeted("x = foo(", ")\n", GenParams(max_tokens=48, max_lines=1))
    assert settle is None and params.max_tokens == 48
    # a one-line suggestion with its look-ahead line (two lines): untouched
    _, settle = budgeted("def f():\n    x = 1", "\n    return x\n", GenParams(max_tokens=72, max_lines=2))
    assert settle is None


def test_auto_budget_sizes_the_generation_by_the_context():
    body = budgeted("def f(xs):\n    ", "\n\n\ndef g():\n    pass\n", GenParams(n=3, auto_budget=True))[0]
    middle = budgeted("def f(xs):\n    total = 0\n    ", "\n    return total\n", GenParams(n=3, auto_budget=True))[0]
    line = budgeted("x = foo(", ")\n", GenParams(n=3, auto_budget=True))[0]
    assert (line.max_tokens, line.max_lines) == (48, 1)
    assert body.max_lines is not None and middle.max_lines is not None
    assert body.max_lines > middle.max_lines > 2 and body.max_tokens > middle.max_tokens
    # the budget is part of the cache key; a request without it keeps its old key
    assert GenParams(auto_budget=True).key() != GenParams().key()
    assert len(GenParams().key()) == 10
