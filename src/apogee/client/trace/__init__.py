"""Message traces as RocketMQ's clients write them (``enable_msg_trace``).

* ``records`` -- the format: Pub, SubBefore, SubAfter and EndTransaction records, encoded and
  decoded (pure);
* ``dispatcher`` -- ``TraceDispatcher``: queues records off the send and consume paths and
  sends them in batches to the trace topic with a producer of its own;
* ``hooks`` -- the send, consume and end-transaction hooks that write the records;
* ``view`` -- what the trace topic says about one message, for
  ``apogee admin query-msg-trace-by-id`` (pure).
"""

from apogee.client.trace.dispatcher import TraceDispatcher
from apogee.client.trace.hooks import ConsumeTraceHook, EndTransactionTraceHook, SendTraceHook
from apogee.client.trace.records import (
    TRACE_TOPIC,
    ConsumeReturnType,
    EndTransactionRecord,
    MessageType,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceRecord,
    decode_body,
    decode_records,
    encode_record,
)
from apogee.client.trace.view import MessageTrace, collect_trace

__all__ = [
    "TRACE_TOPIC",
    "ConsumeReturnType",
    "ConsumeTraceHook",
    "EndTransactionRecord",
    "EndTransactionTraceHook",
    "MessageTrace",
    "MessageType",
    "PubRecord",
    "SendTraceHook",
    "SubAfterRecord",
    "SubBeforeRecord",
    "TraceDispatcher",
    "TraceRecord",
    "collect_trace",
    "decode_body",
    "decode_records",
    "encode_record",
]
