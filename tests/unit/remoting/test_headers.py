from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apogee.errors import HeaderError
from apogee.remoting.fields import parse_bool, parse_int, parse_text
from apogee.remoting.headers.base import Header, wire


@dataclass
class Sample(Header):
    topic: str
    queue_id: int
    batch: bool = False
    key: str | None = wire("k", None)


def test_decode_is_lenient_like_the_real_clients() -> None:
    h = Sample.decode({"topic": "T", "queueId": "3", "batch": "1", "k": "x", "AccessKey": ""})
    assert h == Sample("T", 3, True, "x")
    assert Sample.decode({"topic": "T", "queueId": "-1", "batch": "false"}).batch is False


def test_missing_required_field_names_it_as_java_does() -> None:
    with pytest.raises(HeaderError, match=r"the custom field <queueId> is null"):
        Sample.decode({"topic": "T"})


def test_bad_values_are_header_errors() -> None:
    with pytest.raises(HeaderError, match="queueId"):
        Sample.decode({"topic": "T", "queueId": "three"})
    with pytest.raises(HeaderError, match="batch"):
        Sample.decode({"topic": "T", "queueId": "1", "batch": "maybe"})


def test_encode_writes_strings_only() -> None:
    assert Sample("T", 2, True).encode() == {"topic": "T", "queueId": "2", "batch": "true"}


def _all_headers() -> list[type[Header]]:
    import apogee.remoting.headers.consumer
    import apogee.remoting.headers.namesrv
    import apogee.remoting.headers.pull
    import apogee.remoting.headers.send  # noqa: F401

    found, todo = [], list(Header.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if dataclasses.is_dataclass(cls):
            found.append(cls)
    return found


def _decode_by_spec(cls: type[Header], ext: dict[str, object]) -> Header:
    """The rules of headers/base.py's docstring, applied field by field (what the generated
    decoders must do)."""
    values = {}
    ranges = cls.int_ranges()
    for attr, key, kind, required in cls._fields():
        raw = ext.get(key)
        if raw is None or (raw == "" and kind != 2):
            if required:
                raise HeaderError(f"the custom field <{key}> is null")
            continue
        values[attr] = parse_int(key, raw) if kind == 0 else parse_bool(key, raw) if kind == 1 else parse_text(raw)  # type: ignore[arg-type]
        if kind == 0 and not ranges[key].lo <= values[attr] <= ranges[key].hi:
            raise HeaderError(f"the custom field <{key}> is out of range for {ranges[key].java}: {values[attr]}")
    return cls(**values)


values = st.one_of(st.none(), st.sampled_from(["", "0", "1", "true", "false", "-7", "x", "12345678901", "2147483648",
                                               "-9223372036854775809", "100000000000000000000"]), st.integers(),
                   st.booleans())


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_every_header_decodes_and_encodes_by_the_rules(data: st.DataObject) -> None:
    for cls in _all_headers():
        keys = [key for _, key, _, _ in cls._fields()]
        ext = {k: v for k, v in data.draw(st.fixed_dictionaries({k: values for k in keys})).items() if v is not None}
        ext["unknownKey"] = "ignored"
        try:
            expected: Header | str = _decode_by_spec(cls, ext)
        except HeaderError as exc:
            expected = str(exc)
        try:
            got: Header | str = cls.decode(ext)
        except HeaderError as exc:
            got = str(exc)
        assert got == expected, cls.__name__
        if isinstance(got, Header):
            out = got.encode()
            assert all(isinstance(v, str) for v in out.values())
            assert cls.decode(out) == got


@pytest.mark.parametrize(
    ("cls", "ext", "field"),
    [
        ("send.SendMessageRequestHeaderV2", {"h": "2147483648"}, "h"),
        ("send.SendMessageRequestHeaderV2", {"f": "2147483648"}, "f"),
        ("send.SendMessageRequestHeaderV2", {"j": "2147483648"}, "j"),
        ("send.SendMessageRequestHeaderV2", {"g": str(1 << 63)}, "g"),
        ("consumer.UpdateConsumerOffsetRequestHeader", {"commitOffset": "100000000000000000000"}, "commitOffset"),
        ("consumer.CreateTopicRequestHeader", {"perm": "100000000000000000000"}, "perm"),
        ("consumer.CreateTopicRequestHeader", {"perm": "16"}, "perm"),
        ("consumer.CreateTopicRequestHeader", {"perm": "-1"}, "perm"),
        ("pull.PullMessageRequestHeader", {"queueId": "-2147483649"}, "queueId"),
    ],
)
def test_numbers_outside_their_java_type_name_the_field(cls: str, ext: dict[str, str], field: str) -> None:
    import importlib

    module, name = cls.split(".")
    header_cls = getattr(importlib.import_module(f"apogee.remoting.headers.{module}"), name)
    good = {
        "a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
        "consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
    }
    header_cls.decode(good)
    with pytest.raises(HeaderError, match=f"the custom field <{field}> is out of range"):
        header_cls.decode({**good, **ext})


def test_java_long_fields_take_every_long() -> None:
    from apogee.remoting.headers.consumer import UpdateConsumerOffsetRequestHeader

    for offset in (str((1 << 63) - 1), str(-(1 << 63)), str(1 << 40)):
        h = UpdateConsumerOffsetRequestHeader.decode({"consumerGroup": "G", "topic": "T", "queueId": "0",
                                                      "commitOffset": offset})
        assert h.commit_offset == int(offset)
