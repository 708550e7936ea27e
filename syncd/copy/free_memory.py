"""Give the memory of a dropped reading back to the system between the rounds of a copy.

A copy's peak is where two readings of both organizations would meet: the one a round
planned from and the one read after its apply to plan the next round or to verify. The old
reading is dropped before the new one is read (`_Copy.read_again`); what it held is then
free, but glibc's allocator keeps freed memory in its arenas (one per thread that allocated:
the apply's worker threads write the journal), so the process's RSS does not come down by
itself. Measured at 800 spaces × 10 pages: 44 MB held free against 21 MB in use at the end
of a first copy. `malloc_trim(0)` returns the free pages of every arena; elsewhere than glibc
there is nothing to call and only the collection is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

__all__ = ["give_back_memory"]


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return None
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def give_back_memory() -> None:
    """Collect what cycles keep of dropped objects, then hand free memory back (glibc)."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
