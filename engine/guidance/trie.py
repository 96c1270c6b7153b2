"""Token ids that continue a candidate name, per vocabulary, and the logit mask.

A token is allowed when the text it adds, ``w = partial + token``, still spells a candidate's beginning
(``isinst`` -> ``isinstance``), or completes one and goes on with a character that cannot continue a
name (``isinstance(``, ``path.``, ``x)``, ``y,``, ``z\\n``); a candidate that ends in such a character
(``key=`` for a keyword argument, ``f"``) may be followed by anything. Multi-token names stay constrained
until they are complete: the partial grows by each token and the next step asks again.

Where a name may start after other text (``partial == ""`` at a ``name``/``argument`` trigger) the token
may also open with whitespace (byte-level BPE's ``Ġfoo``), and tokens that do not start a name at all
(``[``, ``"``, ``1``, ``-``, a line break, an end token) stay free: the monitor only rules out wrong
names. After ``obj.`` (``member``) the name must come at once. A ``glued`` start (the text ends in
``return``) leaves free the tokens that extend that word instead of starting a name.

Per vocabulary (once, ~0.5 s for Qwen's 151,936 tokens) it indexes every token by its text, by its text
without leading whitespace, and by its leading name characters when something else follows them; a step
then looks up each prefix of each candidate's rest: dictionary hits, not a scan of the vocabulary.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

from engine.decoding.tokenizer import HFTokenizer
from engine.guidance.monitor import Trigger, TriggerKind


def is_name_char(ch: str) -> bool:
    return ch == "_" or ch.isalnum()


def is_name_start(ch: str) -> bool:
    return ch == "_" or ch.isalpha()


def continues(w: str, names: Iterable[str]) -> bool:
    """Whether text ``w`` written from a name's start is a candidate's beginning or a complete candidate
    followed by what cannot continue a name."""
    for c in names:
        if c.startswith(w):
            return True
        if w.startswith(c) and (not is_name_char(c[-1]) or not is_name_char(w[len(c)])):
            return True
    return False


def token_texts(token_bytes: Sequence[bytes]) -> tuple[str | None, ...]:
    """Each token id's text (None when its bytes are not UTF-8 on their own: a piece of a character)."""
    out: list[str | None] = []
    for b in token_bytes:
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(None)
    return tuple(out)


@lru_cache(maxsize=4)
def load_token_texts(tokenizer_json: str) -> tuple[tuple[str | None, ...], frozenset[int]]:
    """Token texts and the special (added) tokens of a Hugging Face tokenizer.json, through the engine's
    own tokenizer wrapper (byte-level BPE or sentencepiece)."""
    tk = HFTokenizer(tokenizer_json)
    return token_texts([tk.token_bytes(i) for i in range(tk.vocab_size)]), frozenset(tk.special_ids())


class TokenTrie:
    """Allowed next tokens for a name, over one vocabulary (``texts[id]``, None for opaque pieces).
    ``n_logits`` sizes the masks (a model's head may be wider than its tokenizer)."""

    def __init__(self, texts: Sequence[str | None], special: Iterable[int] = (), n_logits: int | None = None,
                 cache_size: int = 64) -> None:
        self.n = max(len(texts), n_logits or 0)
        special = frozenset(special)
        self.exact: dict[str, list[int]] = {}  # text -> ids (no leading whitespace assumed)
        self.lead: dict[str, list[int]] = {}  # text after leading whitespace -> ids that have some
        self.head: dict[str, list[int]] = {}  # leading name characters -> ids where a non-name char follows
        self.lead_head: dict[str, list[int]] = {}  # the same after leading whitespace
        free = np.zeros(self.n, dtype=bool)  # a name may start here: tokens that start none
        after = np.zeros(self.n, dtype=bool)  # a name is complete: tokens that start with a non-name char
        word = np.zeros(self.n, dtype=bool)  # tokens that go on with a name character at once
        inner = np.zeros(self.n, dtype=bool)  # tokens where a name starts after other text (".attr", "(x")
        for i, s in enumerate(texts):
            if not s:
                continue
            if i in special:
                free[i] = after[i] = True
                continue
            self.exact.setdefault(s, []).append(i)
            inner[i] = any(is_name_start(s[k]) and not is_name_char(s[k - 1]) for k in range(1, len(s)))
            if is_name_char(s[0]):
                word[i] = True
                h = _head(s)
                if len(h) < len(s):
                    self.head.setdefault(h, []).append(i)
            else:
                after[i] = True
            body = s.lstrip()
            if not body or not is_name_start(body[0]):
                free[i] = True
            if len(body) < len(s) and body:
                self.lead.setdefault(body, []).append(i)
                if is_name_start(body[0]):
                    h = _head(body)
                    if len(h) < len(body):
                        self.lead_head.setdefault(h, []).append(i)
        self.free, self.after, self.word, self.inner = free, after, word, inner
        order = sorted(self.exact)
        self._sorted = order  # texts, for candidates ending in a non-name character ("key=")
        self._cache: OrderedDict[tuple[object, ...], np.ndarray | None] = OrderedDict()
        self._cache_size = cache_size

    @classmethod
    def from_tokenizer(cls, tokenizer_json: str, n_logits: int | None = None) -> TokenTrie:
        texts, special = load_token_texts(tokenizer_json)
        return cls(texts, special, n_logits)

    def for_trigger(self, trig: Trigger, names: Sequence[str]) -> np.ndarray | None:
        """``allowed`` for the name a trigger starts."""
        return self.allowed(trig.partial, names, start=trig.kind != TriggerKind.MEMBER, glued=trig.glued)

    def allowed(self, partial: str, names: Sequence[str], *, start: bool = True,
                glued: bool = False) -> np.ndarray | None:
        """A bool mask over the logits: the tokens that may come next when ``partial`` has been written
        of a name that must be one of ``names``. ``start``: before the name other tokens are free
        (``partial == ""`` only; False right after a '.'); ``glued``: the text before ends in a word, so
        tokens that extend it are free too. None: no candidate fits ``partial`` (no opinion: the
        caller does not constrain)."""
        key = (partial, start and not partial, glued and not partial, names if isinstance(names, tuple)
               else tuple(names))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        res = self._allowed(partial, key[3], start and not partial, glued and not partial)
        self._cache[key] = res
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return res

    def _allowed(self, partial: str, names: tuple[str, ...], start: bool, glued: bool) -> np.ndarray | None:
        rests = {c[len(partial):] for c in names if c.startswith(partial)}
        if not rests:
            return None
        ids: list[int] = []
        lead = not partial and start
        for r in rests:
            for k in range(1, len(r) + 1):  # the token stays inside the name
                q = r[:k]
                ids += self.exact.get(q, ())
                if lead:
                    ids += self.lead.get(q, ())
            if not r:
                continue
            if is_name_char(r[-1]):  # the token completes the name and goes on with a non-name char
                ids += self.head.get(r, ())
                if lead:
                    ids += self.lead_head.get(r, ())
            else:  # "key=": anything may follow
                ids += self._starting_with(r)
        if "" in rests:  # the partial is a whole candidate already
            m = self.after.copy()
        elif start:
            m = self.free.copy()
            if glued:
                m |= self.word
        else:
            m = np.zeros(self.n, dtype=bool)
        if ids:
            m[np.asarray(ids, dtype=np.int64)] = True
        return m

    def _starting_with(self, prefix: str) -> list[int]:
        out: list[int] = []
        j = bisect.bisect_left(self._sorted, prefix)
        while j < len(self._sorted) and self._sorted[j].startswith(prefix):
            if len(self._sorted[j]) > len(prefix):
                out += self.exact[self._sorted[j]]
            j += 1
        return out


def _head(s: str) -> str:
    j = 0
    while j < len(s) and is_name_char(s[j]):
        j += 1
    return s[:j]


def mask(logits: np.ndarray, allowed: np.ndarray | None, bonus: float | None = None) -> np.ndarray:
    """Logits with the monitor applied: tokens outside ``allowed`` get -inf (``bonus`` None), or the
    allowed ones get ``bonus`` added (a soft preference). ``logits`` [vocab] or [rows, vocab];
    ``allowed`` a bool mask [vocab] (every row) or [rows, vocab] (one per row: batched variants), sized to
    the vocabulary or wider (cut to the logits). Never in place."""
    lg = np.asarray(logits)
    if allowed is None:
        return lg
    m = allowed[..., : lg.shape[-1]]
    if m.shape[-1] < lg.shape[-1]:
        pad = np.zeros(m.shape[:-1] + (lg.shape[-1] - m.shape[-1],), dtype=bool)
        m = np.concatenate([m, pad], axis=-1)
    if bonus is None:
        return np.where(m, lg, np.float32(-np.inf)).astype(lg.dtype, copy=False)
    return lg + np.asarray(bonus, dtype=lg.dtype) * m


def allowed_ids(allowed: np.ndarray) -> np.ndarray:
    """The token ids of a mask (the form the decode loop's ``greedy_pick(allowed=...)`` takes)."""
    return np.flatnonzero(allowed).astype(np.int64)
