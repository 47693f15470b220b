"""Every function of apogee._native is safe for any Python argument: a wrong one raises.

The C functions once trusted their callers: ``encode_batch`` sized its output in one pass and
wrote it in a second, so a flag whose ``__index__`` changed the list in between overran the
buffer (a segfault); ``write_batch`` trusted that its body had been scanned, so an item size of
0 looped forever holding the GIL.  These tests give each function what no caller should:
objects whose hooks change the arguments mid-call, buffers that overlap, offsets and counts out
of range.  The calls that crashed or hung before run in a subprocess, so that a regression is a
failed test, not a dead test run (under ``make check-native`` the subprocess inherits the
sanitizer build).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.common.message import MessageExt
from apogee.remoting import header_json
from apogee.remoting.codes import LanguageCode
from apogee.remoting.command import RemotingCommand

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")

IP = bytes([127, 0, 0, 1])
TOPIC = mc.topic_field("T")


def run_isolated(code: str, timeout: float = 60) -> str:
    """Run ``code`` in a fresh interpreter (same environment, so the same build of the
    extension) and return its output; a crash or a hang fails the test with what it printed."""
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"did not finish in {timeout} s (a loop that never ends?): {exc.stdout!r} {exc.stderr!r}")
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_the_extension_under_test_is_the_build_asked_for() -> None:
    """make check-native runs these tests against its sanitizer build, not the installed one."""
    path = os.environ.get("APOGEE_NATIVE_FILE")
    if not path:
        pytest.skip("the installed build")
    assert native.__file__ is not None and os.path.samefile(native.__file__, path)


# --- the two reproducers -------------------------------------------------------------------


def test_encode_batch_flag_that_swaps_in_an_8_mib_body_raises() -> None:
    out = run_isolated("""
        from apogee.common.accel import native
        items = [(0, b"a", ""), (0, b"b", "")]
        class Flag:
            def __index__(self):
                items[1] = (0, bytes(8 << 20), "")  # between the sizing pass and the writing pass
                return 0
        items[0] = (Flag(), b"a", "")
        try:
            native.encode_batch(items)
        except TypeError as exc:
            print("TypeError", exc)
    """)
    assert out.startswith("TypeError")


def test_encode_batch_through_the_codec_falls_back_to_the_reference() -> None:
    """The TypeError is encode_batch's way to decline: message_codec.encode_batch then asks the
    reference, which reads the flag through __index__ like any Python code."""

    class Flag:
        def __index__(self) -> int:
            return 5

    items: list[Any] = [(Flag(), b"a", "K\x01v"), (1, b"b", "")]
    assert mc.encode_batch(items) == mc.encode_batch_py([(5, b"a", "K\x01v"), (1, b"b", "")])
    for bad in ([(2**31, b"a", "")], [(True, b"a", "")], [(0, bytearray(b"a"), "")], [(0, b"a", {"K": "v"})]):
        if bad[0][0] is True:
            assert native.encode_batch(bad) == mc.encode_batch_py(bad)  # a bool is an int
            continue
        with pytest.raises(TypeError):
            native.encode_batch(bad)


def test_write_batch_with_a_24_byte_body_of_zeros_raises() -> None:
    out = run_isolated("""
        from apogee.common.accel import native
        ip = bytes([127, 0, 0, 1])
        buf = bytearray(4096)
        try:
            native.write_batch(buf, 0, bytes(24), b"", b"\\x01T", 0, 0, 0, 0, 0, ip, 1, 0, ip, 1, 0, -1)
        except ValueError as exc:
            print("ValueError", exc, buf == bytearray(4096))
    """, timeout=30)
    assert out.startswith("ValueError") and out.strip().endswith("True")


# --- the broker's writers check their buffers --------------------------------------------------


def _write_batch(buf: Any, pos: int, body: Any, topic: Any = TOPIC, born: Any = IP) -> Any:
    return native.write_batch(buf, pos, body, b"", topic, 0, 0, 0, 0, 0, born, 1, 0, IP, 1, 0, -1)


def _write_single(buf: Any, pos: int, body: Any, props: Any = b"A\x01b", topic: Any = TOPIC) -> Any:
    return native.write_single(buf, pos, body, props, b"", topic, 0, 0, 0, 0, 0, 0, IP, 1, 0, IP, 1, 0, -1)


def test_write_batch_refuses_what_would_write_out_of_bounds() -> None:
    body = mc.encode_batch_py([(0, b"x" * 10, "K\x01v"), (1, b"y", "")])
    count, size = native.scan_batch(body, b"", 1 << 20)
    need = size + count * len(TOPIC)
    for buf, pos in ((bytearray(need), -1), (bytearray(need), need + 1), (bytearray(need - 1), 0),
                     (bytearray(need + 5), 6)):
        before = bytes(buf)
        with pytest.raises(ValueError):
            _write_batch(buf, pos, body)
        assert buf == before
    for bad_body in (body[:-1], body + b"\x00", bytes(22), b"", struct.pack(">i", 0) + body[4:]):
        with pytest.raises(ValueError):
            _write_batch(bytearray(need * 2), 0, bad_body)
    for topic in (b"", b"\x05T", b"\x00", bytes([128]) + b"t" * 128):
        with pytest.raises(ValueError):
            _write_batch(bytearray(need * 2), 0, body, topic=topic)
    with pytest.raises(ValueError):
        _write_batch(bytearray(need * 2), 0, body, born=b"\x7f\x00\x00")
    shared = bytearray(need * 2)
    shared[: len(body)] = body
    with pytest.raises(ValueError):  # the body inside the buffer written
        _write_batch(shared, 0, memoryview(shared)[: len(body)])
    assert _write_batch(bytearray(need), 0, body)[2].count(",") == 1


def test_write_single_refuses_what_would_write_out_of_bounds() -> None:
    total = mc.record_size(3, len(TOPIC), 2 + 3)
    _write_single(bytearray(total), 0, b"abc")
    for buf, pos in ((bytearray(total), -1), (bytearray(total - 1), 0), (bytearray(total), 1)):
        with pytest.raises(ValueError):
            _write_single(buf, pos, b"abc")
    for props in (b"A\x01", b"DELAY\x012", b"A\x01\xff"):
        with pytest.raises(ValueError):
            _write_single(bytearray(total * 2), 0, b"abc", props=props)
    with pytest.raises(ValueError):
        _write_single(bytearray(total * 2), 0, b"")
    shared = bytearray(total * 2)
    with pytest.raises(ValueError):
        _write_single(shared, 0, memoryview(shared)[total:])


def test_index_put_refuses_counts_that_leave_the_index() -> None:
    slots, num = 4, 8
    size = 40 + slots * 4 + num * 20
    entries = struct.pack("=I4xq", 7, 100)
    header = (0, 0, 0, 0, 0, 1)
    assert native.index_put(bytearray(size), slots, num, header, 5, entries, 0)[1] == 1
    for args in ((slots, num + 1, header, 0), (slots, -1, header, 0), (0, num, header, 0),
                 (1 << 62, num, header, 0), (slots, 1 << 62, header, 0),
                 (slots, num, (0, 0, 0, 0, 0, num + 1), 0), (slots, num, (0, 0, 0, 0, 0, -5), 0),
                 (slots, num, (0, 0, 0, 0, 1 << 40, 1), 0), (slots, num, header, -1), (slots, num, header, 2)):
        with pytest.raises(ValueError):
            native.index_put(bytearray(size), args[0], args[1], args[2], 5, entries, args[3])
    # times far apart must not overflow (a UBSan report under make check-native)
    native.index_put(bytearray(size), slots, num, (-(2**63), 0, 0, 0, 0, 1), 2**63 - 1, entries, 0)
    native.index_put(bytearray(size), slots, num, (2**63 - 1, 0, 0, 0, 0, 1), -(2**63), entries, 0)


def test_index_put_with_thousands_of_keys_in_one_message_is_not_quadratic() -> None:
    """KEYS of one message may hold ~16,000 tokens; planning them is linear."""
    keys = 20_000
    slots, num = 1 << 12, keys + 2
    entries = b"".join(struct.pack("=I4xq", k * 2654435761 & 0x7FFFFFFF, 64) for k in range(keys))
    buf = bytearray(40 + slots * 4 + num * 20)
    header, nxt = native.index_put(buf, slots, num, (0, 0, 0, 0, 0, 1), 5, entries, 0)
    assert nxt == keys and header[5] == keys + 1


# --- hooks that change the arguments during the call -------------------------------------------


def test_decode_records_and_decode_frames_take_only_python_slots() -> None:
    """A class that borrows another class's slot descriptors has a smaller layout: writing
    through those offsets would overrun its instances."""
    out = run_isolated("""
        from apogee.common import message_codec as mc
        from apogee.common.accel import native
        from apogee.common.message import MessageExt
        from apogee.remoting import header_json
        from apogee.remoting.codes import LanguageCode
        from apogee.remoting.codec import encode_bytes
        from apogee.remoting.command import RemotingCommand
        record = mc.encode_record(topic="T", body=b"x")
        frame = encode_bytes(RemotingCommand(1, ext_fields={"a": "b"}))
        class Borrowed:
            __slots__ = ()
        for name in MessageExt.__slots__:
            setattr(Borrowed, name, getattr(MessageExt, name))
        class BorrowedCmd:
            __slots__ = ()
        for name in RemotingCommand.__slots__:
            setattr(BorrowedCmd, name, getattr(RemotingCommand, name))
        for cls in (Borrowed, int, type, str):
            try:
                native.decode_records(record, 0, cls)
            except TypeError:
                print("refused", cls.__name__)
        for cls in (BorrowedCmd, int, type, dict):
            try:
                native.decode_frames(frame, 1 << 20, cls, header_json.LANGUAGE_BY_NAME, LanguageCode.OTHER)
            except TypeError:
                print("refused", cls.__name__)
    """)
    assert out.count("refused") == 8, out


def test_decode_records_refuses_a_negative_position() -> None:
    record = mc.encode_record(topic="T", body=b"x")
    with pytest.raises(ValueError):
        native.decode_records(record, -8, MessageExt)
    assert native.decode_records(record, len(record) + 3, MessageExt) == ([], len(record) + 3)


def test_lookups_whose_keys_change_the_dict_do_not_free_what_is_read() -> None:
    out = run_isolated("""
        from apogee.common.accel import native
        from apogee.remoting import header_json
        keys = ("b", "e", "f", "g", "h", "i", "j", "m")
        ext = {}
        class Clearing:
            def __init__(self, twin): self.twin = twin
            def __hash__(self): return hash(self.twin)
            def __eq__(self, other):
                ext.clear()  # frees every value read so far
                return False
        ext.update({"b": "T" * 50 + "x", Clearing("e"): "1", "e": "1", "f": "0", "g": "1", "h": "0"})
        got = native.send_v2_fields(ext, b"", keys)
        print("send_v2_fields", got is None or got[0] == "T" * 50 + "x")
        pull_keys = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
                     "suspendTimeoutMillis", "subVersion", "subscription", "expressionType")
        ext = {}
        ext.update({"consumerGroup": "G" * 50 + "x", Clearing("topic"): "T", "topic": "T"})
        ext.update({k: "1" for k in pull_keys[2:9]})
        got = native.pull_fields(ext, pull_keys)
        print("pull_fields", got is None or got[0] == "G" * 50 + "x")
        names = dict(header_json.LANGUAGE_NAMES)
        class Emptying:
            def __bool__(self):
                names.clear()
                return True
        print("json_frame_head", native.json_frame_head(1, 9, 1, 1, 0, None, Emptying(), 0, names) is None)
        props = {"A": "b"}
        class Growing:
            def __index__(self):
                props.update({f"k{i}": "v" * 100 for i in range(100)})
                return 1
        buf = bytearray()
        uniq = native.batch_append(buf, Growing(), b"x", props, "P", 0, 1 << 62, 1)
        print("batch_append", uniq is not None and uniq == props["UNIQ_KEY"] and len(buf) > 10_000)
    """)
    assert out.split() == ["send_v2_fields", "True", "pull_fields", "True", "json_frame_head", "True",
                           "batch_append", "True"], out


def test_complete_sends_whose_future_empties_the_lists_raises() -> None:
    loop = asyncio.new_event_loop()
    try:
        uniqs, ids = ["u0", "u1", "u2"], ["o0", "o1", "o2"]

        class Emptying(asyncio.Future):  # type: ignore[type-arg]
            def done(self) -> bool:
                futures.clear()
                uniqs.clear()
                ids.clear()
                return False

        futures: list[Any] = [loop.create_future(), Emptying(loop=loop), loop.create_future()]
        first = futures[0]
        with pytest.raises(RuntimeError):
            native.complete_sends(futures, tuple, 0, uniqs, ids, None, 2**63 - 1, "r", False)
        assert first.result() == (0, "u0", "o0", None, 2**63 - 1, "r", False)
    finally:
        loop.close()


def test_complete_sends_builds_only_plain_tuples() -> None:
    """A struct sequence (time.struct_time) keeps fields past its visible items: one filled
    with seven items would free garbage when it dies."""
    import time

    for result_type in (time.struct_time, os.stat_result, int, list):
        with pytest.raises(TypeError):
            native.complete_sends([], result_type, 0, [], [], None, 0, "r", False)


def test_properties_to_string_and_encode_batch_never_read_what_they_did_not_size() -> None:
    assert native.properties_to_string({"a": "é" * 3, "b": None}) == "a\x01ééé"
    assert native.encode_batch(iter([(1, b"x", "")])) == mc.encode_batch_py([(1, b"x", "")])
    with pytest.raises(TypeError):
        native.encode_batch([(1, b"x", "", 4)])
    with pytest.raises(ValueError):
        native.encode_batch([(1, b"x", "k\x01" + "v" * 40_000)])


# --- any argument at all -----------------------------------------------------------------------


class Hostile:
    """An object whose every hook runs code: __index__, __eq__, __hash__, __bool__, __len__."""

    def __index__(self) -> int:
        return 3

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash("code")

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return 8


_RECORD = mc.encode_record(topic="T", body=b"x", properties="TAGS\x01A")
_BATCH = mc.encode_batch_py([(0, b"x", "KEYS\x01k")])
_FRAME = struct.pack(">iI", 4 + 11, 11) + b'{"code":10}'

# A valid call of every function; the test below replaces some of its arguments.
VALID_CALLS: dict[str, tuple[Any, ...]] = {
    "java_hash": ("abc", 7),
    "index_hashes": (7, ["a", "b"]),
    "index_put": (bytearray(40 + 16 + 80), 4, 4, (0, 0, 0, 0, 0, 1), 5, struct.pack("=I4xq", 1, 9), 0),
    "scan_batch": (_BATCH, b"", 100),
    "write_batch": (bytearray(512), 0, _BATCH, b"", TOPIC, 0, 0, 0, 0, 0, IP, 1, 0, IP, 1, 0, 5),
    "scan_single": (b"A\x01b", b"C\x01d"),
    "send_v2_fields": ({"b": "T", "e": "1", "f": "0", "g": "5", "h": "0"}, b"", tuple("befghijm")),
    "write_single": (bytearray(512), 0, b"x", b"A\x01b", b"", TOPIC, 0, 0, 0, 0, 0, 0, IP, 1, 0, IP, 1, 0, 5),
    "encode_batch": ([(0, b"x", "A\x01b")],),
    "decode_records": (_RECORD, 0, MessageExt),
    "properties_to_string": ({"a": "b"}, True),
    "uniq_id_now": ("P", 0, 1 << 62, 1),
    "batch_append": (bytearray(), 0, b"x", {"a": "b"}, "P", 0, 1 << 62, 1),
    "complete_sends": ([], tuple, 0, [], [], None, 0, "r", False),
    "decode_frames": (_FRAME, 1 << 20, RemotingCommand, header_json.LANGUAGE_BY_NAME, LanguageCode.OTHER),
    "json_frame_head": (1, 9, 1, 1, 0, None, {"a": "b"}, 0, header_json.LANGUAGE_NAMES),
    "fields_frame": (1, 2, 0, "PYTHON", 1, ("a",), ("b",), b"x"),
    "pull_fields": ({"consumerGroup": "g", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
                     "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"},
                    ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
                     "suspendTimeoutMillis", "subVersion", "subscription", "expressionType")),
    "collect_records": (struct.pack(">qiq", 10, 5, 1) * 2, 800, bytes(100), 0, 100, 0, 32, 1 << 62, 1 << 20, 32, 0,
                        {1}),
    "scan_dispatch": (_RECORD, 0, len(_RECORD), 0, 10, True),
    "record_ends": (_RECORD, 0, len(_RECORD)),
    "crc32": (b"x" * 100, 7),
}

odd_values = st.one_of(
    st.sampled_from([None, True, 0, -1, 1, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 2**70, 1.5, "", "\ud800",
                     "x" * 300, b"", bytes(30), bytearray(3), memoryview(b"abc"), (), [], {}, {"a": 1},
                     ("a",) * 8, [1, 2], object(), int, type, MessageExt, RemotingCommand]),
    st.builds(Hostile),
    st.integers(),
    st.binary(max_size=64),
    st.text(max_size=10),
)


def test_every_function_has_a_valid_call_here() -> None:
    public = {name for name in dir(native) if not name.startswith("_")}
    assert public == set(VALID_CALLS) | {"Flusher"}  # the one type: tests/native/test_flusher.py
    for name, args in VALID_CALLS.items():
        getattr(native, name)(*args)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(VALID_CALLS)), st.data())
def test_any_argument_raises_or_answers(name: str, data: st.DataObject) -> None:
    args = [a.copy() if isinstance(a, bytearray | dict | list) else a for a in VALID_CALLS[name]]
    for _ in range(data.draw(st.integers(1, 3))):
        args[data.draw(st.integers(0, len(args) - 1))] = data.draw(odd_values)
    extra = data.draw(st.sampled_from([[], [], [], [None]]))
    with contextlib.suppress(TypeError, ValueError, OverflowError, RuntimeError, BufferError, UnicodeError,
                             MemoryError):
        getattr(native, name)(*args, *extra)
