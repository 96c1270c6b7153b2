"""The installed llama.cpp (llama-cpp-python, the remote-test and bench extras) is the portable build
scripts/llama_wheel.sh makes: no AMX and no AVX-512 instruction anywhere in its libraries, AVX2 in its CPU
backend. A native build on a VM that advertises AMX without granting it dies with SIGILL at its first request."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.llamacpp

# the mnemonic after the address (not a symbol name in <...>)
AMX = re.compile(r"^\s*[0-9a-f]+:\s+(tilezero|tileloadd\w*|tilestored|tilerelease|ldtilecfg|sttilecfg|tdp\w+|tcmm\w+)\b")
# what only EVEX (AVX-512) encodes: zmm, the mask registers, xmm/ymm 16-31
EVEX = re.compile(r"%zmm\d+|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b")


def _libs() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:  # a missing part fails, it does not skip
        pytest.fail("llama-cpp-python is not installed: scripts/setup.sh export,dev,remote-test installs it")
    libs, seen = [], set()
    for f in sorted((Path(spec.origin).parent / "lib").glob("*.so*")):
        digest = hashlib.sha256(f.read_bytes()).digest()
        if digest not in seen:  # libX.so, libX.so.0 and libX.so.0.x are copies
            seen.add(digest)
            libs.append(f)
    return libs


def _disassembly(lib: Path) -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.fail("objdump is missing: install binutils (apt-get install binutils)")
    r = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_no_amx_and_no_avx512_in_the_llama_cpp_libraries():
    libs = _libs()
    assert any(f.name.startswith("libggml-cpu") for f in libs), libs
    found = {}
    for lib in libs:
        text = _disassembly(lib)
        bad = [line for line in text.splitlines() if AMX.search(line) or EVEX.search(line)]
        if bad:
            found[lib.name] = f"{len(bad)} instructions, e.g. " + " | ".join(b.strip() for b in bad[:3])
        if lib.name.startswith("libggml-cpu"):
            # the disassembly is read, and the baseline is AVX2, not plain SSE
            assert "%ymm" in text, f"no AVX register in {lib}"
    assert not found, f"llama.cpp was not built portably (scripts/llama_wheel.sh): {found}"


def test_the_library_reports_the_avx2_baseline():
    _libs()
    r = subprocess.run([sys.executable, "-c", "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    info = r.stdout
    assert "AVX2 = 1" in info and "FMA = 1" in info, info
    assert "AVX512" not in info and "AMX" not in info, info
