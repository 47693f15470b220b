"""RocketMQ's well-known names and numbers, shared by broker, store and client.

Everything here is a fact of the protocol (docs/protocol.md): property
keys travel inside the stored properties string, sysflag bits inside every stored record,
system topic names and prefixes in routes and sends.  Change none of the values.
"""

from __future__ import annotations

import enum
from typing import Final

# --- message property keys (MessageConst) ---------------------------------------------------

PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_BUYER_ID: Final = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG: Final = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG: Final = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG: Final = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MSG_REGION: Final = "MSG_REGION"
PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_INSTANCE_ID: Final = "INSTANCE_ID"
PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL: Final = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
PROPERTY_CLUSTER: Final = "CLUSTER"
PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
PROPERTY_INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"

# Short aliases for the keys used most (the names the issue text uses).
KEYS: Final = PROPERTY_KEYS
TAGS: Final = PROPERTY_TAGS
WAIT: Final = PROPERTY_WAIT_STORE_MSG_OK
DELAY: Final = PROPERTY_DELAY_TIME_LEVEL
UNIQ_KEY: Final = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
REAL_TOPIC: Final = PROPERTY_REAL_TOPIC
REAL_QID: Final = PROPERTY_REAL_QUEUE_ID
TRAN_MSG: Final = PROPERTY_TRANSACTION_PREPARED
PGROUP: Final = PROPERTY_PRODUCER_GROUP
RETRY_TOPIC: Final = PROPERTY_RETRY_TOPIC
ORIGIN_MESSAGE_ID: Final = PROPERTY_ORIGIN_MESSAGE_ID
CLUSTER: Final = PROPERTY_CLUSTER
MAX_RECONSUME_TIMES: Final = PROPERTY_MAX_RECONSUME_TIMES
RECONSUME_TIME: Final = PROPERTY_RECONSUME_TIME
TRANSACTION_CHECK_TIMES: Final = PROPERTY_TRANSACTION_CHECK_TIMES

KEY_SEPARATOR: Final = " "
"""Separates the keys inside the KEYS property; each key is indexed on its own."""

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"


# --- sysflag bits (MessageSysFlag) --------------------------------------------------------------


class MessageSysFlag(enum.IntFlag):
    """Bits of the SYSFLAG field of a stored record (docs/protocol.md, System flags)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6 = 0x10
    STOREHOSTADDRESS_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_LZ4 = 0x100
    COMPRESSION_ZSTD = 0x200
    COMPRESSION_ZLIB = 0x300


# Plain ints for hot paths (IntFlag arithmetic allocates enum members).
COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
TRANSACTION_TYPE_MASK: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20
NEED_UNWRAP_FLAG: Final = 0x40
INNER_BATCH_FLAG: Final = 0x80
COMPRESSION_TYPE_MASK: Final = 0x700


def transaction_type(sysflag: int) -> int:
    """The transaction type bits of ``sysflag`` (NOT, PREPARED, COMMIT or ROLLBACK)."""
    return sysflag & TRANSACTION_TYPE_MASK


def reset_transaction_type(sysflag: int, tran_type: int) -> int:
    """``sysflag`` with its transaction bits replaced by ``tran_type``."""
    return (sysflag & ~TRANSACTION_TYPE_MASK) | tran_type


# --- topics, groups, prefixes ---------------------------------------------------------------

AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
TBW102: Final = AUTO_CREATE_TOPIC_KEY_TOPIC
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
SCHEDULE_TOPIC_XXXX: Final = SCHEDULE_TOPIC
RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
SYSTEM_TOPICS: Final = frozenset((  # TopicValidator's SYSTEM_TOPIC_SET (the broker adds its own names)
    TBW102, SCHEDULE_TOPIC, BENCHMARK_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
))
REPLY_MESSAGE_FLAG: Final = "reply"
"""MSG_TYPE of a reply (MixAll.REPLY_MESSAGE_FLAG): sent as SEND_REPLY_MESSAGE(_V2)."""

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"
CID_RMQ_SYS_TRANS: Final = "CID_RMQ_SYS_TRANS"

CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"

DLQ_NUMS_PER_GROUP: Final = 1
MASTER_ID: Final = 0

MAX_TOPIC_LENGTH: Final = 127
"""Topic names are stored with a signed one-byte length (docs/protocol.md, Stored record)."""

MAX_PROPERTIES_LENGTH: Final = 32767
"""Properties are stored with a signed two-byte length (docs/protocol.md, Stored record)."""


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    """The topic replies of ``cluster`` go to (MixAll.getReplyTopic); every broker has it."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


# --- permissions (PermName) ---------------------------------------------------------------------

PERM_PRIORITY: Final = 8
PERM_READ: Final = 4
PERM_WRITE: Final = 2
PERM_INHERIT: Final = 1


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


# --- delay levels -------------------------------------------------------------------------------

DEFAULT_MESSAGE_DELAY_LEVEL: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""MessageStoreConfig.messageDelayLevel: level L (1-based) uses SCHEDULE_TOPIC queue L-1."""

_UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> list[int]:
    """Delay of each level in milliseconds, index 0 holding level 1."""
    levels: list[int] = []
    for item in text.split():
        unit = item[-1].lower()
        if unit not in _UNIT_MS or not item[:-1].isdigit():
            raise ValueError(f"bad delay level {item!r} in {text!r}")
        levels.append(int(item[:-1]) * _UNIT_MS[unit])
    return levels
