"""The engine hands the heap pages loading freed back to the system (engine/model/memory.py)."""

from __future__ import annotations


def test_release_free_heap_returns_pages_glibc_kept():
    """After a burst of small allocations is freed, malloc_trim gives the pages back (glibc) or is a no-op."""
    import platform

    from engine.model.memory import release_free_heap

    junk = [bytes(200) for _ in range(200_000)]  # ~45 MB of small objects on the C heap
    del junk
    got = release_free_heap()
    assert got in (0, 1)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert got == 1  # glibc had free pages at the top of or inside its arenas to return
