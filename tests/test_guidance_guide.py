"""One generation's monitor (engine/guidance/guide.py) with real jedi and the built model's tokenizer: the
mask at the end of the text and the check of one token, names that start inside a token included."""

import numpy as np
import pytest

from engine.guidance.guide import Guide
from engine.guidance.jedi_analyser import JediAnalyser
from engine.guidance.trie import TokenTrie, load_token_texts

pytestmark = pytest.mark.model  # the tokenizer of the built default model

PREFIX = '''import os


class Box:
    def __init__(self):
        self.width = 1
        self.height = 2

    def area(self):
        return self'''
SUFFIX = "\n\n\ndef helper():\n    pass\n"


@pytest.fixture(scope="module")
def parts(model_dir):
    from tokenizers import Tokenizer

    path = str(model_dir / "tokenizer.json")
    texts, special = load_token_texts(path)
    an = JediAnalyser()
    yield Tokenizer.from_file(path), texts, TokenTrie(texts, special), an
    an.close()


def guide(parts, tmp_path, prefix=PREFIX, suffix=SUFFIX, **kw):
    _, texts, trie, an = parts
    kw.setdefault("budget_s", 30.0)  # the tests ask for answers, not for the budget
    return Guide(an, trie, texts, prefix=prefix, suffix=suffix, path=str(tmp_path / "box.py"), **kw)


def one(tok, text):
    ids = tok.encode(text, add_special_tokens=False).ids
    assert len(ids) == 1, (text, ids)
    return ids[0]


def test_attribute_inside_a_dot_token_is_checked(parts, tmp_path):
    tok = parts[0]
    g = guide(parts, tmp_path)
    assert g.accepts("", one(tok, ".width"))  # "self" + ".width": the name starts inside the token
    assert not g.accepts("", one(tok, ".depth"))
    assert g.accepts("", one(tok, "."))  # the name comes next step, under the mask
    assert g.accepts("", one(tok, " *")) and g.accepts("", one(tok, "\n"))


def test_mask_after_the_dot_and_while_the_name_grows(parts, tmp_path):
    tok, texts = parts[0], parts[1]
    g = guide(parts, tmp_path)
    m = g.allowed(".")
    assert m is not None
    got = {texts[i] for i in np.flatnonzero(m)}
    assert {"width", "height", "area", "wi"} <= got and "depth" not in got and "(" not in got
    m = g.allowed(".wi")
    assert m is not None and m[one(tok, "d")] and not m[one(tok, "de")] and not m[one(tok, "x")]
    assert g.accepts(".wi", one(tok, "d")) and not g.accepts(".wi", one(tok, "x"))
    m = g.allowed(".width")  # complete: the expression goes on
    assert m is not None and m[one(tok, " *")] and m[one(tok, ")\n")] and not m[one(tok, "s")]


def test_names_after_return_are_checked_and_other_tokens_stay_free(parts, tmp_path):
    tok = parts[0]
    prefix = PREFIX[: PREFIX.rindex("self")]  # "...        return "
    g = guide(parts, tmp_path, prefix=prefix.rstrip(" "))  # ends in "return": glued
    assert g.accepts("", one(tok, " self")) and g.accepts("", one(tok, " helper"))
    assert g.accepts("", one(tok, " len")) and g.accepts("", one(tok, " None"))
    assert not g.accepts("", one(tok, " foo"))
    assert g.accepts("", one(tok, " ["))  # not a name
    m = g.allowed("")
    assert m is not None and m[one(tok, " self")] and m[one(tok, "s")] and not m[one(tok, " foo")]


def test_no_constraint_in_strings_comments_and_definitions(parts, tmp_path):
    tok = parts[0]
    for prefix in (PREFIX + " + 'x.", PREFIX + "  # see foo.", "def ", "x = 1\nclass Fo"):
        g = guide(parts, tmp_path, prefix=prefix, suffix="")
        assert g.allowed("") is None, prefix
        assert g.accepts("", one(tok, "depth")) and g.accepts("", one(tok, ".depth")), prefix


def test_soft_triggers_only_when_asked(parts, tmp_path):
    tok = parts[0]
    prefix = "import os\n\nvalues = sorted("  # the first argument: a comprehension may bind it later
    assert guide(parts, tmp_path, prefix=prefix, suffix="").allowed("") is None
    soft = guide(parts, tmp_path, prefix=prefix, suffix="", hard_only=False)
    m = soft.allowed("")
    assert m is not None
    assert m[one(tok, "os")], soft._names(soft._trigger(prefix), prefix)
    assert not m[one(tok, "xyz")]


def test_generated_text_counts(parts, tmp_path):
    """A name the generation defined is known at the next trigger (the analyser reads the generated text)."""
    tok = parts[0]
    g = guide(parts, tmp_path, prefix="import os\n\n", suffix="")
    generated = "fresh_value = os.getcwd()\nresult = fresh"
    m = g.allowed(generated)
    assert m is not None and m[one(tok, "_value")] and not m[one(tok, "_other")]


def test_analyser_late_means_unconstrained(parts, tmp_path):
    tok = parts[0]
    g = guide(parts, tmp_path, prefix=PREFIX + "\n\n# unseen text 42\n        x = self", budget_s=-1.0)
    assert g.accepts("", one(tok, ".depth"))  # no answer in time: no opinion
    assert g.allowed(".") is None
