"""End-to-end in real Neovim 0.11: :checkhealth flint against the protocol stub and the real interpreter."""

from __future__ import annotations

import pytest

from .nvim_driver import Nvim, checkhealth, write_sample

pytestmark = [pytest.mark.e2e, pytest.mark.editor]


def test_neovim_checkhealth_with_stub(neovim_env, stub_server, tmp_path, artifacts):
    """:checkhealth flint with a custom command: the server-start check runs it and times initialize."""
    write_sample(tmp_path / "sample.py")
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, stub_server, artifacts)
    try:
        nv.wait(lambda p: p["ready"], 30, "the client")
        text = checkhealth(nv, 60)
        (artifacts / "checkhealth.txt").write_text(text)
        assert "Flint: server" in text and "OK answered initialize in" in text, text
        assert "custom `cmd`" in text and "ERROR" not in text, text
    finally:
        nv.close()


def test_neovim_checkhealth_real(neovim_env, real_server, tmp_path, artifacts):
    """:checkhealth flint against the real interpreter: Flint importable with a version, the model
    built, `flint serve` answers initialize."""
    write_sample(tmp_path / "sample.py")
    server = dict(real_server, cmd=None)
    nv = Nvim(neovim_env["FLINT_NVIM"], tmp_path, server, artifacts,
              opts={"python": real_server["python"], "cmd_env": real_server["env"]})
    try:
        nv.wait(lambda p: p["ready"], 60, "the client")
        text = checkhealth(nv, 120)
        (artifacts / "checkhealth.txt").write_text(text)
        assert "OK Python 3." in text, text
        assert "OK built: " + real_server["model"] in text, text
        assert "OK answered initialize in" in text, text
        assert "ERROR" not in text, text
    finally:
        nv.close()
