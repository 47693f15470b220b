"""A server process keeps its large freed blocks instead of handing them back to the kernel.

Why: glibc serves a ``malloc`` of 128 KiB or more (a threshold that adapts, up to 32 MiB)
with a fresh ``mmap`` and gives the memory back at ``free``; below the heap's top it trims
anything past 128 KiB.  Every large frame a broker reads -- a producer's 563 KB batch, a
slave's replicated span -- is then built in pages the kernel must zero and map one fault at a
time: on the reference VM, decoding 563 KB frames read in 64 KiB pieces cost 590 us each,
against 53-59 us with the thresholds below (``benchmarks/codec_bench.py --large``).  Blocks up to
``MMAP_THRESHOLD`` now come from the heap, and up to ``TRIM_THRESHOLD`` of freed heap stays in
the process for the next frame, which the broker's memory figures in docs/broker.md include.

Process-wide, so only the server processes ask for it (``cli/serve.py``); the client library
never changes its user's allocator.  A no-op where the C library has no ``mallopt`` (musl,
macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util

MMAP_THRESHOLD = 8 << 20  # larger blocks (rare frames near the 16 MiB limit) still get mmap
TRIM_THRESHOLD = 64 << 20

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_large_blocks() -> bool:
    """Set the thresholds; True if the C library took them."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
