"""``/groups``: consumer groups with lag, TPS and online clients; ``/groups/{group}``: one
group's lag per queue (messages and time), clients and subscriptions (307), reset offset by
time, skip backlog, edit and delete.

The list is the sampler's last snapshot (``sampler.py``: one 317 and 201 per master and a
203 per group every tick), so building the page sends no request however many groups there
are; ``/groups/rows`` is its table body alone, which the page fetches again every interval.
A group's page asks fresh (208, 202 per topic, 203, 307 per client); its queue table
(``/groups/{group}/queues``) refreshes every 2 s.  Resets run as jobs (progress per topic).
"""

from __future__ import annotations

import contextlib
import time
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.admin.groups import GROUP_DEFAULTS
from apogee.dashboard import consumer_groups as cg
from apogee.dashboard.context import DashboardContext, context_of
from apogee.dashboard.errors import Problem, attempt
from apogee.dashboard.jobs import Job
from apogee.dashboard.sampler import GroupsSnapshot
from apogee.dashboard.times import local_input, parse_time
from apogee.dashboard.web import NavEntry, fmt_ms, form_data, redirect, render

NAV: NavEntry | None = NavEntry("Consumer groups", "/groups", 30)

QUEUE_REFRESH_MS = 2000


async def _snapshot(ctx: DashboardContext) -> tuple[GroupsSnapshot | None, list[Problem]]:
    """The sampler's last groups snapshot; right after start, the first one (waited for,
    unless sampling already failed: then the banner says why at once)."""
    sampler = ctx.sampler
    if sampler.groups is None and not sampler.errors:
        with contextlib.suppress(TimeoutError):
            await sampler.wait_ticks(1, timeout_s=max(5.0, 2 * sampler.settings.interval_s))
    snap = sampler.groups
    problems = []
    errors = snap.errors if snap is not None else sampler.errors
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        problems.append(Problem("Some figures could not be read", "; ".join(errors[:3]) + more, 200, "sampler"))
    if snap is None and not errors:
        problems.append(Problem("No figures yet", "the first sample of the brokers has not finished", 200, "sampler"))
    return snap, problems


def _list_context(request: Request, snap: GroupsSnapshot | None) -> dict[str, object]:
    show_system = request.query_params.get("system") == "1"
    rows = [r for r in (snap.rows.values() if snap else []) if show_system or not r.system]
    return {"rows": rows, "show_system": show_system, "snapshot": snap,
            "interval_ms": int(context_of(request).sampler.settings.interval_s * 1000),
            "tick_ms": context_of(request).sampler.tick_seconds * 1000}


async def index(request: Request) -> Response:
    snap, problems = await _snapshot(context_of(request))
    context = {"title": "Consumer groups", **_list_context(request, snap)}
    return render(request, "groups/index.html", context, problems=problems)


async def rows(request: Request) -> Response:
    """The list's table body alone (the page swaps it in every interval)."""
    snap, _ = await _snapshot(context_of(request))
    return render(request, "groups/_rows.html", _list_context(request, snap))


async def _queues(ctx: DashboardContext, group: str, detail: cg.GroupDetail | None) -> dict[str, object]:
    problems: list[Problem] = []
    owners = detail.owners if detail is not None else {}
    found = await attempt(problems, "lag per queue", cg.queue_lags_of(ctx.admin, group, owners))
    lags, tps = found if found is not None else ([], 0.0)
    return {"group": group, "queues": lags, "tps": tps, "lag": sum(q.lag for q in lags),
            "topics": sorted({q.topic for q in lags}), "queue_problems": problems, "taken_at": time.time() * 1000}


async def _detail(ctx: DashboardContext, group: str) -> cg.GroupDetail:
    """The group's configs and clients; reused for a few seconds (the queue table's refresh
    shows each queue's owner without asking every client again)."""
    return await ctx.cached(f"group:{group}:detail", lambda: cg.group_detail(ctx.admin, group))


async def detail(request: Request) -> Response:
    ctx = context_of(request)
    group = request.path_params["group"]
    info = await _detail(ctx, group)
    queues = await _queues(ctx, group, info)
    job_id = request.query_params.get("job", "")
    job = ctx.jobs.get(job_id) if job_id else None
    return render(request, "groups/detail.html", {
        "title": f"Group {group}", "detail": info, **queues, "job": job,
        "refresh_ms": QUEUE_REFRESH_MS, "now_local": local_input(time.time() * 1000),
    }, problems=info.problems)


async def queues(request: Request) -> Response:
    ctx = context_of(request)
    group = request.path_params["group"]
    info = await attempt([], "clients", _detail(ctx, group))
    return render(request, "groups/_queues.html", await _queues(ctx, group, info))


# --- reset --------------------------------------------------------------------------------------


async def reset(request: Request) -> Response:
    """Start a reset job (``mode=time`` with ``time``, or ``mode=skip``) on ``topic`` (empty:
    every topic of the group but its retry topic); the group's page shows its progress."""
    ctx = context_of(request)
    group = request.path_params["group"]
    form = await form_data(request)
    skip = form.get("mode") == "skip"
    timestamp_ms = -1 if skip else parse_time(form.get("time", ""), "the time to reset to")
    topic = (form.get("topic") or "").strip()
    if topic:
        topics = [topic]
    else:
        lags, _ = await cg.queue_lags_of(ctx.admin, group)
        topics = cg.group_topics(lags, group)

    async def work(job: Job) -> object:
        try:
            return await cg.reset(ctx.admin, job, group, topics, timestamp_ms)
        finally:
            ctx.invalidate(f"group:{group}:")
            ctx.sampler.poke()

    what = "Skip the backlog" if skip else f"Reset to {fmt_ms(timestamp_ms)}"
    job = ctx.jobs.start(f"{what} of {group}", work)
    return redirect(f"/groups/{quote(group, safe='')}?job={job.id}")


# --- create, update, delete -------------------------------------------------------------------


async def edit(request: Request) -> Response:
    ctx = context_of(request)
    group = request.path_params.get("group", "")
    masters = sorted(await ctx.admin.cluster_masters())
    values = dict(GROUP_DEFAULTS)
    on: list[str] = masters
    if group:
        configs = await ctx.admin.group_config(group)
        values.update(next(iter(configs.values())))
        view = await ctx.admin.cluster_info()
        on = sorted(view.name_of(a) or a for a in configs)
    return render(request, "groups/edit.html", {
        "title": f"Edit group {group}" if group else "New consumer group", "group": group, "values": values,
        "fields": cg.GROUP_FIELDS, "masters": masters, "on": on,
    })


async def save(request: Request) -> Response:
    ctx = context_of(request)
    form = await form_data(request)
    group, settings = cg.parse_group_form(form)
    brokers = [name[len("broker:"):] for name, v in form.items() if name.startswith("broker:") and v]
    done = await cg.save_group(ctx.admin, group, settings, brokers)
    ctx.invalidate(f"group:{group}:")
    ctx.sampler.poke()
    return redirect(f"/groups/{quote(group, safe='')}", notice=f"Saved group {group} on {', '.join(done)}")


async def delete(request: Request) -> Response:
    ctx = context_of(request)
    group = request.path_params["group"]
    form = await form_data(request)
    done = await cg.delete_group(ctx.admin, group, form.get("removeOffsets") in ("on", "true"))
    ctx.invalidate(f"group:{group}:")
    ctx.sampler.poke()
    return redirect("/groups", notice=f"Deleted group {group} on {', '.join(done)}")


routes: list[BaseRoute] = [
    Route("/groups", index, name="groups"),
    Route("/groups", save, methods=["POST"], name="group_save"),
    Route("/groups/rows", rows, name="group_rows"),
    Route("/groups/new", edit, name="group_new"),
    Route("/groups/{group}", detail, name="group"),
    Route("/groups/{group}/queues", queues, name="group_queues"),
    Route("/groups/{group}/edit", edit, name="group_edit"),
    Route("/groups/{group}/reset", reset, methods=["POST"], name="group_reset"),
    Route("/groups/{group}/delete", delete, methods=["POST"], name="group_delete"),
]
