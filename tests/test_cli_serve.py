"""`flint serve` argument checks and `flint stats` output (no model needed)."""

from __future__ import annotations

import json

import pytest

from lsp_server import stats
from lsp_server.cli import _parse_tcp, main


@pytest.mark.parametrize("value,expected", [
    ("127.0.0.1:2087", ("127.0.0.1", 2087)),
    ("localhost:9000", ("localhost", 9000)),
    ("[::1]:2087", ("::1", 2087)),
    ("127.0.0.5:1", ("127.0.0.5", 1)),
])
def test_tcp_loopback_accepted(value, expected):
    assert _parse_tcp(value) == expected


@pytest.mark.parametrize("value", ["0.0.0.0:2087", "192.168.1.2:2087", "example.com:80", "127.0.0.1", "127.0.0.1:0",
                                   "127.0.0.1:http"])
def test_tcp_refuses_anything_else(value):
    with pytest.raises(ValueError):
        _parse_tcp(value)


def test_serve_refuses_public_address(capsys):
    assert main(["serve", "--tcp", "0.0.0.0:2087"]) == 2
    assert "loopback" in capsys.readouterr().err


def test_stats_prints_merged_totals(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    # two servers flushing into the same file add up
    for latency in (40.0, 80.0):
        s = stats.Stats()
        s.count("requests")
        s.completed(latency, "model", 1)
        s.count("shown")
        s.count("accepted")
        s.flush()
    assert main(["stats"]) == 0
    out = capsys.readouterr().out
    assert "requests     2" in out and "100.0% of shown" in out and "model 2" in out
    assert main(["stats", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 2 and data["latency_p50_ms"] == 40.0 and data["latency_p99_ms"] == 80.0


def test_stats_survive_a_corrupt_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLINT_HOME", str(tmp_path))
    (tmp_path / "stats.json").write_text("{not json")
    assert main(["stats"]) == 0
    assert "requests     0" in capsys.readouterr().out
