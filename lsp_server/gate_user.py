"""The gate learns its user (issue 49): a per-user adjustment of the learned gate (engine/policy/gate.py) from the
user's own outcomes, kept in FLINT_HOME/gate_user.json beside the usage stats (stats.py).

Outcomes are kept per context class (``comment``, ``string``, ``code``): the last ``WINDOW`` of each, one letter
an outcome (``t`` taken, ``h`` typed through as shown, ``o`` typed over, ``d`` dismissed: the cursor left). The
adjustment is a bias on the gate's logit: the log-odds of the class's right share (taken or typed through),
shrunk toward the share the gate's shown ghosts have on the benchmark (``prior``) by ``STRENGTH`` pseudo-outcomes,
minus that prior's log-odds (down only from below a half: a user for whom most ghosts are right never sees fewer),
clipped to [-``MAX_DOWN``, ``MAX_UP``]. So a short streak moves it little, a user who takes more than the prior sees
more ghosts, and even the lowest bias leaves a ghost the model is sure of on screen: the adjustment cannot switch
suggestions off.

Every server on the machine adds its new outcomes to the file under the stats lock (as stats.py does); `flint
stats` shows the adjustment, `flint stats --reset-gate` forgets it.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from engine.paths import stats_path
from lsp_server.stats import _locked

log = logging.getLogger(__name__)

CLASSES = ("comment", "string", "code")
CODES = {"taken": "t", "through": "h", "over": "o", "dismissed": "d"}
RIGHT = frozenset("th")  # a ghost that was what the user wrote next
WINDOW = 200  # outcomes kept per class: the adjustment follows the user's recent habits
STRENGTH = 20.0  # pseudo-outcomes at the prior: ten overs in a row move the bias by about -0.7 at a prior of 0.5
MAX_DOWN = 2.0  # at the lowest bias a ghost the model gives 0.88 still clears a threshold of 0.5
MAX_UP = 1.0
FORMAT = 1


def gate_user_path() -> Path:
    return stats_path().with_name("gate_user.json")


def _logit(p: float) -> float:
    p = min(1 - 1e-6, max(1e-6, p))
    return math.log(p / (1 - p))


def adjustment(outcomes: str, prior: float) -> float:
    """The bias added to the gate's logits for a class whose recent outcomes are ``outcomes`` (letters, oldest
    first); 0 with none. Pure."""
    if not outcomes:
        return 0.0
    right = sum(o in RIGHT for o in outcomes)
    share = (right + STRENGTH * prior) / (len(outcomes) + STRENGTH)
    if share > prior:
        return min(MAX_UP, _logit(share) - _logit(prior))
    # down only below half as well: a user for whom most ghosts are right never sees fewer of them
    floor = min(prior, 0.5)
    return max(-MAX_DOWN, _logit(share) - _logit(floor)) if share < floor else 0.0


def context_class(features: dict[str, float]) -> str:
    """The class a suggestion's outcome counts for (engine/policy/gate.py's features)."""
    if features.get("in_comment"):
        return "comment"
    if features.get("in_string"):
        return "string"
    return "code"


class UserGate:
    """The user's outcomes per class: those in the file when last read, plus this server's new ones (written
    by ``flush``). Used from the event loop only."""

    def __init__(self, path: Path | None = None, prior: float = 0.5) -> None:
        self.path = path or gate_user_path()
        self.prior = prior
        self.known: dict[str, str] = read(self.path)
        self.new: dict[str, str] = {}

    def outcomes(self, cls: str) -> str:
        return (self.known.get(cls, "") + self.new.get(cls, ""))[-WINDOW:]

    def record(self, cls: str, outcome: str) -> None:
        self.new[cls] = (self.new.get(cls, "") + CODES[outcome])[-WINDOW:]

    def bias(self, cls: str) -> float:
        return adjustment(self.outcomes(cls), self.prior)

    def flush(self) -> None:
        """Add the new outcomes to the file (under the stats lock) and read back what every server wrote.
        Never raises."""
        if not self.new:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(self.path.with_suffix(".lock")):
                merged = read(self.path)
                for cls, s in self.new.items():
                    merged[cls] = (merged.get(cls, "") + s)[-WINDOW:]
                tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"format": FORMAT, "outcomes": merged}))
                os.replace(tmp, self.path)
        except OSError as e:
            log.warning("could not write the gate's user outcomes to %s: %s", self.path, e)
            return
        self.known, self.new = merged, {}


def read(path: Path) -> dict[str, str]:
    """The outcomes per class in the file; none when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable gate file %s: %s", path, e)
        return {}
    raw = data.get("outcomes") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        return {}
    valid = set(CODES.values())
    return {c: "".join(x for x in s if x in valid)[-WINDOW:] for c, s in raw.items()
            if c in CLASSES and isinstance(s, str)}


def reset(path: Path | None = None) -> bool:
    """Forget the user's outcomes (`flint stats --reset-gate`); False when there were none."""
    path = path or gate_user_path()
    if not path.parent.is_dir():
        return False
    with _locked(path.with_suffix(".lock")):
        try:
            path.unlink()
        except FileNotFoundError:
            return False
    return True


def summary(path: Path | None = None, prior: float = 0.5) -> dict[str, Any]:
    """Per class: outcomes kept, right share, the bias the gate adds (for `flint stats`)."""
    known = read(path or gate_user_path())
    out: dict[str, Any] = {}
    for cls in CLASSES:
        s = known.get(cls, "")
        out[cls] = {"outcomes": len(s), "right_share": (sum(o in RIGHT for o in s) / len(s)) if s else None,
                    "bias": round(adjustment(s, prior), 3)}
    return out


def format_summary(s: dict[str, Any]) -> str:
    parts = []
    for cls, v in s.items():
        share = "-" if v["right_share"] is None else f"{100 * v['right_share']:.0f}% right"
        parts.append(f"{cls} {v['outcomes']} ({share}, bias {v['bias']:+.2f})")
    return "  gate (you)   " + "; ".join(parts)
