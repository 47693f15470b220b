"""The message model shared by broker, store and client.

``Message`` is what a producer sends; ``MessageExt`` is a decoded stored record (what a consumer
receives); ``MessageQueue`` names one queue of a topic on one broker.  These are plain slotted
data holders: encoding lives in ``apogee.common.message_codec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from apogee.common import constants as c

HostAddress = tuple[str, int]
"""``(ip, port)`` of a born or store host."""


class MessageQueue(NamedTuple):
    """One queue: ``(topic, broker_name, queue_id)``; hashable, ordered like Java's compareTo."""

    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class Message:
    """A message as a producer builds it: topic, body, user flag and string properties."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    # --- generic properties -------------------------------------------------------------

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    def put_property(self, name: str, value: str) -> None:
        """Set a property; empty names or values are dropped, as Java's parser would."""
        if name and value:
            self.properties[name] = value

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    # --- well-known properties ------------------------------------------------------------

    @property
    def tags(self) -> str | None:
        return self.properties.get(c.PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value:
            self.properties[c.PROPERTY_TAGS] = value
        else:
            self.properties.pop(c.PROPERTY_TAGS, None)

    @property
    def keys(self) -> list[str]:
        """The KEYS property split on spaces (each key is indexed separately)."""
        raw = self.properties.get(c.PROPERTY_KEYS)
        return [k for k in raw.split(c.KEY_SEPARATOR) if k] if raw else []

    @keys.setter
    def keys(self, value: str | list[str] | tuple[str, ...] | None) -> None:
        if isinstance(value, (list, tuple)):
            value = c.KEY_SEPARATOR.join(k for k in value if k)
        if value:
            self.properties[c.PROPERTY_KEYS] = value
        else:
            self.properties.pop(c.PROPERTY_KEYS, None)

    @property
    def delay_time_level(self) -> int:
        raw = self.properties.get(c.PROPERTY_DELAY_TIME_LEVEL)
        try:
            return int(raw) if raw else 0
        except ValueError:
            return 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        if level > 0:
            self.properties[c.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        else:
            self.properties.pop(c.PROPERTY_DELAY_TIME_LEVEL, None)

    @property
    def wait_store_msg_ok(self) -> bool:
        """WAIT: whether the producer waits for the store; absent means true, as in Java."""
        return self.properties.get(c.PROPERTY_WAIT_STORE_MSG_OK, "true") != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[c.PROPERTY_WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(c.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def transaction_prepared(self) -> bool:
        return self.properties.get(c.PROPERTY_TRANSACTION_PREPARED) == "true"


@dataclass(slots=True)
class MessageExt(Message):
    """A stored record, decoded.  ``msg_id`` is UNIQ_KEY when present, else the offset id."""

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: HostAddress = ("0.0.0.0", 0)
    msg_id: str = ""
    offset_msg_id: str = ""
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def compressed(self) -> bool:
        return bool(self.sys_flag & c.COMPRESSED_FLAG)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & c.TRANSACTION_TYPE_MASK
