"""What the trace topic says about one message: its sends, each consumer group's
consumptions, its transaction decisions (what mqadmin's ``queryMsgTraceById`` and the
dashboard show).

A trace message found by the message's id may hold records of other messages too (a batch
of records shares one trace message), so only the records whose msgId is the id count, as in
Java's ``TraceView.decodeFromTraceTransData``.  The client host of a record is the born host
of the trace message that carried it (the host of the client that wrote it).  A consumption
pairs a SubBefore with its SubAfter by request id; one without a SubAfter is still running
(or its consumer stopped before it returned).

Pure: the admin command fetches the trace messages and prints what this builds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from apogee.client.trace.records import (
    EndTransactionRecord,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    decode_body,
)


@dataclass(slots=True)
class Send:
    record: PubRecord
    client_host: str


@dataclass(slots=True)
class Consumption:
    """One listener call's part for the message: SubBefore and SubAfter together."""

    group: str
    request_id: str
    client_host: str
    began_ms: int | None = None  # SubBefore's time
    retry_times: int | None = None
    finished_ms: int | None = None  # SubAfter's time (None: no SubAfter yet)
    cost_ms: int | None = None
    success: bool | None = None
    context_code: int | None = None

    @property
    def finished(self) -> bool:
        return self.success is not None


@dataclass(slots=True)
class EndTransaction:
    record: EndTransactionRecord
    client_host: str


@dataclass(slots=True)
class MessageTrace:
    msg_id: str
    sends: list[Send] = field(default_factory=list)
    consumptions: dict[str, list[Consumption]] = field(default_factory=dict)  # by consumer group
    end_transactions: list[EndTransaction] = field(default_factory=list)
    malformed: int = 0  # records of the trace messages that could not be read

    @property
    def empty(self) -> bool:
        return not (self.sends or self.consumptions or self.end_transactions)


def collect_trace(msg_id: str, trace_messages: Iterable[tuple[bytes, str]]) -> MessageTrace:
    """The trace of ``msg_id`` from trace messages given as (body, born host)."""
    trace = MessageTrace(msg_id)
    by_request: dict[str, Consumption] = {}
    for body, host in trace_messages:
        decoded = decode_body(body)
        trace.malformed += decoded.malformed
        for record in decoded.records:
            if record.msg_id != msg_id:
                continue
            if isinstance(record, PubRecord):
                trace.sends.append(Send(record, host))
            elif isinstance(record, EndTransactionRecord):
                trace.end_transactions.append(EndTransaction(record, host))
            else:
                _consumption(trace, by_request, record, host)
    trace.sends.sort(key=lambda s: s.record.timestamp_ms)
    trace.end_transactions.sort(key=lambda e: e.record.timestamp_ms)
    for calls in trace.consumptions.values():
        calls.sort(key=lambda c: c.began_ms if c.began_ms is not None else c.finished_ms or 0)
    return trace


def _consumption(
    trace: MessageTrace, by_request: dict[str, Consumption], record: SubBeforeRecord | SubAfterRecord, host: str
) -> None:
    call = by_request.get(record.request_id)
    if call is None:
        group = record.group or ""
        call = by_request[record.request_id] = Consumption(group, record.request_id, host)
        trace.consumptions.setdefault(group, []).append(call)
    if isinstance(record, SubBeforeRecord):
        call.began_ms, call.retry_times = record.timestamp_ms, record.retry_times
        if not call.group and record.group:  # a SubAfter without a group came first
            _regroup(trace, call, record.group)
    else:
        call.finished_ms, call.cost_ms = record.timestamp_ms, record.cost_ms
        call.success, call.context_code = record.success, record.context_code


def _regroup(trace: MessageTrace, call: Consumption, group: str) -> None:
    old = trace.consumptions.get(call.group, [])
    old.remove(call)
    if not old:
        trace.consumptions.pop(call.group, None)
    call.group = group
    trace.consumptions.setdefault(group, []).append(call)
