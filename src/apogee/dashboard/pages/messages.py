"""``/messages``: find messages by key, by id, or by topic and time range (a job with
progress: a range can span millions of entries); ``/messages/view/{offset id}``: one message
with its properties, body (text, JSON, hex), trace and consume status per group, and resend
to a consumer (CONSUME_MESSAGE_DIRECTLY, 309); ``/messages/dlq``: a group's dead letters,
sent again to its retry topic."""

from __future__ import annotations

import time
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.admin.messages import RANGE_QUERY_MAX
from apogee.dashboard import message_search as ms
from apogee.dashboard.context import context_of
from apogee.dashboard.errors import BadInput, Problem, attempt, describe
from apogee.dashboard.jobs import Job
from apogee.dashboard.times import local_input, parse_time
from apogee.dashboard.web import NavEntry, fmt_ms, form_data, int_field, redirect, render
from apogee.errors import ApogeeError

NAV: NavEntry | None = NavEntry("Messages", "/messages", 40)

KEY_QUERY_MAX = 64  # messages a key search returns (RocketMQ Dashboard's figure)


async def index(request: Request) -> Response:
    """The search forms; with ``key`` or ``id`` in the query, their results."""
    ctx = context_of(request)
    q = request.query_params
    topic, key, msg_id = q.get("topic", "").strip(), q.get("key", "").strip(), q.get("id", "").strip()
    rows: list[ms.MessageRow] | None = None
    problems: list[Problem] = []
    searched = ""
    if key:
        if not topic:
            raise BadInput("a search by key needs the topic")
        searched = f"key {key!r} in {topic}"
        found = await attempt(problems, "search by key",
                              ctx.admin.query_by_key(topic, key, end_ms=int(time.time() * 1000),
                                                     max_num=KEY_QUERY_MAX))
        rows = ms.rows_of(found or [])
    elif msg_id:
        searched = f"id {msg_id}" + (f" in {topic}" if topic else "")
        found = await attempt(problems, "search by id", ctx.admin.query_by_id(msg_id, topic or None))
        rows = ms.rows_of(found or [])
        if len(rows) == 1:
            return redirect(f"/messages/view/{rows[0].offset_msg_id}")
    now = time.time() * 1000
    return render(request, "messages/index.html", {
        "title": "Messages", "topic": topic, "key": key, "msg_id": msg_id, "rows": rows, "searched": searched,
        "begin": local_input(now - 3_600_000), "end": local_input(now + 60_000), "range_max": RANGE_QUERY_MAX,
    }, problems=problems)


async def search(request: Request) -> Response:
    """Start a search by topic and time range; its page shows the progress, then the rows."""
    ctx = context_of(request)
    form = await form_data(request)
    topic = (form.get("topic") or "").strip()
    if not topic:
        raise BadInput("the topic is required")
    begin = parse_time(form.get("begin", ""), "the beginning of the range")
    end = parse_time(form.get("end", ""), "the end of the range")
    if end < begin:
        raise BadInput("the end of the range is before its beginning")

    async def work(job: Job) -> object:
        found, matched = await ctx.admin.messages_in_range(topic, begin, end, tick=job.tick)
        job.note(f"{matched} messages in the range" + (f", the newest {len(found)} shown" if matched > len(found)
                                                       else ""))
        return {"topic": topic, "begin": begin, "end": end, "matched": matched,
                "rows": [r.to_json() for r in ms.rows_of(found)]}

    job = ctx.jobs.start(f"Messages of {topic} from {fmt_ms(begin)} to {fmt_ms(end)}", work)
    return redirect(f"/messages/search/{job.id}")


async def search_result(request: Request) -> Response:
    ctx = context_of(request)
    job = ctx.jobs.get(request.path_params["job_id"])
    if job is None:
        raise BadInput("that search is no longer kept: search again")
    problems = [job.error] if job.error is not None else []
    return render(request, "messages/search.html", {"title": job.title, "job": job}, problems=problems)


async def view(request: Request) -> Response:
    ctx = context_of(request)
    detail = await ms.message_detail(ctx.admin, request.path_params["msg_id"])
    return render(request, "messages/detail.html", {"title": f"Message {detail.row.msg_id}", "m": detail},
                  problems=detail.problems)


async def consume(request: Request) -> Response:
    """Resend the message to one consumer of a group (309): its listener consumes it again,
    nothing is committed; the answer (CR_SUCCESS, CR_LATER, ...) is the notice."""
    ctx = context_of(request)
    msg_id = request.path_params["msg_id"]
    form = await form_data(request)
    group, _, client = (form.get("consumer") or "").partition("|")
    if not group or not client:
        raise BadInput("choose the consumer to resend the message to")
    result = await ctx.admin.consume_directly(group, client, msg_id)
    outcome = result.get("consumeResult") or "no result"
    remark = f" ({result['remark']})" if result.get("remark") else ""
    spent = result.get("spentTimeMills", 0)
    notice = f"Consumed by {client} of {group}: {outcome}{remark} in {spent} ms"
    return redirect(f"/messages/view/{msg_id}", notice=notice)


# --- dead letters ------------------------------------------------------------------------------


async def dlq(request: Request) -> Response:
    ctx = context_of(request)
    group = request.query_params.get("group", "").strip()
    limit = int_field(request.query_params, "limit", ms.DLQ_SHOWN, low=1, high=RANGE_QUERY_MAX)
    problems: list[Problem] = []
    groups = await attempt(problems, "groups with dead letters", ms.dlq_groups(ctx.admin)) or []
    rows: list[ms.MessageRow] = []
    total = 0
    if group:
        found = await attempt(problems, f"dead letters of {group}", ms.dead_letters(ctx.admin, group, limit))
        rows, total = found if found is not None else ([], 0)
    return render(request, "messages/dlq.html", {
        "title": "Dead letters", "group": group, "groups": groups, "rows": rows, "total": total, "limit": limit,
    }, problems=problems)


async def dlq_resend(request: Request) -> Response:
    """Send the chosen dead letters (``msg:<offset id>`` fields) to the group's retry topic."""
    ctx = context_of(request)
    form = await form_data(request)
    group = (form.get("group") or "").strip()
    ids = [name[len("msg:"):] for name, value in form.items() if name.startswith("msg:") and value]
    if not group or not ids:
        raise BadInput("choose the dead letters to resend")
    sent, failed = [], []
    for offset_id in ids:  # one refused does not stop the others; the notice names both
        try:
            sent.append((await ctx.admin.resend_to_retry(group, offset_id)).msg_id)
        except ApogeeError as exc:
            failed.append(f"{offset_id}: {describe(exc).detail}")
    ctx.sampler.poke()
    notice = f"Resent {len(sent)} to %RETRY%{group}" + (f" as {_some(sent)}" if sent else "")
    if failed:
        notice += f"; {len(failed)} failed: {_some(failed)}"
    return redirect(f"/messages/dlq?group={quote(group, safe='')}", notice=notice)


def _some(items: list[str], shown: int = 5) -> str:
    """The first few of ``items`` (a notice travels in a cookie: it must stay short)."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


routes: list[BaseRoute] = [
    Route("/messages", index, name="messages"),
    Route("/messages/search", search, methods=["POST"], name="message_search"),
    Route("/messages/search/{job_id}", search_result, name="message_search_result"),
    Route("/messages/view/{msg_id}", view, name="message"),
    Route("/messages/view/{msg_id}/consume", consume, methods=["POST"], name="message_consume"),
    Route("/messages/dlq", dlq, name="dlq"),
    Route("/messages/dlq/resend", dlq_resend, methods=["POST"], name="dlq_resend"),
]
