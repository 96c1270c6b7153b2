"""Items: raw model text at a cursor -> the suggestions sent to the client (post-processed, positioned in the
client's encoding, with the document's line breaks), as the session builds them for an answer (the
completion service says what the answer is; the learned gate, gatekeeper.py, may drop items after), and what
Pick Variant's picker is told about a list that holds fewer items than it asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from engine.text.budget import Mode, budget_for
from engine.text.postprocess import (
    CUT_OFF_REASONS,
    Suggestion,
    doubt_cut,
    lead_doubt,
    open_line_shown,
    postprocess,
)
from engine.text.rank import distinct, order_at_cursor
from engine.text.statements import split_cursor
from engine.types import Completion
from lsp_server import convert

# what the picker hears (the flint/variants result's ``note``) about a list with fewer items than asked
AGREE = "the model's variants agree: no other suggestion here"
PENDING = "item 1 ready; alternatives on their way"


@dataclass
class Item:
    index: int
    text: str  # with the document's line breaks
    start: tuple[int, int]  # LSP position (negotiated units)
    end: tuple[int, int]
    ttft_ms: float  # the request's time to this answer (a model answer: to its first token, when sooner)
    total_ms: float  # the request's round trip
    source: str
    tokens: int
    backend: str = "local"  # which backend wrote it: local | remote | capable


@dataclass
class Suggestions:
    id: str
    uri: str
    version: int
    items: list[Item]
    mode: str
    total_ms: float = 0.0  # request to response, as the user saw it
    source: str | None = None
    origin: str | None = None  # "disk" when a type-through answer came from a disk entry
    backend: str | None = None  # local | remote (the first item's)
    complete: bool = True  # nothing more is coming for this answer (False: flint/refresh may follow)
    asked: int = 1  # the variants asked for


class Doubt(NamedTuple):
    """How sure the model must be of an automatic suggestion in a document."""
    cut: float  # a suggestion ends before its first token under this (postprocess.doubt_cut); 0: whole lines
    gate: float  # mid-line, a suggestion whose first token is under this is not shown (lead_doubt); 0: off


# what confidenceCut and confidenceGate fall back to when the user sets no value (null, the clients' default):
# each language's values chosen on its tuning half of the typing replay, confirmed once on validation
# (docs/benchmarks/doubt.md, gate.md); a language without its own row takes DOUBT
DOUBT = Doubt(cut=0.9, gate=0.0)
DOUBT_BY_LANGUAGE: dict[str, Doubt] = {  # LSP languageId -> its own
    "go": Doubt(cut=0.9, gate=0.4),
}


def doubt_for(language: str | None, cut: float | None = None, gate: float | None = None) -> Doubt:
    """The cut and gate for a document of ``language``: the user's value where set, else the language's own."""
    own = DOUBT_BY_LANGUAGE.get((language or "").lower(), DOUBT)
    return Doubt(own.cut if cut is None else cut, own.gate if gate is None else gate)


# where the learned gate (settings.learnedGate) is on when the user sets no value (LSP languageId): chosen on the
# language's tuning half of the typing replay, confirmed once on its validation half (docs/benchmarks/gate.md); an
# A/B replay's gate-off arm in these languages says {"learnedGate": false}
GATED_LANGUAGES = frozenset({"go", "javascript", "python"})


def gate_on(setting: bool | None, language: str | None) -> bool:
    """Whether the learned gate decides on automatic answers in a document of ``language``: the user's value where
    set, else the language's own."""
    return setting if setting is not None else (language or "").lower() in GATED_LANGUAGES


def build_items(comps: list[Completion], mode: Mode, prefix: str, suffix: str, *, text: str, offset: int,
                cursor: tuple[int, int], eol: str, starts: list[int], encoding: str, max_lines: int,
                backend: str, language: str | None = None, cut_below: float | None = 0.0,
                gate_below: float | None = 0.0) -> list[Item]:
    """One item per suggestion distinct in substance, best first (``prefix``/``suffix``: the state's LF text).
    ``language``: the document's language id (LSP ``languageId``; None or empty: guessed from the text);
    the Python rules of post-processing and ranking apply to Python only. ``cut_below`` > 0: each
    suggestion ends before its first token the model chose with a lower probability (``doubt_cut``), once
    something is typed on the cursor's line; ``gate_below`` > 0: there, a suggestion whose first token the model
    chose with a lower probability is none (``lead_doubt``); None: the language's own (``doubt_for``)."""
    language = language or None
    cut_below, gate_below = doubt_for(language, cut_below, gate_below)
    if mode == "multi":  # the rest of a body may be longer than maxLines (GenParams.auto_budget sizes it so)
        budget = budget_for(prefix, suffix, language, max_lines=max_lines)
        if budget.kind == "body":
            max_lines = max(max_lines, budget.max_lines)
    # the cut serves typing: on a line nothing is typed on yet, the suggestion is the whole statement (a
    # line cut there ends mid-statement: issue 16); once the user writes the line, the sure part of the rest
    line_prefix, line_suffix = split_cursor(prefix, suffix)
    mid_line = bool(line_prefix.strip())
    line_end = mid_line and mode == "single" and not line_suffix.strip()
    kept: list[tuple[Completion, Suggestion]] = []
    seen: set[tuple[str, int]] = set()
    for c in comps:
        if gate_below > 0 and mid_line and lead_doubt(c.text, c.doubts) < gate_below:
            continue  # wrong from its first character more often than not (docs/benchmarks/doubt.md)
        truncated = c.finish_reason in CUT_OFF_REASONS
        sug = postprocess(c.text, prefix, suffix, mode=mode, max_lines=max_lines, truncated=truncated,
                          language=language, open_line=open_line_shown(c.finish_reason, language=language))
        if sug is not None and cut_below > 0 and c.doubts and mid_line:
            sug = _cut_where_unsure(c, sug, prefix, suffix, mode, max_lines, language, cut_below)
        if sug is not None and cut_below > 0 and line_end:
            sug = _with_next_line(c, sug, prefix, suffix, language, cut_below)
        if sug is None or (sug.text, sug.replace) in seen:
            continue
        seen.add((sug.text, sug.replace))
        kept.append((c, sug))
    if len(kept) > 1:  # variants that are the same in substance are one suggestion (rank.same_substance)
        kept = [kept[i] for i in distinct([sug.text for _, sug in kept])]
    # worth to insert first: code before a comment-only or placeholder variant, complete before unfinished
    order = order_at_cursor([sug.text for _, sug in kept], prefix, suffix, language) if len(kept) > 1 \
        else [0] * len(kept)
    items: list[Item] = []
    for i in order:
        c, sug = kept[i]
        end = doc_position_after(text, offset, sug.replace, encoding, starts)
        items.append(Item(len(items), sug.text.replace("\n", eol) if eol != "\n" else sug.text,
                          cursor, end, round(c.ttft_ms, 1), round(c.total_ms, 1), c.source,
                          len(c.token_ids), backend))
    return items


def _cut_where_unsure(c: Completion, sug: Suggestion, prefix: str, suffix: str, mode: Mode, max_lines: int,
                      language: str | None, below: float) -> Suggestion:
    """The suggestion up to where the model doubted (its text cut there, then post-processed as a text the
    model ended), when that is shorter and still a suggestion; else the whole one."""
    cut = doubt_cut(c.text, c.doubts, below)
    if cut == c.text:
        return sug
    short = postprocess(cut, prefix, suffix, mode=mode, max_lines=max_lines, truncated=False, language=language,
                        open_line=open_line_shown(c.finish_reason, before_doubt=True))
    if short is None or len(short.text) >= len(sug.text) or not sug.text.startswith(short.text):
        return sug
    return short


def _with_next_line(c: Completion, sug: Suggestion, prefix: str, suffix: str, language: str | None,
                    below: float) -> Suggestion:
    """(At the end of the line the user is writing.) The model's next line as well (the look-ahead line it
    writes for type-through after Enter) when it was sure of every token of both: one Tab takes the two,
    where Enter and a new suggestion on the next line cost the typist another reaction time. A next line it
    doubted anywhere is not shown (a typist takes a suggestion only when all of it is right)."""
    if sug.replace or "\n" in sug.text:
        return sug
    first, nl, rest = c.text.partition("\n")
    second, nl2, _ = rest.partition("\n")
    if not nl or not second.strip() or first.rstrip() != sug.text.rstrip():
        return sug  # no next line, or the cursor's line was cut
    if not nl2 and c.finish_reason in CUT_OFF_REASONS:
        return sug  # the next line was still being written
    end = len(first) + 1 + len(second)
    if any(p < below for at, p in c.doubts if at < end):
        return sug
    both = postprocess(first + "\n" + second, prefix, suffix, mode="multi", max_lines=2, truncated=False,
                       language=language)
    if both is None or both.replace or not both.text.startswith(sug.text + "\n") or both.text.count("\n") != 1:
        return sug
    return both


def stamp_latency(items: list[Item], total_ms: float) -> None:
    """Each item's latency is the request's (its ``source`` says where it came from): a cached or typed-
    through answer has no generation time of its own to report."""
    for it in items:
        it.total_ms = round(total_ms, 1)
        if it.source != "model" or not 0 < it.ttft_ms <= total_ms:
            it.ttft_ms = it.total_ms


def doc_position_after(text: str, offset: int, replace: int, encoding: str,
                       starts: list[int]) -> tuple[int, int]:
    """Position ``replace`` code points right of ``offset`` (on the same line; postprocess guarantees it)."""
    return convert.offset_to_position(text, offset + replace, encoding, starts=starts)


def note(items: int, asked: int, complete: bool) -> str:
    """What the picker shows about a list of ``items`` out of ``asked``: alternatives still coming, or the
    model agrees with itself (its variants were the same in substance); empty when the list is full."""
    if items == 0 or items >= asked:
        return ""
    return AGREE if complete else PENDING
