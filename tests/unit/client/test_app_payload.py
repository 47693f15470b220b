"""Message bodies to and from Python values (apogee.client.app.payload): no I/O."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from typing import Any, Literal

import orjson
import pytest

from apogee.client.app.payload import decoder_for, encode_body
from apogee.common.message import MessageExt
from apogee.errors import PayloadDecodeError


class Size(enum.Enum):
    SMALL = "S"
    LARGE = "L"


@dataclasses.dataclass
class Item:
    sku: str
    qty: int
    size: Size = Size.SMALL


@dataclasses.dataclass
class Order:
    order_id: str
    items: list[Item]
    total: float
    note: str | None = None
    created: dt.datetime | None = None
    ref: uuid.UUID | None = None
    tags: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


def msg(body: bytes) -> MessageExt:
    return MessageExt("T", body, msg_id="ID1")


def test_bodies_are_bytes_as_given_text_as_utf8_and_the_rest_json() -> None:
    assert encode_body(b"\x00\xff") == b"\x00\xff"
    assert encode_body(bytearray(b"ab")) == b"ab"
    assert encode_body("sync hello world! 你好") == "sync hello world! 你好".encode()
    assert orjson.loads(encode_body({"a": [1, 2.5, None]})) == {"a": [1, 2.5, None]}
    order = Order("o-1", [Item("x", 2, Size.LARGE)], 9.5, created=dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC))
    assert orjson.loads(encode_body(order))["items"] == [{"sku": "x", "qty": 2, "size": "L"}]


def test_a_body_that_is_not_json_serialisable_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError, match="cannot send a set"):
        encode_body({1, 2})


def test_str_bytes_and_raw_annotations() -> None:
    m = msg("héllo".encode())
    assert decoder_for(str)(m) == "héllo"
    assert decoder_for(bytes)(m) == "héllo".encode()
    assert decoder_for(MessageExt)(m) is m
    assert decoder_for(None)(m) is m
    with pytest.raises(PayloadDecodeError, match="not UTF-8"):
        decoder_for(str)(msg(b"\xff\xfe"))


def test_json_annotations_are_checked() -> None:
    assert decoder_for(dict)(msg(b'{"a": 1}')) == {"a": 1}
    assert decoder_for(dict[str, int])(msg(b'{"a": 1}')) == {"a": 1}
    assert decoder_for(list[int])(msg(b"[1, 2]")) == [1, 2]
    assert decoder_for(Any)(msg(b'"x"')) == "x"
    assert decoder_for(float)(msg(b"3")) == 3.0
    assert decoder_for(tuple[int, str])(msg(b'[1, "a"]')) == (1, "a")
    assert decoder_for(Literal["a", "b"])(msg(b'"b"')) == "b"
    with pytest.raises(PayloadDecodeError, match=r"\$: expected an object"):
        decoder_for(dict)(msg(b"[1]"))
    with pytest.raises(PayloadDecodeError, match=r"\$\.b: expected an integer"):
        decoder_for(dict[str, int])(msg(b'{"a": 1, "b": "2"}'))
    with pytest.raises(PayloadDecodeError, match=r"\$: expected an integer, got bool"):
        decoder_for(int)(msg(b"true"))
    with pytest.raises(PayloadDecodeError, match="not JSON"):
        decoder_for(dict)(msg(b"sync hello world!"))


def test_dataclasses_round_trip_through_the_template_encoding() -> None:
    order = Order(
        "o-1",
        [Item("x", 2, Size.LARGE), Item("y", 1)],
        9.5,
        note=None,
        created=dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC),
        ref=uuid.UUID(int=7),
        tags={"vip": 1},
    )
    assert decoder_for(Order)(msg(encode_body(order))) == order
    tree = Node("a", [Node("b"), Node("c", [Node("d")])])
    assert decoder_for(Node)(msg(encode_body(tree))) == tree


def test_unknown_fields_are_ignored_so_producers_can_add_fields_first() -> None:
    assert decoder_for(Item)(msg(b'{"sku": "x", "qty": 1, "colour": "red"}')) == Item("x", 1)


def test_dataclass_mismatches_name_the_path() -> None:
    decode = decoder_for(Order)
    with pytest.raises(PayloadDecodeError, match=r"\$\.items\[1\]\.qty: expected an integer, got str"):
        decode(msg(b'{"order_id": "o", "total": 1, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": "2"}]}'))
    with pytest.raises(PayloadDecodeError, match=r"\$: Order needs the field 'items'"):
        decode(msg(b'{"order_id": "o", "total": 1}'))
    with pytest.raises(PayloadDecodeError, match=r"\$\.items\[0\]\.size: expected a value of Size"):
        decode(msg(b'{"order_id": "o", "total": 1, "items": [{"sku": "a", "qty": 1, "size": "XL"}]}'))
    with pytest.raises(PayloadDecodeError, match=r"\$\.created: expected datetime.datetime \| None, got str"):
        decode(msg(b'{"order_id": "o", "total": 1, "items": [], "created": "yesterday"}'))
    with pytest.raises(PayloadDecodeError, match="Positive refused the values: n must be positive"):
        decoder_for(Positive)(msg(b'{"n": 0}'))


class Opaque:
    pass


@dataclasses.dataclass
class Holder:
    thing: Opaque


def test_annotations_nothing_can_decode_into_are_refused_at_declaration() -> None:
    @dataclasses.dataclass
    class Inner:
        n: int

    @dataclasses.dataclass
    class Local:
        inner: Inner  # a local name: get_type_hints cannot see it

    with pytest.raises(TypeError, match="annotations of .*Local cannot be resolved"):
        decoder_for(Local)
    with pytest.raises(TypeError, match="cannot decode a message into"):
        decoder_for(Opaque)
    with pytest.raises(TypeError, match="cannot decode a message into"):
        decoder_for(Holder)
    with pytest.raises(TypeError, match="keys are strings"):
        decoder_for(dict[int, str])
