"""The guidance setting through the planner (GenParams.guidance and the document for the analyser) and the
window-to-document step of engine/guidance/service.py."""

import pytest

from engine.guidance.service import whole_document
from engine.types import DocRef, GenParams
from lsp_server.completion.policy.planner import gen_params
from lsp_server.settings import Settings, parse_settings


def test_the_setting_turns_the_monitor_on_and_keys_its_answers_apart():
    doc = DocRef("/w/a.py", 3, "x = 1\n", 0)
    on = gen_params(Settings(guidance=True), "single", invoked=False, doc=doc)
    off = gen_params(Settings(guidance=False), "single", invoked=False, doc=doc)
    assert on.guidance and on.doc is doc
    assert not off.guidance and off.doc is None
    assert off.key() == GenParams(max_tokens=off.max_tokens, max_lines=off.max_lines, quick_start=True).key()
    assert on.key() != off.key()  # a cached unguided answer is not served to a guided request


def test_guidance_setting_parses_and_defaults_off():
    s, warnings = parse_settings({"guidance": True})
    assert s.guidance is True and warnings == []
    assert Settings().guidance is False


def test_whole_document_extends_a_window_and_falls_back_when_it_does_not_match():
    text = "import os\n\n\ndef f():\n    return os.path.join('a', 'b')\n"
    cursor = text.index("path")
    start = text.index("def")
    prefix, suffix = text[start:cursor], text[cursor:cursor + 5]
    assert whole_document(prefix, suffix, DocRef("/w/a.py", 1, text, start)) == (text[:cursor], text[cursor:])
    assert whole_document(prefix, suffix, DocRef("/w/a.py", 1, text, start + 1)) == (prefix, suffix)
    assert whole_document(prefix, suffix, DocRef("/w/a.py", 1, None, 0)) == (prefix, suffix)


@pytest.mark.model  # the tokenizer of the built default model
def test_workspace_folders_become_the_analysers_project_roots(tmp_path, model_dir):
    from engine.decoding.tokenizer import HFTokenizer
    from engine.guidance.jedi_analyser import JediAnalyser
    from engine.guidance.service import Guidance, set_workspace_roots

    an = JediAnalyser()
    g = Guidance(HFTokenizer(str(model_dir / "tokenizer.json")), 151936, an)
    try:
        assert g.wait(120)
        set_workspace_roots([str(tmp_path)])
        assert g.guide("x = ", "\n", b"", path=str(tmp_path / "a.py"), version=1, language="python") is not None
        assert str(tmp_path) in an._roots
    finally:
        set_workspace_roots([])
        an.close()


@pytest.mark.model  # the tokenizer of the built default model
def test_guidance_context_and_next_edits_ask_jedi_on_one_analyser(model_dir):
    """jedi and parso are not thread-safe: every jedi user in the server shares one worker thread."""
    from engine.decoding.tokenizer import HFTokenizer
    from engine.guidance.jedi_analyser import shared_analyser
    from engine.guidance.service import Guidance
    from lsp_server.context import _jedi_context
    from lsp_server.documents import DocumentStore
    from lsp_server.nextedit.service import NextEdits

    g = Guidance(HFTokenizer(str(model_dir / "tokenizer.json")), 151936)
    one = shared_analyser()
    assert g.analyser is one
    assert _jedi_context([]).runner is one
    assert NextEdits(DocumentStore(), lambda: True).analyser() is one
    assert shared_analyser() is one
