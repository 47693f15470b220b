"""``apogee admin query-msg-trace-by-id``: a message's trace (mqadmin's queryMsgTraceById).

Reads the traces any RocketMQ client wrote (Java, Apogee with ``enable_msg_trace``) and prints
them in mqadmin's columns: the send (``Pub``), then one table per consumer group with a row
per listener call (``Sub``: when it ended, its cost, success or failure).  Beyond mqadmin's
columns, a Sub row tells the delivery's retry times and how the call ended (RocketMQ's
ConsumeReturnType), a call still running (SubBefore without SubAfter) shows as
``consuming``, and transaction decisions (EndTransaction records) get a table of their own.
Times are local, as mqadmin prints them.
"""

from __future__ import annotations

import datetime as dt

from apogee.admin.client import AdminClient
from apogee.cli.admin.commands import Output, admin_command, admin_group, opt
from apogee.client.trace import TRACE_TOPIC, ConsumeReturnType, MessageTrace
from apogee.client.trace.view import Consumption

ROW = "%-10s %-20s %-20s %-20s %-10s %-10s"  # mqadmin's
SUB_ROW = ROW + " %-11s %s"
END_ROW = "%-15s %-20s %-20s %-20s %-17s %s"


def _time(ms: int | None) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") if ms else "-"


def _status(success: bool) -> str:
    return "success" if success else "failed"


def _sub_row(group: str, call: Consumption) -> str:
    if call.success is None:
        return SUB_ROW % ("Sub", group, call.client_host, _time(call.began_ms), "-", "consuming", _retry(call), "-")
    code = call.context_code
    result = ConsumeReturnType(code).name if code is not None and 0 <= code < len(ConsumeReturnType) else "-"
    return SUB_ROW % (
        "Sub", group, call.client_host, _time(call.finished_ms), f"{call.cost_ms}ms", _status(call.success),
        _retry(call), result,
    )


def _retry(call: Consumption) -> str:
    return "-" if call.retry_times is None else str(call.retry_times)


def trace_lines(trace: MessageTrace) -> list[str]:
    """The command's output for ``trace``, line by line."""
    lines: list[str] = []
    for send in trace.sends:
        r = send.record
        lines.append(ROW % ("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"))
        when, cost = _time(r.timestamp_ms), f"{r.cost_ms}ms"
        lines.append(ROW % ("Pub", r.group, send.client_host, when, cost, _status(r.success)))
        lines.append("")
    for group in sorted(trace.consumptions):
        lines.append(SUB_ROW % (
            "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status", "#RetryTimes",
            "#Result",
        ))
        lines.extend(_sub_row(group, call) for call in trace.consumptions[group])
        lines.append("")
    if trace.end_transactions:
        lines.append(END_ROW % ("#Type", "#ProducerGroup", "#ClientHost", "#Time", "#State", "#FromCheck"))
        for end in trace.end_transactions:
            e = end.record
            lines.append(END_ROW % (
                "EndTransaction", e.group, end.client_host, _time(e.timestamp_ms), e.transaction_state,
                "true" if e.from_check else "false",
            ))
        lines.append("")
    return lines


@admin_group.admin("query-msg-trace-by-id", "queryMsgTraceById")
@opt("i", "msgId", required=True, help="The message's id (UNIQ_KEY, as send results and consumers show).")
@opt("t", "traceTopic", default=TRACE_TOPIC, show_default=True, help="The topic the traces went to.")
@admin_command
async def query_msg_trace_by_id(admin: AdminClient, out: Output, msg_id: str, trace_topic: str) -> None:
    """Show a message's trace: its send and each consumer group's consumption."""
    msg_id = msg_id.strip()
    trace = await admin.message_trace(msg_id, trace_topic.strip())
    if trace.empty:
        out.line(f"no trace of message {msg_id} in {trace_topic}")
    for line in trace_lines(trace):
        out.line(line)
    if trace.malformed:
        out.line(f"({trace.malformed} trace record(s) could not be read)")
