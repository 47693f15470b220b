"""Round trips and framing rules of the RemotingCommand codec, for both serialize types."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.errors import RemoteProtocolError
from apogee.remoting.codec import FrameDecoder, decode_frame, encode, encode_bytes
from apogee.remoting.codes import LanguageCode, SerializeType
from apogee.remoting.command import RemotingCommand

int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
# The binary header turns empty strings into null, as Java does, so keys and values the
# round trip must preserve are non-empty there.
nonempty = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@st.composite
def commands(draw: st.DrawFn, serialize_type: int) -> RemotingCommand:
    binary = serialize_type == SerializeType.ROCKETMQ
    return RemotingCommand(
        draw(int16 if binary else int32),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(int16 if binary else int32),
        opaque=draw(int32),
        flag=draw(st.integers(0, 3)),
        remark=draw(st.none() | (nonempty if binary else text)),
        ext_fields=draw(st.none() | st.dictionaries(nonempty, nonempty, max_size=8)),
        body=draw(st.none() | st.binary(min_size=1, max_size=300)),
        serialize_type=serialize_type,
    )


@given(commands(SerializeType.JSON))
def test_json_round_trip(cmd: RemotingCommand) -> None:
    assert FrameDecoder().feed(encode_bytes(cmd)) == [cmd]


@given(commands(SerializeType.ROCKETMQ))
def test_binary_round_trip(cmd: RemotingCommand) -> None:
    assert FrameDecoder().feed(encode_bytes(cmd)) == [cmd]


@given(st.lists(commands(SerializeType.JSON) | commands(SerializeType.ROCKETMQ), max_size=5), st.data())
def test_any_split_of_a_stream_yields_the_same_commands(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(encode_bytes(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out += decoder.feed(stream[prev:cut])
        prev = cut
    assert out == cmds
    assert decoder.buffered == 0


def test_frame_layout_matches_rocketmq() -> None:
    cmd = RemotingCommand(10, opaque=7, ext_fields={"topic": "T"}, body=b"xyz")
    frame = encode_bytes(cmd)
    length, word = struct.unpack_from(">ii", frame)
    header_len = word & 0xFFFFFF
    assert word >> 24 == 0  # JSON: the top byte must be 0 for the C++ and Node clients
    assert length == len(frame) - 4 == 4 + header_len + 3
    header = orjson.loads(frame[8 : 8 + header_len])
    assert header["code"] == 10 and header["opaque"] == 7 and header["flag"] == 0
    assert header["language"] == "PYTHON" and header["extFields"] == {"topic": "T"}
    assert frame.endswith(b"xyz")


def test_binary_header_layout_matches_rocketmq_serializable() -> None:
    cmd = RemotingCommand(
        105, language=LanguageCode.JAVA, version=409, opaque=3, flag=1, remark="hi",
        ext_fields={"k": "v"}, serialize_type=SerializeType.ROCKETMQ,
    )
    frame = encode_bytes(cmd)
    _, word = struct.unpack_from(">ii", frame)
    assert word >> 24 == 1
    header = frame[8:]
    assert header == (
        struct.pack(">hbhii", 105, 0, 409, 3, 1)
        + struct.pack(">i", 2) + b"hi"
        + struct.pack(">i", 2 + 1 + 4 + 1) + struct.pack(">h", 1) + b"k" + struct.pack(">i", 1) + b"v"
    )


def test_ext_field_values_are_sent_as_strings() -> None:
    cmd = RemotingCommand(10, ext_fields={"queueId": 3, "batch": True, "x": "y"})  # type: ignore[dict-item]
    (decoded,) = FrameDecoder().feed(encode_bytes(cmd))
    assert decoded.ext_fields == {"queueId": "3", "batch": "true", "x": "y"}


def test_cpp_style_header_is_accepted() -> None:
    # The C++ client: numbers and "0"/"1" in extFields, an empty remark, a trailing newline.
    header = (
        b'{"code":10,"extFields":{"queueId":3,"sysFlag":0,"bornTimestamp":"1700000000000",'
        b'"unitMode":"0","AccessKey":""},"flag":0,"language":"CPP","opaque":0,"remark":"",'
        b'"version":63}\n'
    )
    frame = struct.pack(">ii", 4 + len(header) + 2, len(header)) + header + b"hi"
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.language == LanguageCode.CPP and cmd.version == 63
    assert cmd.ext_fields == {
        "queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000000", "unitMode": "0", "AccessKey": "",
    }
    assert cmd.body == b"hi" and cmd.remark == ""


def test_cpp_response_flag_3_is_a_response_not_a_oneway_request() -> None:
    cmd = RemotingCommand(0, flag=3)
    assert cmd.is_response and not cmd.is_oneway


def test_response_copies_opaque_and_serialize_type() -> None:
    req = RemotingCommand(105, opaque=42, serialize_type=SerializeType.ROCKETMQ)
    resp = req.response(0, "ok")
    assert (resp.opaque, resp.serialize_type, resp.is_response) == (42, SerializeType.ROCKETMQ, True)


def test_multi_part_body_is_not_joined() -> None:
    parts = [b"aa", memoryview(b"bbb"), bytearray(b"c")]
    cmd = RemotingCommand(0, body=parts)
    buffers = encode(cmd)
    assert buffers[1:] == parts
    (decoded,) = FrameDecoder().feed(b"".join(bytes(b) for b in buffers))
    assert decoded.body == b"aabbbc"


def test_oversized_frame_is_rejected_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(RemoteProtocolError, match="exceeds the maximum frame size 1024"):
        decoder.feed(struct.pack(">i", 1025))
    assert decoder.buffered == 0
    with pytest.raises(RemoteProtocolError, match="already failed"):
        decoder.feed(b"\x00")


def test_frame_at_the_limit_is_accepted() -> None:
    cmd = RemotingCommand(0, body=b"x" * 900)
    frame = encode_bytes(cmd)
    assert FrameDecoder(max_frame_size=len(frame) - 4).feed(frame) == [cmd]


def _json_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (struct.pack(">i", -1), "below the minimum"),
        (struct.pack(">i", 2) + b"ab", "below the minimum"),
        (struct.pack(">ii", 4, 100), "exceeds the frame"),
        (struct.pack(">ii", 6, (2 << 24) | 2) + b"{}", "unknown serialize type"),
        (_json_frame(b"[]"), "not an object"),
        (_json_frame(b"{}"), "'code' is missing"),
        (_json_frame(b'{"code":1.5}'), "'code' is missing or not an integer"),
        (_json_frame(b'{"code":1,"extFields":3}'), "'extFields' is not an object"),
        (_json_frame(b'{"code":1,"extFields":{"a":[]}}'), "extFields"),
        (_json_frame(b'{"code":99999999999999}'), "int32"),
        (_json_frame(b'{"code":1,"remark":5}'), "'remark' is not a string"),
        (_json_frame(b'{"code":1,"x":"\xff"}'), "not valid JSON"),
        (struct.pack(">ii", 8, (1 << 24) | 4) + b"abcd", "shorter than its fixed fields"),
    ],
)
def test_malformed_frames_raise_protocol_error(frame: bytes, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        FrameDecoder().feed(frame)


def test_decode_frame_without_prefix() -> None:
    cmd = RemotingCommand(11, opaque=1, ext_fields={"a": "b"})
    assert decode_frame(encode_bytes(cmd)[4:]) == cmd
