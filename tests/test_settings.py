"""Settings parsing alone: every field, bad values, shapes clients really send."""

from __future__ import annotations

import pytest

from lsp_server.items import DOUBT, DOUBT_BY_LANGUAGE, Doubt, doubt_for
from lsp_server.settings import Settings, parse_settings, to_camel


def test_defaults_when_nothing_sent():
    s, warnings = parse_settings(None)
    assert s == Settings() and warnings == []
    assert s.model == "qwen2.5-coder-0.5b" and s.max_variants == 3 and s.max_lines == 8
    assert s.multiline == "auto" and s.cache_size_mb == 256
    assert s.enable is True and s.threads == 2 and s.speculation is True


def test_all_fields_camel_case():
    raw = {"model": "/models/mine", "maxVariants": 5, "maxLines": 3, "multiline": "never",
           "cacheSizeMb": 64, "enable": False, "threads": 4, "speculation": False,
           "routing": "hybrid", "remoteUrl": "https://gpu.example/v1", "remoteModel": "qwen", "remoteApiKey": "",
           "remoteFim": "suffix", "remoteFimTemplate": "<p>{prefix}<s>{suffix}<m>", "remoteFor": ["invoked"],
           "remoteTimeoutMs": 3000, "remoteAllowInsecureHttp": True,
           "capableModel": "qwen2.5-coder-1.5b", "contextBudget": 256, "contextSources": ["open"],
           "confidenceCut": 0.4, "confidenceGate": 0.3, "learnedGate": False, "learnedGateAdapts": False,
           "guidance": True}
    s, warnings = parse_settings(raw)
    assert warnings == []
    assert s == Settings(model="/models/mine", max_variants=5, max_lines=3, multiline="never",
                         cache_size_mb=64, enable=False, threads=4, speculation=False, routing="hybrid",
                         remote_url="https://gpu.example/v1", remote_model="qwen", remote_fim="suffix",
                         remote_fim_template="<p>{prefix}<s>{suffix}<m>", remote_for=("invoked",),
                         remote_timeout_ms=3000, remote_allow_insecure_http=True,
                         capable_model="qwen2.5-coder-1.5b", context_budget=256, context_sources=("open",),
                         confidence_cut=0.4, confidence_gate=0.3, learned_gate=False, learned_gate_adapts=False,
                         guidance=True)
    assert to_camel(s) == raw


def test_flint_section_is_unwrapped():
    s, warnings = parse_settings({"flint": {"maxLines": 2}})
    assert s.max_lines == 2 and warnings == []


@pytest.mark.parametrize("raw,field,bad", [
    ({"maxVariants": 0}, "max_variants", "maxVariants"),
    ({"maxVariants": "3"}, "max_variants", "maxVariants"),
    ({"maxVariants": 2.5}, "max_variants", "maxVariants"),
    ({"maxLines": True}, "max_lines", "maxLines"),
    ({"multiline": "sometimes"}, "multiline", "multiline"),
    ({"enable": "yes"}, "enable", "enable"),
    ({"threads": -1}, "threads", "threads"),
    ({"model": ""}, "model", "model"),
    ({"cacheSizeMb": -1}, "cache_size_mb", "cacheSizeMb"),
    ({"confidenceCut": 1.5}, "confidence_cut", "confidenceCut"),
    ({"confidenceCut": "high"}, "confidence_cut", "confidenceCut"),
])
def test_invalid_field_warns_and_keeps_its_current_value(raw, field, bad):
    current, _ = parse_settings({"model": "/models/mine", "maxVariants": 2, "maxLines": 6, "multiline": "never",
                                 "enable": False, "threads": 3, "cacheSizeMb": 20, "confidenceCut": 0.25})
    s, warnings = parse_settings({**raw, "maxLines": 5} if field != "max_lines" else raw, base=current)
    assert getattr(s, field) == getattr(current, field) != getattr(Settings(), field)
    assert len(warnings) == 1 and bad in warnings[0] and repr(getattr(current, field)) in warnings[0]
    if field != "max_lines":
        assert s.max_lines == 5  # a bad field does not cost the good ones


def test_a_typo_in_model_keeps_the_loaded_model():
    current, _ = parse_settings({"model": "qwen2.5-coder-1.5b"})
    s, warnings = parse_settings({"model": 15}, base=current)
    assert s.model == "qwen2.5-coder-1.5b" and s.engine_key() == current.engine_key()
    assert "keeping 'qwen2.5-coder-1.5b'" in warnings[0]


def test_a_bad_key_is_never_repeated_and_the_current_one_kept():
    current, _ = parse_settings({"remoteApiKey": "sk-live-123456"})
    s, warnings = parse_settings({"remoteApiKey": ["sk-live-999999"]}, base=current)
    assert s.remote_api_key == "sk-live-123456"
    assert "sk-live" not in warnings[0] and "keeping the current key" in warnings[0]


def test_a_key_pasted_into_remote_url_is_not_echoed():
    s, warnings = parse_settings({"routing": "hybrid", "remoteUrl": "https://gpu.example/v1?api-key=sk-SECRET42"})
    assert s.remote_url == "" and warnings
    assert all("sk-SECRET42" not in w for w in warnings), warnings
    assert any("?***" in w for w in warnings)


def test_unknown_key_warns():
    s, warnings = parse_settings({"maxLinez": 3})
    assert s == Settings() and "maxLinez" in warnings[0]


@pytest.mark.parametrize("raw", [[1, 2], "fast", 3, {"flint": [1]}])
def test_wrong_shape_warns_and_keeps_the_current_settings(raw):
    current, _ = parse_settings({"maxLines": 2})
    s, warnings = parse_settings(raw, base=current)
    assert s == current and len(warnings) == 1


def test_change_starts_from_current_settings():
    current, _ = parse_settings({"maxLines": 2, "threads": 3})
    s, warnings = parse_settings({"flint": {"maxVariants": 1}}, base=current)
    assert (s.max_lines, s.threads, s.max_variants) == (2, 3, 1) and warnings == []
    # null resets one field to its default
    s, _ = parse_settings({"maxLines": None}, base=current)
    assert s.max_lines == 8 and s.threads == 3


def test_engine_key_changes_only_with_model_or_threads():
    a = Settings()
    assert a.engine_key() == parse_settings({"maxLines": 1})[0].engine_key()
    assert a.engine_key() != parse_settings({"threads": 1})[0].engine_key()


def test_context_sources_must_be_known():
    s, warnings = parse_settings({"contextSources": ["open", "tabs"]})
    assert s.context_sources == Settings().context_sources
    assert len(warnings) == 1 and "tabs" in warnings[0]


def doubt_of(s: Settings, language: str | None) -> Doubt:
    return doubt_for(language, s.confidence_cut, s.confidence_gate)


def test_doubt_thresholds_are_the_languages_own_until_the_user_sets_them():
    s = Settings()  # what every client sends by default: null, the language's own
    assert s.confidence_cut is None and s.confidence_gate is None
    assert doubt_of(s, "go") == DOUBT_BY_LANGUAGE["go"] == doubt_for("Go") and doubt_of(s, "go").gate > 0
    assert doubt_of(s, "python") == doubt_of(s, None) == doubt_of(s, "") == DOUBT
    assert DOUBT.gate == 0.0 and 0 < DOUBT.cut < 1
    mine, warnings = parse_settings({"confidenceGate": 0, "confidenceCut": 0.5})
    assert warnings == []
    assert doubt_of(mine, "go") == doubt_of(mine, "python") == Doubt(cut=0.5, gate=0.0)  # the user's value everywhere
    gate_only, _ = parse_settings({"confidenceGate": 0.6})
    assert doubt_of(gate_only, "go") == Doubt(DOUBT_BY_LANGUAGE["go"].cut, 0.6)
    assert doubt_of(gate_only, "rust") == Doubt(DOUBT.cut, 0.6)
    back, warnings = parse_settings({"confidenceGate": None, "confidenceCut": None}, base=mine)
    assert warnings == [] and doubt_of(back, "go") == DOUBT_BY_LANGUAGE["go"]
