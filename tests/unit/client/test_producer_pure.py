"""Producer checks that need no broker: validation, batch splitting, callbacks."""

from __future__ import annotations

import pytest

from apogee.client.config import ProducerConfig
from apogee.client.producer import Producer, split_batch, validate_message
from apogee.common.message import Message
from apogee.errors import ClientStateError, ConfigError, MessageValidationError


@pytest.mark.parametrize(
    ("msg", "reason"),
    [
        (Message("", b"x"), "empty"),
        (Message("bad topic!", b"x"), "characters"),
        (Message("t" * 128, b"x"), "longer than 127"),
        (Message("TBW102", b"x"), "reserved"),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "system topic"),
        (Message("T", b""), "body is empty"),
        (Message("T", "text"), "must be bytes"),  # type: ignore[arg-type]
        (Message("T", b"x" * 11), "max_message_size"),
        (Message("T", b"x", properties={"k": 1}), "must be str"),  # type: ignore[dict-item]
        (Message("T", b"x", properties={"k\x01": "v"}), "character"),
    ],
)
def test_invalid_messages_are_refused_with_the_reason(msg: Message, reason: str) -> None:
    with pytest.raises(MessageValidationError, match=reason):
        validate_message(msg, 10)


def test_valid_message_passes() -> None:
    validate_message(Message("%RETRY%G", b"x", properties={"KEYS": "a b", "TAGS": "t"}), 10)


def test_split_batch_respects_the_limit() -> None:
    assert split_batch([], 100) == []
    assert [list(r) for r in split_batch([40, 40, 40, 10], 100)] == [[0, 1], [2, 3]]
    assert [list(r) for r in split_batch([150, 10], 100)] == [[0], [1]]  # too big travels alone
    runs = split_batch([30] * 10, 100)
    assert sum(len(r) for r in runs) == 10 and all(len(r) <= 3 for r in runs)


def test_options_and_state_checks() -> None:
    with pytest.raises(TypeError, match="unknown producer option"):
        Producer("g", "127.0.0.1:9876", no_such_option=1)
    with pytest.raises(ConfigError):
        Producer("g", "")
    with pytest.raises(ConfigError):
        Producer("g", "localhost")
    p = Producer(config=ProducerConfig(namesrv_addr="127.0.0.1:9876", group="pg"), batch_max_messages=7)
    assert p.group == "pg" and p.config.batch_max_messages == 7


async def test_sending_before_start_is_a_clear_error() -> None:
    p = Producer("g", "127.0.0.1:9876")
    with pytest.raises(ClientStateError, match="start"):
        await p.send(Message("T", b"x"))
    with pytest.raises(ClientStateError):
        await p.send_async(Message("T", b"x"))
