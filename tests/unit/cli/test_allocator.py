"""The servers' allocator thresholds: large frames are built in memory the process keeps."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# In a process of its own: the setting is process-wide.  A producer's 563 KB batches read in
# 64 KiB pieces, as the broker reads them; minor page faults per decoded frame.
PROBE = """
import resource
from apogee.cli.allocator import keep_large_blocks
from apogee.remoting.codec import FrameDecoder, encode_bytes
from apogee.remoting.command import RemotingCommand
assert keep_large_blocks()
stream = encode_bytes(RemotingCommand(320, opaque=1, ext_fields={"a": "1"}, body=b"x" * 563_000)) * 12
pieces = [stream[i:i + 65536] for i in range(0, len(stream), 65536)]
decoder = FrameDecoder(max_frame_size=16 << 20)
warm = sum(len(decoder.feed(p)) for p in pieces[: len(pieces) // 2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
frames = sum(len(decoder.feed(p)) for p in pieces[len(pieces) // 2 :])
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / frames)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_a_server_decodes_large_frames_without_faulting_in_fresh_pages() -> None:
    # With glibc's defaults each such frame took ~240 faults (fresh mmap'd pages, zeroed by
    # the kernel one at a time) and ~590 us to decode; see cli/allocator.py.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    faults_per_frame = float(out.stdout)
    assert faults_per_frame < 10, faults_per_frame
