"""The connector's options, parsed and checked once into frozen dataclasses (no I/O, no pyspark).

Spark hands options over as a ``CaseInsensitiveDict`` whose keys are lower-cased; copying it
into a plain ``dict`` keeps only lower-case keys, so every lookup here goes through the
lower-cased name (``startingOffsets`` and ``startingoffsets`` are the same option).  Unknown
options are an error with a suggestion: a typo in ``startingOffsets`` must not silently read
from the default position.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apogee.client.config import ACCESS_KEY_ENV, SECRET_KEY_ENV, SECURITY_TOKEN_ENV
from apogee.common.config import did_you_mean
from apogee.remoting.signing import SessionCredentials
from apogee.remoting.tls_config import TlsClientConfig
from apogee.spark.errors import ApogeeSparkError
from apogee.spark.offsets import OffsetSpec, parse_offset_spec

# TLS to the NameServers and brokers, for sources and sinks alike (docs/security.md, TLS).
TLS_OPTIONS = ("tls", "tlsCaFile", "tlsCertFile", "tlsKeyFile", "tlsServerName", "tlsVerify")
# ACL (docs/security.md): the account every request is signed with; default the driver's
# $APOGEE_ACCESS_KEY / $APOGEE_SECRET_KEY / $APOGEE_SECURITY_TOKEN.  Spark redacts option
# values whose names match spark.redaction.regex ("secret", "token") in its UI and logs.
ACL_OPTIONS = ("accessKey", "secretKey", "securityToken")

SOURCE_OPTIONS = (
    "namesrv",
    "topic",
    "topics",
    "topicPattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingFromGroup",
    "tags",
    "sqlFilter",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxMessagesPerTrigger",
    "maxOffsetsPerTrigger",
    "maxBytesPerTrigger",
    "failOnDataLoss",
    "group",
    "pullBatchSize",
    "pullTimeoutMs",
    "pullPipeline",
    "requestTimeoutMs",
    "path",
    *TLS_OPTIONS,
    *ACL_OPTIONS,
)
SINK_OPTIONS = (
    "namesrv",
    "topic",
    "deliveryGuarantee",
    "producerGroup",
    "sendTimeoutMs",
    "batchMaxMessages",
    "batchMaxBytes",
    "maxInflightRequests",
    "requestTimeoutMs",
    "path",
    "transactionHistory",
    "transactionTimeoutSeconds",
    *TLS_OPTIONS,
    *ACL_OPTIONS,
)
_ALIASES = {"nameserver": "namesrv", "namesrvaddr": "namesrv"}
_SPARK_OWN = frozenset({"queryname", "checkpointlocation"})

DELIVERY_GUARANTEES = ("exactlyOnce", "atLeastOnce")
DEFAULT_READER_GROUP = "apogee-spark-reader"
DEFAULT_PRODUCER_GROUP = "apogee-spark-writer"


def _lower(options: Mapping[str, Any], known: tuple[str, ...], what: str) -> dict[str, str]:
    """Options under their lower-cased names; unknown names are an error with a suggestion."""
    known_lower = {k.lower(): k for k in known}
    out: dict[str, str] = {}
    for key, value in options.items():
        name = _ALIASES.get(key.lower(), key.lower())
        if name in _SPARK_OWN or name.startswith(("__", "spark.")):
            continue  # set by Spark itself (writeStream.queryName(), .start(path), ...)
        if name not in known_lower:
            hint = did_you_mean(name, known)
            raise ApogeeSparkError(
                f"unknown {what} option {key!r}{hint}; known options: {', '.join(k for k in known if k != 'path')}"
            )
        if value is not None:
            out[name] = str(value)
    return out


def _int(opts: dict[str, str], name: str, default: int | None, *, minimum: int = 0) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ApogeeSparkError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ApogeeSparkError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ApogeeSparkError(f"option {name} must be true or false, got {raw!r}")


def parse_timestamp(name: str, raw: str) -> int:
    """Epoch milliseconds from an integer (ms) or an ISO-8601 date-time (UTC when naive)."""
    text = raw.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ApogeeSparkError(
            f"option {name} must be epoch milliseconds or an ISO-8601 date-time, got {raw!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def _namesrv(opts: dict[str, str]) -> str:
    raw = opts.get("namesrv", "").strip()
    if not raw:
        raise ApogeeSparkError("option namesrv is required: the NameServer address(es), e.g. 127.0.0.1:9876")
    addrs = [a.strip() for a in raw.replace(",", ";").split(";") if a.strip()]
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ApogeeSparkError(f"option namesrv: {addr!r} is not host:port")
    return ";".join(addrs)


def _tls(opts: dict[str, str]) -> TlsClientConfig | None:
    """The TLS options (``tls=true``, or any ``tls*`` file or name given, turns TLS on);
    None: plain connections."""
    files = {name: opts.get(name.lower(), "").strip() for name in ("tlsCaFile", "tlsCertFile", "tlsKeyFile")}
    server_name = opts.get("tlsservername", "").strip()
    if not _bool(opts, "tls", bool(any(files.values()) or server_name)):
        return None
    if files["tlsKeyFile"] and not files["tlsCertFile"]:
        raise ApogeeSparkError("option tlsKeyFile needs tlsCertFile (the client certificate it belongs to)")
    return TlsClientConfig(
        enable=True, ca_file=files["tlsCaFile"], verify=_bool(opts, "tlsVerify", True),
        cert_file=files["tlsCertFile"], key_file=files["tlsKeyFile"], server_name=server_name,
    )


def _credentials(opts: dict[str, str]) -> SessionCredentials | None:
    access = opts.get("accesskey", os.environ.get(ACCESS_KEY_ENV, "")).strip()
    secret = opts.get("secretkey", os.environ.get(SECRET_KEY_ENV, "")).strip()
    token = opts.get("securitytoken", os.environ.get(SECURITY_TOKEN_ENV, "")).strip()
    if bool(access) != bool(secret):
        raise ApogeeSparkError("options accessKey and secretKey go together: give both (or neither) to sign requests")
    return SessionCredentials(access, secret, token or None) if access else None


def tag_set(expression: str) -> frozenset[str] | None:
    """The tags of a tag expression (``"A || B"``), None for ``*`` (all)."""
    text = expression.strip()
    if not text or text == "*":
        return None
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return tags or None


@dataclass(frozen=True)
class SourceOptions:
    namesrv: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting: OffsetSpec = field(default_factory=lambda: OffsetSpec("earliest"))
    ending: OffsetSpec = field(default_factory=lambda: OffsetSpec("latest"))
    starting_from_group: str | None = None
    tags: str = "*"
    sql_filter: str | None = None
    min_partitions: int | None = None
    max_records_per_partition: int = 1_000_000
    max_messages_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    group: str | None = None
    pull_batch_size: int = 32
    pull_timeout_ms: int = 10_000
    pull_pipeline: int = 16
    request_timeout_ms: int = 5000
    tls: TlsClientConfig | None = None
    credentials: SessionCredentials | None = field(default=None, repr=False)

    @property
    def tag_filter(self) -> frozenset[str] | None:
        return tag_set(self.tags)

    @property
    def reader_group(self) -> str:
        return self.group or DEFAULT_READER_GROUP

    def describe_topics(self) -> str:
        return f"pattern {self.topic_pattern!r}" if self.topic_pattern else ", ".join(self.topics)


def parse_source_options(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    opts = _lower(options, SOURCE_OPTIONS, "source")
    namesrv = _namesrv(opts)
    given = [n for n in ("topic", "topics", "topicpattern") if opts.get(n, "").strip()]
    if "path" in opts and not given:
        opts["topic"], given = opts["path"], ["topic"]
    if len(given) != 1:
        raise ApogeeSparkError("give exactly one of the options topic, topics or topicPattern")
    topics: tuple[str, ...] = ()
    pattern = None
    if given[0] == "topicpattern":
        pattern = opts["topicpattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ApogeeSparkError(f"option topicPattern is not a regular expression: {exc}") from None
    else:
        topics = tuple(dict.fromkeys(t.strip() for t in opts[given[0]].split(",") if t.strip()))
        if not topics:
            raise ApogeeSparkError(f"option {given[0]} names no topic")

    starts = [n for n in ("startingoffsets", "startingtimestamp") if n in opts]
    if len(starts) > 1:
        raise ApogeeSparkError("give only one of startingOffsets and startingTimestamp")
    default_start = "latest" if streaming else "earliest"
    if "startingtimestamp" in opts:
        starting = OffsetSpec("timestamp", timestamp=parse_timestamp("startingTimestamp", opts["startingtimestamp"]))
    else:
        starting = parse_offset_spec("startingOffsets", opts.get("startingoffsets", default_start), allow_earliest=True)
    if streaming and ("endingoffsets" in opts or "endingtimestamp" in opts):
        raise ApogeeSparkError("endingOffsets and endingTimestamp apply to batch reads only")
    if "endingoffsets" in opts and "endingtimestamp" in opts:
        raise ApogeeSparkError("give only one of endingOffsets and endingTimestamp")
    if "endingtimestamp" in opts:
        ending = OffsetSpec("timestamp", timestamp=parse_timestamp("endingTimestamp", opts["endingtimestamp"]))
    else:
        ending = parse_offset_spec("endingOffsets", opts.get("endingoffsets", "latest"), allow_earliest=False)

    max_msgs = _int(opts, "maxMessagesPerTrigger", None, minimum=1)
    kafka_max = _int(opts, "maxOffsetsPerTrigger", None, minimum=1)
    if max_msgs is not None and kafka_max is not None:
        raise ApogeeSparkError("give only one of maxMessagesPerTrigger and maxOffsetsPerTrigger")
    max_bytes = _int(opts, "maxBytesPerTrigger", None, minimum=1)
    if not streaming:
        for name in ("maxmessagespertrigger", "maxoffsetspertrigger", "maxbytespertrigger", "group"):
            if name in opts:
                raise ApogeeSparkError(f"option {name} applies to streaming reads only")
    sql = opts.get("sqlfilter", "").strip() or None
    tags = opts.get("tags", "*").strip() or "*"
    if sql and tags != "*":
        raise ApogeeSparkError("give only one of tags and sqlFilter (a SQL92 filter can test TAGS itself)")
    group = opts.get("group", "").strip() or None
    from_group = opts.get("startingfromgroup", "").strip() or None
    pull_batch = _int(opts, "pullBatchSize", 32, minimum=1)
    assert pull_batch is not None
    if pull_batch > 65536:
        raise ApogeeSparkError("option pullBatchSize must be at most 65536")
    return SourceOptions(
        namesrv=namesrv,
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        starting_from_group=from_group,
        tags=tags,
        sql_filter=sql,
        min_partitions=_int(opts, "minPartitions", None, minimum=1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", 1_000_000, minimum=1) or 1_000_000,
        max_messages_per_trigger=max_msgs if max_msgs is not None else kafka_max,
        max_bytes_per_trigger=max_bytes,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        group=group,
        pull_batch_size=pull_batch,
        pull_timeout_ms=_int(opts, "pullTimeoutMs", 10_000, minimum=100) or 10_000,
        pull_pipeline=_int(opts, "pullPipeline", 16, minimum=1) or 16,
        request_timeout_ms=_int(opts, "requestTimeoutMs", 5000, minimum=100) or 5000,
        tls=_tls(opts),
        credentials=_credentials(opts),
    )


@dataclass(frozen=True)
class SinkOptions:
    namesrv: str
    topic: str | None = None
    delivery_guarantee: str = "atLeastOnce"
    producer_group: str = DEFAULT_PRODUCER_GROUP
    send_timeout_ms: int = 10_000
    batch_max_messages: int = 512
    batch_max_bytes: int = 1024 * 1024
    max_inflight_requests: int = 32
    request_timeout_ms: int = 5000
    transaction_history: int = 200
    transaction_timeout_s: int = 60
    tls: TlsClientConfig | None = None
    credentials: SessionCredentials | None = field(default=None, repr=False)


def parse_sink_options(options: Mapping[str, Any], *, streaming: bool) -> SinkOptions:
    opts = _lower(options, SINK_OPTIONS, "sink")
    namesrv = _namesrv(opts)
    topic = (opts.get("topic") or opts.get("path") or "").strip() or None
    default = "exactlyOnce" if streaming else "atLeastOnce"
    raw = opts.get("deliveryguarantee", default).strip()
    guarantee = next((g for g in DELIVERY_GUARANTEES if g.lower() == raw.lower()), None)
    if guarantee is None:
        raise ApogeeSparkError(f"option deliveryGuarantee must be exactlyOnce or atLeastOnce, got {raw!r}")
    if guarantee == "exactlyOnce" and not streaming:
        raise ApogeeSparkError(
            "deliveryGuarantee=exactlyOnce applies to streaming writes; batch writes are atLeastOnce "
            "(a failed task is retried and may send its rows again)"
        )
    return SinkOptions(
        namesrv=namesrv,
        topic=topic,
        delivery_guarantee=guarantee,
        producer_group=opts.get("producergroup", "").strip() or DEFAULT_PRODUCER_GROUP,
        send_timeout_ms=_int(opts, "sendTimeoutMs", 10_000, minimum=100) or 10_000,
        batch_max_messages=_int(opts, "batchMaxMessages", 512, minimum=1) or 512,
        batch_max_bytes=_int(opts, "batchMaxBytes", 1024 * 1024, minimum=1024) or 1024 * 1024,
        max_inflight_requests=_int(opts, "maxInflightRequests", 32, minimum=1) or 32,
        request_timeout_ms=_int(opts, "requestTimeoutMs", 5000, minimum=100) or 5000,
        transaction_history=_int(opts, "transactionHistory", 200, minimum=2) or 200,
        transaction_timeout_s=_int(opts, "transactionTimeoutSeconds", 60, minimum=1) or 60,
        tls=_tls(opts),
        credentials=_credentials(opts),
    )
