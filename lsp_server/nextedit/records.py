"""What the next-edit service keeps (service.py): a computation (``Job``), the plan and its parts, and an
answer (``Found``) before it becomes JSON (wire.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from engine.edits.common import NextEdit


@dataclass(frozen=True)
class Signature:
    """The edited def's signature (fill.header) and its offset in the plan's text (-1: another document's):
    the fill prompt's stub."""

    text: str
    def_at: int


@dataclass
class Job:
    """One computation of the next edits of ``uri`` at ``revision``. Its parts reach the plan as they are
    found (``ready``: set at the first, or when it ends with none); ``future`` ends with the whole."""

    uri: str
    revision: int
    version: int
    last_edit_t: float  # time.monotonic() of the last keystroke of the edit it answers
    future: asyncio.Future | None = field(default=None, repr=False)  # -> (edits here, {uri: edits} elsewhere)
    text: str = field(default="", repr=False)  # the text the edits belong to
    ready_t: float | None = None  # its first part reached the plan (or it ended with none)
    done_t: float | None = None  # it ended
    others: dict[str, tuple[int, int, str]] = field(default_factory=dict, repr=False)  # uri -> (rev, version, text)
    ready: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    plan: Plan | None = field(default=None, repr=False)  # the plan its parts went to

    def ms(self, t: float | None) -> float | None:
        """``t`` in ms after the last keystroke."""
        return None if t is None else round((t - self.last_edit_t) * 1000, 1)


@dataclass
class Part:
    """One document's share of the plan: ``edits`` in ``text``, which is revision ``revision``; ``planned``
    in ``base``: what the computation found, which every later text is matched against (a jump target
    being filled in changes the text on each keystroke)."""

    revision: int
    version: int
    text: str
    edits: list[NextEdit]
    base: str = ""
    planned: list[NextEdit] = field(default_factory=list)
    path: str = ""  # a file on disk that is not open (revision and version -1: its text is the file's)

    def __post_init__(self) -> None:
        if not self.base:
            self.base, self.planned = self.text, list(self.edits)

    @property
    def on_disk(self) -> bool:
        return bool(self.path)


@dataclass
class Plan:
    """The next edits found after an edit of ``origin``: its own (its part, when it has some) and a
    rename's references or the call sites' edits in the other open documents and the workspace's files on
    disk."""

    origin: str
    parts: dict[str, Part]
    sig: Signature | None = None  # the edited def's signature, when there are jump targets to fill
    complete: bool = True  # False while its computation is still finding parts


@dataclass(frozen=True)
class Elsewhere:
    """A next edit in another document, at its version ``version`` (None: a file on disk that is not open,
    whose text, ``text``, the edit's offsets belong to)."""

    uri: str
    version: int | None
    edit: NextEdit
    text: str | None = None


@dataclass(frozen=True)
class Found:
    """The next edits for one version of a document (``stale``: it changed while they were computed, or
    the request named another version; nothing to apply then), and those in other documents."""

    uri: str
    version: int
    edits: list[NextEdit]
    ready_ms: float | None = None  # from the last keystroke to the first of the edits being ready
    stale: bool = False
    elsewhere: list[Elsewhere] = field(default_factory=list)
    pending: bool = False  # more are being found (in other documents): asking again gets them
    complete_ms: float | None = None  # from the last keystroke to the last of them found
