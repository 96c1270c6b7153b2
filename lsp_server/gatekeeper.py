"""The learned gate in the server (issue 49): what the session asks before an automatic answer goes out, and what
it tells the gate afterwards.

``GateKeeper.apply`` reads the features of the answer's first item (engine/policy/gate.py), adds the user's
adjustment for the cursor's context class (gate_user.py) and keeps the item whole, cuts it before its first doubt,
or drops it. ``edited`` / ``accepted`` / ``moved`` tell what became of the ghost last answered in a document
(taken, typed through, typed over, dismissed): the document's history (a feature) and the user's outcomes.

With ``FLINT_GATE_RECORDS=PATH`` every gated answer appends a JSON line (its id, text, features, the model's
logits, the decision, the gate's cost): the replay benchmark joins them to what its typist did
(scripts/bench_replay.py --records); scripts/train_gate.py learns from that.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path

from engine.policy import gate
from engine.types import Completion
from lsp_server.gate_user import UserGate, context_class
from lsp_server.items import Item

log = logging.getLogger(__name__)

HISTORY = 8  # outcomes per document the features see
RHYTHM = 9  # keystroke times per document (eight intervals)
RECORDS_ENV = "FLINT_GATE_RECORDS"


@dataclass(frozen=True)
class _Ghost:
    offset: int  # the cursor (code points) it was answered at
    text: str  # LF
    cls: str
    shown: bool = True  # False: the gate hid it; what the user typed still says whether it was right
    adapt: bool = True  # its fate goes into the user's outcomes (when shown)


class GateKeeper:
    """The gate's state on the event loop: the model (None: nothing is gated), the user's outcomes, per document
    the ghost last answered, its last outcomes and keystroke times."""

    def __init__(self, model: gate.GateModel | None, user: UserGate | None = None,
                 records: Path | None = None) -> None:
        self.model = model
        prior = float(model.trained.get("user_prior", 0.5)) if model is not None else 0.5
        self.user = user or UserGate(prior=prior)
        env = os.environ.get(RECORDS_ENV)
        self.records = records or (Path(env) if env else None)
        self._ghosts: dict[str, _Ghost] = {}
        self._history: dict[str, deque[str]] = {}
        self._times: dict[str, deque[float]] = {}

    @classmethod
    def shipped(cls) -> GateKeeper:
        """The gate with the model shipped in engine/data (none: nothing is gated)."""
        try:
            model = gate.load()
        except (OSError, ValueError, KeyError) as e:
            log.warning("the gate's model could not be read (%s): automatic suggestions are not gated", e)
            model = None
        return cls(model)

    # ---- what became of the last ghost -------------------------------------------------------------------
    def edited(self, uri: str, text: str, cursor: int, now: float) -> None:
        """An edit left the cursor at ``cursor`` in ``text``: the ghost answered there was taken (a many-character
        insert of its start: Tab, or its first line), typed through (its next character), or typed over."""
        times = self._times.setdefault(uri, deque(maxlen=RHYTHM))
        times.append(now)
        g = self._ghosts.pop(uri, None)
        if g is None:
            return
        typed = text[g.offset: cursor].replace("\r\n", "\n") if cursor > g.offset else ""
        if typed and g.text.startswith(typed):
            self._outcome(uri, g, "taken" if len(typed) > 1 else "through")
        else:
            self._outcome(uri, g, "over")

    def accepted(self, uri: str) -> None:
        g = self._ghosts.pop(uri, None)
        if g is not None:
            self._outcome(uri, g, "taken")

    def moved(self, uri: str) -> None:
        """The cursor left without an edit: the ghost was dismissed."""
        g = self._ghosts.pop(uri, None)
        if g is not None:
            self._outcome(uri, g, "dismissed")

    def forget(self, uri: str) -> None:
        for d in (self._ghosts, self._history, self._times):
            d.pop(uri, None)

    def flush(self) -> None:
        self.user.flush()

    def _outcome(self, uri: str, g: _Ghost, outcome: str) -> None:
        """The document's history learns every ghost's fate, hidden or not: the gate learned from records where every
        ghost was shown, and a history that stopped at the last shown ghost would hold its verdict while the gate
        hides (a stale run of "over" hiding on). The user's adjustment learns only from ghosts the user saw, and only
        when it is on (learnedGateAdapts)."""
        if not g.shown and outcome == "taken":
            outcome = "through"  # text typed that a hidden ghost foresaw: no Tab took it
        self._history.setdefault(uri, deque(maxlen=HISTORY)).append("over" if outcome == "dismissed" else outcome)
        if g.shown and g.adapt:
            self.user.record(g.cls, outcome)

    def rhythm(self, uri: str, now: float) -> gate.Rhythm:
        times = list(self._times.get(uri, ()))
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        return gate.Rhythm(statistics.median(gaps) if gaps else None, now - times[-1] if times else None)

    # ---- the decision ------------------------------------------------------------------------------------
    def apply(self, sid: str, uri: str, items: list[Item], comps: list[Completion], prefix: str, suffix: str, *,
              offset: int, language: str | None, source: str, eol: str, enabled: bool,
              adapt: bool = True) -> list[Item]:
        """An automatic answer's items, gated (``enabled`` and a model: else as they are). The first item is the
        suggestion (automatic requests ask one variant). ``adapt``: the user's adjustment applies and learns."""
        if not items or not comps or not (enabled and self.model is not None or self.records is not None):
            return items
        t0, c0 = time.perf_counter(), time.thread_time()
        it, comp = items[0], comps[0]
        text = it.text.replace(eol, "\n") if eol != "\n" else it.text
        at = comp.text.find(text) if text else -1
        # the doubts are offsets into the model's text: moved onto the item's when it is a part of it
        doubts = tuple((a - at, p) for a, p in comp.doubts if a >= at) if at >= 0 else comp.doubts
        f = gate.features(text, doubts, len(comp.token_ids), prefix, suffix, language,
                          gate.History(tuple(self._history.get(uri, ()))), self.rhythm(uri, time.monotonic()), source)
        head = gate.head_of(text, doubts) if it.start == it.end else ""  # (a part of a replacing item: none)
        cls = context_class(f)
        decision, logits, bias = gate.SHOW_ALL, {}, 0.0
        if self.model is not None:
            logits, bias = self.model.logits(f), self.user.bias(cls) if adapt else 0.0
            if enabled:
                decision = gate.decide(logits, self.model.threshold, has_head=bool(head), bias=bias,
                                       mid_line=bool(f["mid_line"]))
        # wall time on the event loop, and this thread's CPU time: the gate's own cost without the GIL waits
        # the engine thread's decoding causes
        cost_ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
        shown = {gate.SHOW_ALL: text, gate.SHOW_HEAD: head, gate.SHOW_NONE: ""}[decision]
        if shown or text:  # a hidden ghost too: its fate goes into the document's history (_outcome)
            self._ghosts[uri] = _Ghost(offset, shown or text, cls, shown=bool(shown), adapt=adapt)
        else:
            self._ghosts.pop(uri, None)
        if self.records is not None:
            self._write({"id": sid, "uri": uri, "offset": offset, "text": text, "head": len(head),
                         "features": f, "logits": logits, "bias": bias, "cls": cls, "decision": decision,
                         "gated": enabled and self.model is not None, "cost_ms": round(cost_ms, 4),
                         "cpu_ms": round(cpu_ms, 4)})
        if decision == gate.SHOW_NONE:
            return []
        if decision == gate.SHOW_HEAD:
            return [replace(it, text=head.replace("\n", eol) if eol != "\n" else head)]
        return items

    def _write(self, rec: dict) -> None:
        assert self.records is not None
        try:
            with open(self.records, "a") as f:
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        except OSError as e:
            log.warning("gate records: %s", e)
            self.records = None
