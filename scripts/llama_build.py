"""How the installed llama-cpp-python was built, for the benchmarks that use it as a yardstick (issue 32).

llama.cpp reports the instruction sets it was compiled for (``llama_print_system_info``), not the CMake flags.
scripts/llama_wheel.sh writes its flags beside the wheel it builds (``CMAKE_ARGS``); the flags are the
installed build's only when the installed shared libraries are that wheel's, byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheel_flags(wheels_root: Path, version: str, package_root: Path) -> dict | None:
    """The CMake flags of the llama_wheel.sh wheel whose shared libraries are installed under
    ``package_root`` (site-packages: ``llama_cpp/lib/*.so*``), ``version`` matching; None if no kept wheel
    is the installed one."""
    for d in sorted(wheels_root.glob(f"llama-cpp-python-{version}-*")):
        args, whls = d / "CMAKE_ARGS", sorted(d.glob(f"llama_cpp_python-{version}-*.whl"))
        if not args.is_file() or not whls:
            continue
        with zipfile.ZipFile(whls[0]) as z:
            libs = [n for n in z.namelist() if ".so" in Path(n).name]
            same = bool(libs) and all((package_root / n).is_file()
                                      and _sha((package_root / n).read_bytes()) == _sha(z.read(n)) for n in libs)
        if same:
            return {"cmake_args": args.read_text().strip(), "wheel": whls[0].name}
    return None


def build_info() -> dict:
    """version, system_info (llama.cpp's own account of its instruction sets), cmake_args (or why unknown)."""
    try:
        import llama_cpp
    except ImportError:
        return {"version": None, "system_info": "", "cmake_args": "", "wheel": "", "note": "not installed"}
    home = Path(os.environ.get("FLINT_HOME") or Path.home() / ".cache" / "flint")
    found = wheel_flags(home / "wheels", llama_cpp.__version__, Path(llama_cpp.__file__).resolve().parent.parent)
    return {"version": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "cmake_args": found["cmake_args"] if found else "",
            "wheel": found["wheel"] if found else "",
            "note": "scripts/llama_wheel.sh's wheel" if found else
            "not scripts/llama_wheel.sh's wheel: its CMake flags are unknown (pip's default is -march=native)"}


def describe(info: dict) -> str:
    """One line for a report."""
    if not info.get("version"):
        return "llama-cpp-python not installed"
    flags = f"; CMake flags {info['cmake_args']}" if info.get("cmake_args") else ""
    return (f"llama-cpp-python {info['version']} ({info.get('note', '')}){flags}; "
            f"llama.cpp's system info: {info['system_info']}")
