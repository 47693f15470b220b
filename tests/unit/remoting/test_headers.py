from __future__ import annotations

from dataclasses import dataclass

import pytest

from apogee.errors import HeaderError
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
