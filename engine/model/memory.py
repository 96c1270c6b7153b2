"""Whether a model fits in the memory this process may still use, checked before any of it is loaded.

Running out of memory mid-load is not an exception Flint can catch: the tokenizer's native code aborts the
process on a failed allocation, and an editor that restarts its language server then restarts it into the same
abort. A model that cannot fit is refused up front with a message that says how much it needs and how much
there is, and the server stays up to say so.
"""

from __future__ import annotations

import resource
from pathlib import Path

from engine.model.manifest import Manifest

# Python, onnxruntime's arenas and the tokenizer's tables, beside the weights and the KV buffers
OVERHEAD_BYTES = 300 * 1024 * 1024


class NotEnoughMemory(RuntimeError):
    pass


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _address_space_left() -> int | None:
    """What RLIMIT_AS still allows (None: no limit): every mapping counts against it, files included."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return soft - int(line.split()[1]) * 1024
    except OSError:
        pass
    return soft


def needed_bytes(model_dir: Path, kv_bytes: int) -> int:
    """The weights onnxruntime holds (the decoder's and the heads' external data), the KV buffers and an
    allowance for the rest; the embedding table is memory-mapped and read a row at a time, so it is not counted."""
    weights = sum(f.stat().st_size for f in Path(model_dir).glob("*.onnx.data"))
    return weights + kv_bytes + OVERHEAD_BYTES


def check_fits(model_dir: Path, manifest: Manifest, capacity: int, batch_max: int) -> None:
    """Raise NotEnoughMemory when the model, with KV buffers of ``capacity`` positions for ``batch_max`` rows
    (float32 keys and values per layer), cannot be loaded in what is left."""
    m = manifest
    kv = 2 * 4 * m.num_layers * batch_max * m.num_kv_heads * max(capacity, m.min_kv_capacity) * m.head_dim
    need = needed_bytes(model_dir, kv)
    limits = [x for x in (_meminfo_available(), _address_space_left()) if x is not None]
    if limits and min(limits) < need:
        mb = 1024 * 1024
        raise NotEnoughMemory(f"not enough memory to load {Path(model_dir).name}: it needs about {need // mb} MB "
                              f"and {max(0, min(limits)) // mb} MB are available; close other programs or use a "
                              "smaller model")


def release_free_heap() -> int:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``); returns 1 if any were.

    Parsing the tokenizer's JSON and building onnxruntime's sessions free most of what they allocate, but glibc
    keeps those pages (in the arenas of the threads that loaded them) and the process's RSS counts them until
    something reuses them. Elsewhere (musl, macOS) there is nothing to do: 0."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return 0
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # no C library to load, or one without malloc_trim (not glibc)
        return 0
    return int(trim(0))
