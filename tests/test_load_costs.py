"""What loading costs: heap pages returned after it (engine/model/memory.py), the healing index built on the
loader thread (engine/decoding/tokenizer.py)."""

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


def test_prefix_index_keeps_the_first_id_of_equal_token_bytes():
    """Two ids with the same bytes (an added token spelling a vocabulary entry): exact lookups give the lower
    id, as the index has always done, and both are found by prefix."""
    from engine.decoding.tokenizer import PrefixIndex

    idx = PrefixIndex([b"ab", b"a", b"ab", b"", b"b", b"abc"], skip={4})
    assert idx.prefixes_of(b"abcd") == [1, 0, 5]
    assert idx.starting_with(b"ab") == [0, 2, 5]
    assert idx.starting_with(b"b") == []  # skipped
