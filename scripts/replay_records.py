"""The replay benchmark's records for the learned gate (issue 49): one JSON line per keystroke with the features
of the ghost on screen (written by the server as it answered: lsp_server/gatekeeper.py, ``FLINT_GATE_RECORDS``)
and what the typist did with it. scripts/train_gate.py learns from them.

A keystroke's ``fate``: ``taken`` (Tab, or its first line), ``through`` (it typed the ghost's next character),
``over`` (it typed something else), or None (no ghost on screen). The labels the gate learns: ``right_all``
(the ghost, or its first line, is what the file says next), ``right_head`` (its part before the first doubt is).
Pure but for reading the server's file.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchstats import percentile
from replay_typist import Key, Run

RECORDS_ENV = "FLINT_GATE_RECORDS"  # lsp_server/gatekeeper.py reads the same name


def read_server_records(path: Path) -> dict[str, dict]:
    """The server's gate records by answer id (none when it wrote none)."""
    out: dict[str, dict] = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut by the server's end
        if isinstance(rec, dict) and "id" in rec:
            out[str(rec["id"])] = rec
    return out


def fate(key: Key) -> str | None:
    if key.ghost is None:
        return None
    if key.kind in ("tab", "tab-line"):
        return "taken"
    return "through" if key.in_ghost else "over"


def keystroke_records(run: Run, server: dict[str, dict]) -> list[dict]:
    """One record per keystroke of ``run``: where it was typed, the ghost on screen, what the typist did with it,
    and, when the server's record of the answer that made the ghost is known, its features and the labels."""
    out = []
    for k in run.keys:
        rec = {"split": run.split, "server": run.server, "typist": run.typist, "round": run.round,
               "seed": run.seed, "segment": k.segment, "at": k.at, "kind": k.kind, "saved": k.saved,
               "gap_s": k.gap_s, "fate": fate(k), "ghost_id": k.ghost_id,
               "ghost_len": len(k.ghost) if k.ghost is not None else None, "ghost_right": k.ghost_right}
        srv = server.get(k.ghost_id) if k.ghost_id is not None else None
        if srv is not None and k.ghost is not None:
            head = int(srv.get("head", 0))
            rec.update({"features": srv["features"], "head": head, "text_len": len(srv.get("text", "")),
                        "decision": srv.get("decision"), "gated": srv.get("gated"), "cost_ms": srv.get("cost_ms"),
                        "cpu_ms": srv.get("cpu_ms"),
                        "same_text": srv.get("text", "")[:160] == k.ghost,
                        "right_all": bool(k.ghost_right),
                        "right_head": bool(head) and k.ghost_match is not None and head <= k.ghost_match})
        out.append(rec)
    return out



def gate_cost(records: list[dict]) -> dict:
    """The gate's own cost per automatic answer from a server's records (``cost_ms``: wall time on the event loop,
    GIL waits included; ``cpu_ms``: that thread's CPU time): how many, and p50 / p95 / p99 of each."""
    out: dict = {"answers": 0}
    for key in ("cost_ms", "cpu_ms"):
        values = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
        out["answers"] = max(out["answers"], len(values))
        out[key] = {f"p{q}": (round(v, 3) if (v := percentile(values, q)) is not None else None) for q in (50, 95, 99)}
    return out
