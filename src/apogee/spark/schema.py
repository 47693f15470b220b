"""The row schema of the source and the column names the sink accepts (no pyspark import)."""

from __future__ import annotations

SOURCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("topic", "string"),
    ("broker", "string"),
    ("queue_id", "int"),
    ("queue_offset", "bigint"),
    ("msg_id", "string"),
    ("keys", "string"),
    ("tags", "string"),
    ("body", "binary"),
    ("properties", "map<string,string>"),
    ("born_timestamp", "timestamp"),
    ("store_timestamp", "timestamp"),
    ("born_host", "string"),
    ("reconsume_times", "int"),
)
SOURCE_DDL = ", ".join(f"{name} {kind}" for name, kind in SOURCE_COLUMNS)
SOURCE_NAMES = tuple(name for name, _ in SOURCE_COLUMNS)

# Sink columns: our names, then the Kafka names a ported pipeline may use.
SINK_BODY = ("body", "value")
SINK_KEYS = ("keys", "key")
SINK_PROPERTIES = ("properties", "headers")
SINK_OTHER = ("topic", "tags", "queue_id", "sharding_key", "delay_level")

# Properties the connector uses internally (the exactly-once sink's transaction tag); the
# source hides them from the ``properties`` column.
INTERNAL_PROPERTY_PREFIX = "__APOGEE_SPARK"
TXN_PROPERTY = "__APOGEE_SPARK_TXN"

# Properties with a column of their own, or owned by RocketMQ: not in ``properties``.
SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "INNER_MULTI_DISPATCH",
        "INNER_MULTI_QUEUE_OFFSET",
        "__SHARDINGKEY",
    }
)


def is_user_property(name: str) -> bool:
    return name not in SYSTEM_PROPERTIES and not name.startswith(INTERNAL_PROPERTY_PREFIX)
