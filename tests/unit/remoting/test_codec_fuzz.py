"""Whatever bytes arrive, the decoder yields commands or raises RemoteProtocolError: nothing else."""

from __future__ import annotations

import struct

from hypothesis import example, given
from hypothesis import strategies as st

from apogee.errors import RemoteProtocolError
from apogee.remoting.codec import FrameDecoder, encode_bytes
from apogee.remoting.command import RemotingCommand


def _feed_all(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_size=4096)
    try:
        for chunk in chunks:
            for cmd in decoder.feed(chunk):
                assert isinstance(cmd, RemotingCommand)
    except RemoteProtocolError:
        pass


@given(st.lists(st.binary(max_size=200), max_size=8))
@example([b"\x00\x00\x00\x08\x01\x00\x00\x04\xff\xff\xff\xff"])
def test_random_bytes(chunks: list[bytes]) -> None:
    _feed_all(chunks)


@st.composite
def framed_garbage(draw: st.DrawFn) -> bytes:
    """A plausible prefix around random header bytes, to get past the length checks."""
    stype = draw(st.sampled_from([0, 1, 2, 255]))
    header = draw(st.binary(max_size=120))
    body = draw(st.binary(max_size=40))
    hlen = draw(st.sampled_from([len(header), len(header) + 1, max(0, len(header) - 1)]))
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | hlen) + header + body


@given(st.lists(framed_garbage(), min_size=1, max_size=4))
def test_framed_garbage(frames: list[bytes]) -> None:
    _feed_all(frames)


@st.composite
def mutated_valid_frame(draw: st.DrawFn) -> bytes:
    cmd = RemotingCommand(
        draw(st.integers(0, 400)),
        ext_fields=draw(st.dictionaries(st.text(min_size=1, max_size=5), st.text(min_size=1, max_size=5), max_size=4)),
        remark=draw(st.none() | st.text(min_size=1, max_size=10)),
        serialize_type=draw(st.sampled_from([0, 1])),
    )
    frame = bytearray(encode_bytes(cmd))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(frame) - 1))
        frame[pos] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(frame)))
    return bytes(frame[:cut])


@given(st.lists(mutated_valid_frame(), min_size=1, max_size=3))
def test_mutated_and_truncated_frames(frames: list[bytes]) -> None:
    _feed_all(frames)
