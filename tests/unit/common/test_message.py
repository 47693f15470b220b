from __future__ import annotations

from apogee.common import constants as c
from apogee.common.message import Message, MessageExt, MessageQueue


def test_message_property_helpers() -> None:
    m = Message("T", b"body")
    m.tags = "TagA"
    m.keys = ["k1", "", "k2"]
    m.delay_time_level = 3
    m.wait_store_msg_ok = False
    m.put_property("", "x")
    m.put_property("empty", "")
    assert m.properties == {c.TAGS: "TagA", c.KEYS: "k1 k2", c.DELAY: "3", c.WAIT: "false"}
    assert m.keys == ["k1", "k2"] and m.tags == "TagA" and m.delay_time_level == 3
    assert not m.wait_store_msg_ok
    m.tags = None
    m.delay_time_level = 0
    m.clear_property(c.KEYS)
    assert m.properties == {c.WAIT: "false"}


def test_defaults() -> None:
    m = Message("T")
    assert m.wait_store_msg_ok and m.keys == [] and m.delay_time_level == 0 and m.uniq_key is None
    m.properties[c.DELAY] = "x"
    assert m.delay_time_level == 0


def test_message_ext_flags_and_queue() -> None:
    ext = MessageExt("T", b"", sys_flag=c.COMPRESSED_FLAG | c.TRANSACTION_COMMIT_TYPE)
    assert ext.compressed and ext.transaction_type == c.TRANSACTION_COMMIT_TYPE
    assert isinstance(ext, Message)
    mq = MessageQueue("T", "broker-a", 3)
    assert mq.queue_id == 3 and {mq: 1}[MessageQueue("T", "broker-a", 3)] == 1
