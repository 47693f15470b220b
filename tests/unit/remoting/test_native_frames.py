"""The C frame codec (native.decode_frames, json_frame_head, fields_frame) against the pure path.

When the C reader accepts a buffer, it must give exactly the commands the pure decoder gives;
whenever the pure decoder raises, the C reader must decline (None) so that the pure path
produces the error.  The C writer must give orjson's exact bytes, or decline.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from apogee.common.accel import native
from apogee.errors import RemoteProtocolError
from apogee.remoting import header_json
from apogee.remoting.codec import FrameDecoder, encode, fields_frame, fields_frame_py
from apogee.remoting.codes import CURRENT_VERSION, LanguageCode
from apogee.remoting.command import RemotingCommand

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")

MAX = 1 << 20
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
int32 = st.integers(-(2**31), 2**31 - 1)


def c_decode(data: bytes) -> Any:
    return native.decode_frames(data, MAX, RemotingCommand, header_json.LANGUAGE_BY_NAME, LanguageCode.OTHER)


def py_decode(data: bytes) -> tuple[list[RemotingCommand], int] | RemoteProtocolError:
    try:
        return FrameDecoder(MAX)._decode_all_py(data)
    except RemoteProtocolError as exc:
        return exc


def fields(cmd: RemotingCommand) -> tuple[Any, ...]:
    return tuple(getattr(cmd, name) for name in RemotingCommand.__slots__)


def assert_same(data: bytes) -> Any:
    got = c_decode(data)
    want = py_decode(data)
    if isinstance(want, RemoteProtocolError):
        assert got is None, f"C accepted what the pure path refuses: {want}"
        return None
    if got is not None:
        assert got[1] == want[1]
        assert [fields(c) for c in got[0]] == [fields(c) for c in want[0]]
    return got


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


scalars = st.one_of(texts, st.integers(-(2**63), 2**63), st.booleans(), st.none(), st.floats(allow_nan=False))


@st.composite
def header_docs(draw: st.DrawFn) -> bytes:
    """JSON headers as real peers write them, and a few they do not."""
    doc: dict[str, Any] = {"code": draw(st.one_of(int32, st.just("12"), st.none(), st.integers()))}
    for key in ("version", "opaque", "flag"):
        if draw(st.booleans()):
            doc[key] = draw(st.one_of(int32, int32, st.integers(), st.text("0123", max_size=3)))
    if draw(st.booleans()):
        doc["language"] = draw(st.one_of(st.sampled_from(["JAVA", "CPP", "PYTHON", "GO", "NOPE"]), st.integers(0, 9)))
    if draw(st.booleans()):
        doc["remark"] = draw(st.one_of(texts, st.none(), st.integers(0, 3)))
    if draw(st.booleans()):
        doc["extFields"] = draw(st.one_of(st.dictionaries(texts, scalars, max_size=5), st.none(), st.just([])))
    if draw(st.booleans()):
        doc[draw(texts)] = draw(scalars)
    if draw(st.booleans()):
        doc["serializeTypeCurrentRPC"] = "JSON"
    keys = list(doc)
    order = draw(st.permutations(keys))
    doc = {k: doc[k] for k in order}
    style = draw(st.sampled_from(["orjson", "ascii", "spaced"]))
    if style == "orjson":
        try:
            return orjson.dumps(doc)
        except TypeError:  # ints beyond 64 bits
            return json.dumps(doc).encode()
    if style == "ascii":
        return json.dumps(doc, ensure_ascii=True).encode()
    return json.dumps(doc, ensure_ascii=False, indent=1).encode()


@settings(max_examples=500)
@given(header_docs(), st.binary(max_size=8))
def test_decode_frames_equals_the_pure_decoder(header: bytes, body: bytes) -> None:
    assert_same(frame(header, body))


@given(st.lists(st.tuples(header_docs(), st.binary(max_size=8)), min_size=1, max_size=4), st.integers(0, 30))
def test_several_frames_and_a_cut_tail(frames: list[tuple[bytes, bytes]], cut: int) -> None:
    data = b"".join(frame(h, b) for h, b in frames)
    assert_same(data[: max(0, len(data) - cut)])


@given(st.binary(max_size=120), st.sampled_from([0, 1, 7]))
@example(b'{"code":1,"extFields":{"k":"\\ud800"}}', 0)
@example(b'{"code":1,"remark":"\\ud83d\\ude00\\u00e9\\/\\b"}', 0)
@example(b'{"code":1,"extFields":{"a":1,"a":null}}', 0)
@example(b'{"code":1} x', 0)
@example(b'{"code":01}', 0)
@example(b'{"code":-0,"extFields":{"n":-0}}', 0)
def test_random_headers_never_crash(header: bytes, stype: int) -> None:
    assert_same(frame(header, stype=stype))


def test_the_usual_frames_are_read_in_c() -> None:
    """Requests and responses of our own and Java's shape must take the fast path."""
    for cmd in (
        RemotingCommand(310, ext_fields={"a": "g", "i": "KEYS\x01k\x02TAGS\x01A", "e": "3"}, body=b"x" * 10),
        RemotingCommand(0, flag=1, opaque=7, remark="é \"quoted\" \\", ext_fields={"msgId": "AB", "queueId": "1"}),
        RemotingCommand(11, ext_fields=None),
    ):
        data = b"".join(encode(cmd))
        got = assert_same(data)
        assert got is not None
    java = b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,' \
           b'"serializeTypeCurrentRPC":"JSON","version":399}'
    assert assert_same(frame(java)) is not None


def test_field_names_past_the_name_cache_and_odd_names_decode_the_same() -> None:
    """extFields names are kept in a bounded cache: names beyond it, long, non-ASCII or escaped
    ones, and a cached name next to an uncached one must all read as the pure path reads them."""
    names = [f"key{i}" for i in range(100)] + ["k" * 40, "clé", 'q"uote', "msgId"]
    for round_ in range(2):  # the second round meets the names already cached (or not)
        for name in names:
            cmd = RemotingCommand(0, flag=1, opaque=round_, ext_fields={name: "v", "msgId": name})
            got = assert_same(b"".join(encode(cmd)))
            assert got is not None and got[0][0].ext_fields == {name: "v", "msgId": name}


def test_decoded_commands_of_a_subclass_get_their_fields() -> None:
    class Traced(RemotingCommand):
        __slots__ = ("trace",)

    data = b"".join(encode(RemotingCommand(12, opaque=5, ext_fields={"a": "b"}, body=b"xy")))
    (cmd,), _ = native.decode_frames(data, MAX, Traced, header_json.LANGUAGE_BY_NAME, LanguageCode.OTHER)
    assert type(cmd) is Traced and fields(cmd) == fields(py_decode(data)[0][0])  # type: ignore[index]
    (plain,), _ = c_decode(data)  # and back to the plain type: its own slots again
    assert type(plain) is RemotingCommand and fields(plain) == fields(cmd)


def test_binary_headers_and_bad_lengths_are_left_to_the_pure_path() -> None:
    cmd = RemotingCommand(10, ext_fields={"a": "b"}, serialize_type=1)
    assert c_decode(b"".join(encode(cmd))) is None
    assert c_decode(struct.pack(">i", 2) + b"\x00\x00") is None
    assert c_decode(struct.pack(">i", MAX + 1)) is None
    assert c_decode(b"\x00\x00") == ([], 0)


ext_dicts = st.dictionaries(texts, texts, max_size=5)


@settings(max_examples=300)
@given(int32, st.one_of(st.sampled_from(list(LanguageCode)), st.integers(0, 40)), int32, int32, int32,
       st.one_of(st.none(), texts), st.one_of(st.none(), ext_dicts), st.integers(0, 1000))
def test_json_frame_head_equals_orjson(code: int, language: int, version: int, opaque: int, flag: int,
                                       remark: str | None, ext: dict[str, str] | None, body_len: int) -> None:
    got = native.json_frame_head(code, language, version, opaque, flag, remark, ext, body_len,
                                 header_json.LANGUAGE_NAMES)
    header = header_json.encode_header(code, language, version, opaque, flag, remark, ext)
    assert got == struct.pack(">iI", 4 + len(header) + body_len, len(header)) + header


def test_json_frame_head_declines_what_needs_the_pure_path() -> None:
    names = header_json.LANGUAGE_NAMES
    assert native.json_frame_head(1, 9, 1, 1, 0, None, {"n": 5}, 0, names) is None  # stringified there
    assert native.json_frame_head(1, 9, 1, 1, 0, None, {"n": None}, 0, names) is None
    assert native.json_frame_head(1, 9, 1, 1, 0, "\ud800", None, 0, names) is None  # not encodable
    assert native.json_frame_head(True, 9, 1, 1, 0, None, None, 0, names) is None
    assert native.json_frame_head(1 << 70, 9, 1, 1, 0, None, None, 0, names) is None


# --- native.fields_frame: a whole frame from header keys and values ---------------------------

field_values = st.one_of(st.none(), texts, st.integers(-(2**63), 2**63 - 1))


@settings(max_examples=300, deadline=None)
@given(
    code=int32,
    opaque=int32,
    flag=st.sampled_from([0, 1, 2, 3]),
    pairs=st.lists(st.tuples(texts, field_values), max_size=14, unique_by=lambda pair: pair[0]),
    body=st.one_of(st.none(), st.binary(max_size=64)),
)
@example(code=310, opaque=7, flag=0, pairs=[("a", "g"), ("i", "KEYS\x01k\x02TAGS\x01A"), ("j", None), ("e", 3)],
         body=b"x" * 1024)
@example(code=0, opaque=0, flag=1, pairs=[("msgId", "7F00"), ("queueOffset", -1), ("k", '"\\\n\x00')], body=None)
def test_fields_frame_is_the_reference_bytes(
    code: int, opaque: int, flag: int, pairs: list[tuple[str, Any]], body: bytes | None
) -> None:
    """Equal to building the command (extFields dict, str() of numbers) and encoding it.
    Keys are distinct, as every caller's are (a dict would keep only the last of a pair)."""
    keys = tuple(k for k, _ in pairs)
    values = tuple(v for _, v in pairs)
    frame = fields_frame(code, opaque, flag, keys, values, body)
    assert frame == fields_frame_py(code, opaque, flag, keys, values, body)
    assert native.fields_frame(code, opaque, flag, "PYTHON", CURRENT_VERSION, keys, values, body) == frame
    (cmd,), used = FrameDecoder(MAX)._decode_all_py(frame)
    assert used == len(frame)
    assert (cmd.code, cmd.opaque, cmd.flag) == (code, opaque, flag)
    assert (cmd.ext_fields or {}) == {k: str(v) for k, v in pairs if v is not None}
    assert (cmd.body or b"") == (body or b"")


@settings(max_examples=200, deadline=None)
@given(
    code=int32,
    opaque=int32,
    pairs=st.lists(st.tuples(texts, field_values), max_size=6, unique_by=lambda pair: pair[0]),
    body=st.binary(max_size=64),
)
def test_a_fields_frame_head_and_its_body_are_the_whole_frame(
    code: int, opaque: int, pairs: list[tuple[str, Any]], body: bytes
) -> None:
    """An int body is the length of a body written after the head (a pull's records): the
    head and that body together are the frame built with the body, in C and in Python."""
    keys = tuple(k for k, _ in pairs)
    values = tuple(v for _, v in pairs)
    whole = fields_frame_py(code, opaque, 1, keys, values, body)
    assert fields_frame(code, opaque, 1, keys, values, len(body)) + body == whole
    assert fields_frame_py(code, opaque, 1, keys, values, len(body)) + body == whole
    assert native.fields_frame(code, opaque, 1, "PYTHON", CURRENT_VERSION, keys, values, len(body)) + body == whole


@pytest.mark.parametrize(
    "keys, values, body",
    [
        (("a",), ("v",), -1),  # a negative body length
        (("a",), ("v",), 2**31),  # a body past the protocol's frame limit
        (("a",), ("v",), True),  # bool is not a length
        (("a",), (True,), b""),  # bool: str() would say "True", the header codec "true"
        (("a",), (1.5,), b""),  # neither str nor int
        (("a",), (2**64,), b""),  # beyond 64 bits
        ((1,), ("v",), b""),  # a key that is not str
        (("a",), ("\ud800",), b""),  # not encodable
        (("a",), ("v",), bytearray(b"x")),  # body not bytes
    ],
)
def test_fields_frame_declines_what_only_the_reference_handles(keys: Any, values: Any, body: Any) -> None:
    assert native.fields_frame(310, 1, 0, "PYTHON", CURRENT_VERSION, keys, values, body) is None


def test_fields_frame_rejects_mismatched_arguments() -> None:
    with pytest.raises(TypeError):
        native.fields_frame(310, 1, 0, "PYTHON", CURRENT_VERSION, ("a", "b"), ("v",), b"")
    with pytest.raises(TypeError):
        native.fields_frame(310, 1, 0, "PYTHON", CURRENT_VERSION, ["a"], ["v"], b"")
