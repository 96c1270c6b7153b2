"""The learned gate (engine/policy/gate.py) and its place in the server (lsp_server/gatekeeper.py): features,
the model file, the decision, what becomes of a ghost, the records the replay benchmark joins."""

from __future__ import annotations

import json
import math
import time

import pytest

from engine.policy import gate
from engine.types import Completion
from lsp_server.gate_user import UserGate
from lsp_server.gatekeeper import GateKeeper
from lsp_server.items import Item

PY_PREFIX = "def area(r):\n    # the area of a circle of "
CODE_PREFIX = "def area(r):\n    return math."


def model(names: tuple[str, ...], w_all: dict[str, float], b_all: float, b_head: float = -9.0,
          threshold: float = 0.5) -> gate.GateModel:
    """A gate whose 'all' head reads the given raw features (mean 0, scale 1)."""
    return gate.GateModel(names, (0.0,) * len(names), (1.0,) * len(names),
                          {"all": gate.Head(tuple(w_all.get(n, 0.0) for n in names), b_all),
                           "head": gate.Head((0.0,) * len(names), b_head)}, threshold, {"user_prior": 0.5})


def test_features_read_the_probabilities_and_the_first_doubt():
    text = "pi * r ** 2"
    f = gate.features(text, ((0, 0.6), (5, 0.3)), 5, CODE_PREFIX, "\n", "python")
    assert f["lead_logp"] == pytest.approx(math.log(0.6))
    assert f["min_logp"] == pytest.approx(math.log(0.3))
    assert f["mean_logp"] == pytest.approx((math.log(0.6) + math.log(0.3)) / 5)
    assert f["first_doubt_at"] == pytest.approx(5 / len(text))
    assert f["no_doubt"] == 0.0 and f["doubts"] == pytest.approx(1 / 8)
    assert f["head_share"] == pytest.approx(5 / len(text))  # "pi * " before the doubt
    assert f["prev_dot"] == 1.0 and f["lang_python"] == 1.0 and f["in_comment"] == 0.0
    sure = gate.features(text, (), 5, CODE_PREFIX, "\n", "python")
    assert sure["lead_logp"] == 0.0 and sure["no_doubt"] == 1.0 and sure["first_doubt_at"] == 1.0


def test_features_read_the_syntax_history_and_rhythm():
    f = gate.features("radius r", (), 3, PY_PREFIX, "\n", "python", gate.History(("taken", "over", "over")),
                      gate.Rhythm(0.125, 0.1), "type-through")
    assert f["in_comment"] == 1.0 and f["in_string"] == 0.0
    assert f["hist_over"] == pytest.approx(2 / 3) and f["last_over"] == 1.0 and f["last_taken"] == 0.0
    assert f["gap_log"] == pytest.approx(math.log(0.125)) and f["src_typethrough"] == 1.0
    s = gate.features("x = 1", (), 3, 'msg = "hello ', '"\n', "python")
    assert s["in_string"] == 1.0
    js = gate.features("log(x);", (), 3, "function f(x) {\n  console.", "\n}", "javascript")
    assert js["lang_js"] == 1.0 and js["prev_dot"] == 1.0 and js["parent_member"] == 1.0


def test_head_is_the_part_before_the_first_doubt_or_nothing():
    assert gate.head_of("foo(bar, baz)", ((8, 0.5),)) == "foo(bar,"
    assert gate.head_of("foo(bar)", ()) == ""
    assert gate.head_of("foo(bar)", ((0, 0.2),)) == ""  # a doubt before any visible character: nothing shorter


def test_decide_shows_the_longest_part_that_clears_the_threshold():
    assert gate.decide({"all": 0.5, "head": 3.0}, 0.5, has_head=True) == "all"
    assert gate.decide({"all": -1.0, "head": 1.0}, 0.5, has_head=True) == "head"
    assert gate.decide({"all": -1.0, "head": 1.0}, 0.5, has_head=False) == "none"
    assert gate.decide({"all": 0.5, "head": 3.0}, 0.5, has_head=True, bias=-4.0) == "none"


def test_decide_shows_everything_at_a_lines_indentation():
    assert gate.decide({"all": -9.0, "head": -9.0}, 0.5, has_head=True, mid_line=False) == "all"
    assert gate.decide({"all": -9.0, "head": -9.0}, 0.5, has_head=True, mid_line=True) == "none"


def test_the_model_file_round_trips_and_a_wrong_one_is_refused(tmp_path):
    m = model(("lead_logp", "in_comment"), {"lead_logp": 2.0}, 0.5)
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(m.to_json()))
    back = gate.load(path)
    assert back == m
    assert back.logits({"lead_logp": -1.0})["all"] == pytest.approx(-1.5)
    assert gate.load(tmp_path / "none.json") is None
    bad = {**m.to_json(), "format": 99}
    with pytest.raises(ValueError, match="format"):
        gate.GateModel.from_json(bad)
    short = {**m.to_json(), "mean": [0.0]}
    with pytest.raises(ValueError, match="mean"):
        gate.GateModel.from_json(short)


def test_a_head_with_trees_adds_their_leaves_and_a_bad_tree_is_refused():
    # one stump on in_comment (x < 0.5 left: +1.0, else -3.0) and one on lead_logp, beside the linear part
    stump = [[1, 0.5, 1, 2], [-1, 1.0], [-1, -3.0]]
    deep = [[0, -1.0, 1, 4], [1, 0.5, 2, 3], [-1, 0.25], [-1, -0.25], [-1, 2.0]]
    data = {**model(("lead_logp", "in_comment"), {"lead_logp": 1.0}, 0.5).to_json()}
    data["heads"]["all"]["trees"] = [stump, deep]
    m = gate.GateModel.from_json(json.loads(json.dumps(data)))
    assert m.logits({"lead_logp": 0.0, "in_comment": 0.0})["all"] == pytest.approx(0.5 + 0.0 + 1.0 + 2.0)
    assert m.logits({"lead_logp": -2.0, "in_comment": 1.0})["all"] == pytest.approx(0.5 - 2.0 - 3.0 - 0.25)
    assert m.logits({"lead_logp": -2.0, "in_comment": 0.0})["all"] == pytest.approx(0.5 - 2.0 + 1.0 + 0.25)
    assert gate.GateModel.from_json(json.loads(json.dumps(m.to_json()))) == m
    linear = {**data, "format": 1, "heads": {k: {"w": h["w"], "b": h["b"]} for k, h in data["heads"].items()}}
    assert gate.GateModel.from_json(linear).logits({"lead_logp": 0.0})["all"] == pytest.approx(0.5)
    for bad in ([[2, 0.5, 1, 2], [-1, 1.0], [-1, 0.0]],  # no third feature
                [[0, 0.5, 1, 2], [0, 0.1, 0, 2], [-1, 0.0]],  # a child before its parent: a loop
                [[0, 0.5, 1, 3], [-1, 1.0], [-1, 0.0]],  # a child that is not there
                []):
        data["heads"]["all"]["trees"] = [bad]
        with pytest.raises(ValueError, match="tree"):
            gate.GateModel.from_json(data)


def test_the_shipped_trees_walked_all_at_once_give_a_node_by_node_walks_sum():
    """Head.logit walks every tree a level per step (arrays); a walk node by node, leaves added in tree order, is the
    same float (the decision compares it to a threshold)."""
    import random
    m = gate.load()
    assert m is not None and m.heads[gate.SHOW_ALL].trees
    rng = random.Random(0)
    for _ in range(200):
        x = [rng.gauss(0.0, 1.5) for _ in m.names]
        for h in m.heads.values():
            z = h.bias + sum(w * v for w, v in zip(h.weights, x, strict=True))
            for nodes in h.trees:
                node = nodes[0]
                while node[0] >= 0:
                    node = nodes[int(node[2] if x[int(node[0])] < node[1] else node[3])]
                z += node[1]
            assert h.logit(x) == z


def test_the_shipped_model_loads_and_is_small():
    assert gate.DEFAULT_PATH.stat().st_size <= 1 << 20
    m = gate.load()
    assert m is not None and 0 < m.threshold < 1
    f = gate.features("return x", ((4, 0.5),), 3, CODE_PREFIX, "\n", "python")
    assert set(m.names) == set(f)  # the server computes every feature the model reads


# ---- the server's side ----------------------------------------------------------------------------------------
def item(text: str) -> Item:
    return Item(0, text, (1, 11), (1, 11), 1.0, 1.0, "model", 3)


def keeper(tmp_path, m: gate.GateModel | None, records: bool = False) -> GateKeeper:
    return GateKeeper(m, UserGate(tmp_path / "gate_user.json"), tmp_path / "rec.jsonl" if records else None)


def apply(k: GateKeeper, text: str, doubts=(), prefix=CODE_PREFIX, enabled=True) -> list[Item]:
    comp = Completion(text, [1, 2, 3], "eos", doubts=doubts)
    return k.apply("s1", "file:///a.py", [item(text)], [comp], prefix, "\n", offset=len(prefix), language="python",
                   source="model", eol="\n", enabled=enabled)


def test_without_a_model_or_switched_off_every_suggestion_goes_out(tmp_path):
    assert [i.text for i in apply(keeper(tmp_path, None), "pi * r")] == ["pi * r"]
    strict = model(("lead_logp",), {}, -5.0)
    assert [i.text for i in apply(keeper(tmp_path, strict), "pi * r", enabled=False)] == ["pi * r"]


def test_the_gate_drops_cuts_or_keeps_a_suggestion_and_writes_its_record(tmp_path):
    names = ("lead_logp", "in_comment")
    sure_only = model(names, {"lead_logp": 10.0}, 0.0, b_head=5.0)
    k = keeper(tmp_path, sure_only, records=True)
    assert [i.text for i in apply(k, "pi * r", ())] == ["pi * r"]  # no doubt: logit 0 -> 0.5
    assert [i.text for i in apply(k, "pi * r", ((0, 0.5),))] == []  # its first token doubted, no head
    assert [i.text for i in apply(k, "pi * r", ((5, 0.4),))] == ["pi * r"]
    cut = model(names, {"lead_logp": 10.0}, -1.0, b_head=5.0)
    assert [i.text for i in apply(keeper(tmp_path, cut), "pi * r", ((5, 0.4),))] == ["pi * "]
    recs = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert [r["decision"] for r in recs] == ["all", "none", "all"]
    assert recs[2]["head"] == len("pi * ") and recs[2]["id"] == "s1" and recs[2]["features"]["lead_logp"] == 0.0


def test_what_became_of_a_ghost_feeds_the_history_and_the_user(tmp_path):
    k = keeper(tmp_path, None, records=True)  # (no model: the records still track the ghosts)
    uri, text = "file:///a.py", CODE_PREFIX + "\n"
    apply(k, "pi * r")
    k.edited(uri, CODE_PREFIX + "p" + "\n", len(CODE_PREFIX) + 1, time.monotonic())  # its next character
    apply(k, "pi * r")
    k.edited(uri, CODE_PREFIX + "pi * r" + "\n", len(CODE_PREFIX) + 6, time.monotonic())  # Tab
    apply(k, "pi * r")
    k.edited(uri, CODE_PREFIX + "e" + "\n", len(CODE_PREFIX) + 1, time.monotonic())
    apply(k, "pi * r")
    k.moved(uri)
    apply(k, "pi * r")
    k.accepted(uri)
    assert list(k._history[uri]) == ["through", "taken", "over", "over", "taken"]
    assert k.user.outcomes("code") == "htodt"
    k.edited(uri, text, len(CODE_PREFIX), time.monotonic())  # no ghost left: nothing to count
    assert k.user.outcomes("code") == "htodt"
    assert k.rhythm(uri, time.monotonic()).interval is not None


def test_a_hidden_ghosts_fate_feeds_the_documents_history_but_not_the_user(tmp_path):
    # the gate learned from records where every ghost was shown: its history feature must go on while it hides
    hide_all = model(("lead_logp",), {}, -9.0)
    k, uri = keeper(tmp_path, hide_all), "file:///a.py"
    assert apply(k, "pi * r") == []
    k.edited(uri, CODE_PREFIX + "p" + "\n", len(CODE_PREFIX) + 1, time.monotonic())  # what it foresaw
    apply(k, "pi * r")
    k.edited(uri, CODE_PREFIX + "e" + "\n", len(CODE_PREFIX) + 1, time.monotonic())
    apply(k, "pi * r")
    k.edited(uri, CODE_PREFIX + "pi * r" + "\n", len(CODE_PREFIX) + 6, time.monotonic())  # pasted, not taken
    assert list(k._history[uri]) == ["through", "over", "through"]
    assert k.user.outcomes("code") == ""  # the user saw none of them
