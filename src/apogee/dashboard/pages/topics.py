"""``/topics``: the topic list (normal / retry / DLQ / system, and a text filter), the create and
update form (RocketMQ's quick start creates its topic here by hand), and per topic its route,
queue status (min/max offset, last update), consuming groups, a test send and deletion.

The list costs one GET_ALL_TOPIC_LIST_FROM_NAMESERVER, one GET_BROKER_CLUSTER_INFO and one
GET_ALL_TOPIC_CONFIG per master, whatever the number of topics (cached for
``cacheTtlSeconds``; writes made here forget the cache); a topic's statistics are read only
on its own page.  Writes go through ``apogee.admin`` as ``apogee admin update-topic`` /
``delete-topic`` / ``send-message`` do.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.admin.base import ClusterView
from apogee.admin.errors import NoBrokerRegisteredError
from apogee.common import constants as c
from apogee.common.validators import is_system_topic, validate_topic
from apogee.dashboard.context import DashboardContext, context_of
from apogee.dashboard.errors import BadInput, Problem, attempt, describe
from apogee.dashboard.web import NavEntry, form_data, int_field, json_response, redirect, render
from apogee.errors import ApogeeError

NAV: NavEntry | None = NavEntry("Topics", "/topics", 20)

KINDS = ("normal", "retry", "dlq", "system", "all")
MAX_ROWS = 2000  # rows one list page draws; a filter narrows the rest
PERMS = ((6, "read and write (6)"), (4, "read only (4)"), (2, "write only (2)"))


def topic_path(topic: str, action: str = "") -> str:
    """``/topics/<topic>[/action]``; ``%`` (retry and DLQ topics) escaped."""
    return f"/topics/{quote(topic, safe='')}" + (f"/{action}" if action else "")


def own_names(view: ClusterView) -> tuple[str, ...]:
    """The topics a cluster's brokers make of their own names: each cluster and broker name
    (registered as topics) and each cluster's ``<cluster>_REPLY_TOPIC`` (request-reply)."""
    return (*view.clusters, *view.brokers, *(c.reply_topic(cl) for cl in view.clusters))


def topic_kind(topic: str, own_names: tuple[str, ...] = ()) -> str:
    """normal, retry (``%RETRY%group``), dlq (``%DLQ%group``) or system (RocketMQ's system
    topics, ``rmq_sys_*``, and the topics brokers make of their own names: ``own_names``)."""
    if topic.startswith(c.RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(c.DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if is_system_topic(topic, own_names):
        return "system"
    return "normal"


@dataclass
class TopicRow:
    name: str
    kind: str
    brokers: list[str] = field(default_factory=list)  # broker names whose config holds it
    read_queues: int = 0  # summed over those brokers
    write_queues: int = 0
    perm: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def cluster_view(ctx: DashboardContext) -> ClusterView:
    return await ctx.cached("cluster:view", ctx.admin.cluster_info)


async def topic_rows(ctx: DashboardContext) -> tuple[list[TopicRow], list[Problem]]:
    """Every topic the NameServer knows, with its queues and permission from each master's
    topic table; a master that does not answer is a problem, not a failed list (cached)."""

    async def load() -> tuple[list[TopicRow], list[Problem]]:
        admin = ctx.admin
        names, view = await asyncio.gather(admin.topic_list(), cluster_view(ctx))
        masters = view.masters()
        names_of_cluster = own_names(view)
        problems: list[Problem] = []
        tables = await asyncio.gather(
            *(attempt(problems, f"topics of broker {name}", admin.topic_configs(addr))
              for name, addr in sorted(masters.items()))
        )
        rows = {t: TopicRow(t, topic_kind(t, names_of_cluster)) for t in sorted(names)}
        for broker_name, table in zip(sorted(masters), tables, strict=True):
            for topic, config in (table or {}).items():
                row = rows.get(topic)
                if row is None:  # on the broker, not yet (or no longer) registered: the NameServer's list rules
                    continue
                row.brokers.append(broker_name)
                row.read_queues += int(config.get("readQueueNums") or 0)
                row.write_queues += int(config.get("writeQueueNums") or 0)
                row.perm = int(config.get("perm") or 0)
                row.order = row.order or bool(config.get("order"))
        return list(rows.values()), problems

    return await ctx.cached("topics:rows", load)


def select_rows(rows: list[TopicRow], kind: str, text: str) -> list[TopicRow]:
    needle = text.strip().lower()
    return [r for r in rows if (kind == "all" or r.kind == kind) and (not needle or needle in r.name.lower())]


def _kind_and_text(request: Request) -> tuple[str, str]:
    kind = request.query_params.get("kind", "normal")
    if kind not in KINDS:
        raise BadInput(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return kind, request.query_params.get("q", "")


async def index(request: Request) -> Response:
    kind, text = _kind_and_text(request)
    rows, problems = await topic_rows(context_of(request))
    chosen = select_rows(rows, kind, text)
    counts = {k: sum(1 for r in rows if k == "all" or r.kind == k) for k in KINDS}
    return render(request, "topics/index.html", {
        "title": "Topics", "rows": chosen[:MAX_ROWS], "matching": len(chosen), "kind": kind, "q": text,
        "kinds": KINDS, "counts": counts, "max_rows": MAX_ROWS,
    }, problems=problems)


async def api_topics(request: Request) -> Response:
    kind, text = _kind_and_text(request)
    rows, problems = await topic_rows(context_of(request))
    return json_response({"topics": [r.to_json() for r in select_rows(rows, kind, text)],
                          "problems": [p.to_json() for p in problems]})


# --- create and update ------------------------------------------------------------------------


@dataclass
class TopicForm:
    """The create/update form: where (``cluster:NAME`` or ``broker:ADDR``), queues, perm, order."""

    topic: str = ""
    target: str = ""
    write_queues: int = 8
    read_queues: int = 8
    perm: int = 6
    order: bool = False

    @classmethod
    def parse(cls, form: dict[str, str], topic: str | None = None) -> TopicForm:
        name = (topic if topic is not None else form.get("topic", "")).strip()
        problem = validate_topic(name)
        if problem is not None:
            raise BadInput(problem)
        target = form.get("target", "")
        if not target.startswith(("cluster:", "broker:")):
            raise BadInput("choose where to create the topic (a cluster or a broker)")
        perm = int_field(form, "perm", 6)
        if perm not in (p for p, _ in PERMS):
            raise BadInput(f"perm must be 2, 4 or 6, not {perm}")
        return cls(name, target, int_field(form, "write_queues", 8, low=1), int_field(form, "read_queues", 8, low=1),
                   perm, form.get("order") in ("on", "true", "1"))

    @classmethod
    def lenient(cls, form: dict[str, str], topic: str | None = None) -> TopicForm:
        """What was entered, to show the form again after a refusal (bad numbers: defaults)."""

        def number(name: str, default: int) -> int:
            try:
                return int(form.get(name, ""))
            except ValueError:
                return default

        return cls((topic if topic is not None else form.get("topic", "")).strip(), form.get("target", ""),
                   number("write_queues", 8), number("read_queues", 8), number("perm", 6),
                   form.get("order") in ("on", "true", "1"))


async def _targets(ctx: DashboardContext, problems: list[Problem]) -> list[tuple[str, str]]:
    """(value, label) of the form's "where" choices: each cluster's masters, each master."""
    view = await attempt(problems, "cluster", cluster_view(ctx))
    if view is None:
        return []
    out = [(f"cluster:{cl}", f"every master of cluster {cl}") for cl in sorted(view.clusters)]
    out += [(f"broker:{addr}", f"broker {name} ({addr})") for name, addr in sorted(view.masters().items())]
    return out


async def _render_form(request: Request, values: TopicForm, *, editing: bool, problems: list[Problem],
                       status: int = 200) -> Response:
    ctx = context_of(request)
    targets = await _targets(ctx, problems)
    if not targets and not problems:
        problems.append(describe(NoBrokerRegisteredError(
            f"no broker is registered with the NameServer at {ctx.settings.namesrv_addr}: start one "
            f"(`apogee broker -n {ctx.settings.namesrv_addr}`) or check its namesrvAddr"
        )))
    if not values.target and targets:
        values.target = targets[0][0]
    return render(request, "topics/form.html", {
        "title": f"Update topic {values.topic}" if editing else "Create a topic", "form": values, "editing": editing,
        "targets": targets, "perms": PERMS,
    }, problems=problems, status=status)


async def _save(request: Request, topic: str | None) -> Response:
    ctx = context_of(request)
    raw = await form_data(request)
    values = TopicForm.lenient(raw, topic)
    try:
        values = TopicForm.parse(raw, topic)
        kind, where = values.target.split(":", 1)
        created = await ctx.admin.create_topic(
            values.topic, broker_addr=where if kind == "broker" else None, cluster=where if kind == "cluster" else None,
            read_queues=values.read_queues, write_queues=values.write_queues, perm=values.perm, order=values.order,
        )
    except (ApogeeError, BadInput) as exc:
        problem = describe(exc)
        if problem.status >= 500:  # the cluster changed under the cached view (a broker gone)
            ctx.invalidate()
        return await _render_form(request, values, editing=topic is not None, problems=[problem],
                                  status=problem.status)
    ctx.invalidate("topics:")
    verb = "updated" if topic is not None else "created"
    brokers = ", ".join(f"{name} ({addr})" for name, addr in created.brokers.items())
    return redirect(topic_path(values.topic),
                    f"Topic {values.topic} {verb} on {brokers}: {values.write_queues} write / "
                    f"{values.read_queues} read queues, perm {values.perm}{', ordered' if values.order else ''}.")


async def new_form(request: Request) -> Response:
    return await _render_form(request, TopicForm(topic=request.query_params.get("topic", "")), editing=False,
                              problems=[])


async def create(request: Request) -> Response:
    return await _save(request, None)


async def edit_form(request: Request) -> Response:
    ctx = context_of(request)
    topic = request.path_params["topic"]
    route = await ctx.admin.route(topic)
    values = TopicForm(topic)
    problems: list[Problem] = []
    if route.queue_datas:
        qd = sorted(route.queue_datas, key=lambda q: q.broker_name)[0]
        values.read_queues, values.write_queues, values.perm = qd.read_queue_nums, qd.write_queue_nums, qd.perm
        clusters = sorted({b.cluster for b in route.broker_datas})
        values.target = f"cluster:{clusters[0]}" if len(clusters) == 1 else ""
        addr = next((b.broker_addrs.get(c.MASTER_ID) for b in route.broker_datas if b.broker_name == qd.broker_name),
                    None)
        if addr:
            config = await attempt(problems, "topic config", ctx.admin.topic_configs(addr))
            values.order = bool(((config or {}).get(topic) or {}).get("order"))
    return await _render_form(request, values, editing=True, problems=problems)


async def update(request: Request) -> Response:
    return await _save(request, request.path_params["topic"])


# --- one topic --------------------------------------------------------------------------------


@dataclass
class QueueStatus:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def queue_status(ctx: DashboardContext, topic: str) -> list[QueueStatus]:
    """GET_TOPIC_STATS_INFO (202) on each broker of the topic: every queue's offsets."""
    stats = await ctx.admin.topic_stats(topic)
    rows = [QueueStatus(k.broker_name, k.queue_id, v.min_offset, v.max_offset, v.last_update_timestamp)
            for k, v in stats.items()]
    return sorted(rows, key=lambda r: (r.broker, r.queue_id))


async def _render_detail(request: Request, topic: str, *, sent: dict[str, Any] | None = None,
                         send_form: dict[str, str] | None = None, problems: list[Problem] | None = None,
                         status: int = 200) -> Response:
    ctx = context_of(request)
    problems = problems if problems is not None else []
    route = await ctx.admin.route(topic)  # a topic that does not exist is the page's answer (404)
    view = await attempt(problems, "cluster", cluster_view(ctx))
    queues, groups = await asyncio.gather(
        attempt(problems, "queue status", queue_status(ctx, topic)),
        attempt(problems, "consumer groups", ctx.admin.consumed_by(topic)),
    )
    return render(request, "topics/detail.html", {
        "title": f"Topic {topic}", "topic": topic,
        "kind": topic_kind(topic, own_names(view) if view is not None else ()),
        "brokers": sorted(route.broker_datas, key=lambda b: b.broker_name),
        "queue_datas": sorted(route.queue_datas, key=lambda q: q.broker_name), "order_conf": route.order_topic_conf,
        "queues": queues or [], "total": sum(q.max_offset - q.min_offset for q in queues or []),
        "groups": groups or [], "sent": sent, "send_form": send_form or {"tags": "", "keys": "", "body": ""},
    }, problems=problems, status=status)


async def detail(request: Request) -> Response:
    return await _render_detail(request, request.path_params["topic"])


async def send(request: Request) -> Response:
    """mqadmin sendMessage from the page: the result (ids, queue, offset) is shown on the topic."""
    ctx = context_of(request)
    topic = request.path_params["topic"]
    form = await form_data(request)
    tags, keys, body = form.get("tags", "").strip(), form.get("keys", "").strip(), form.get("body", "")
    problems: list[Problem] = []
    result = await attempt(problems, "send", ctx.admin.send_message(topic, body.encode(), keys=keys or None,
                                                                    tags=tags or None))
    sent = None
    if result is not None:
        mq = result.message_queue
        sent = {"status": result.status.name, "msg_id": result.msg_id, "offset_msg_id": result.offset_msg_id,
                "broker": mq.broker_name, "queue_id": mq.queue_id, "queue_offset": result.queue_offset}
    return await _render_detail(request, topic, sent=sent, send_form={"tags": tags, "keys": keys, "body": body},
                                problems=problems, status=problems[0].status if problems else 200)


async def delete(request: Request) -> Response:
    """mqadmin deleteTopic on every cluster that serves the topic (215 per master, 216 per
    NameServer)."""
    ctx = context_of(request)
    topic = request.path_params["topic"]
    clusters = await ctx.admin.topic_clusters(topic)
    brokers = [addr for cluster in clusters for addr in await ctx.admin.delete_topic(topic, cluster)]
    ctx.invalidate("topics:")
    return redirect("/topics", f"Topic {topic} deleted from {', '.join(brokers)} and the NameServer.")


async def api_status(request: Request) -> Response:
    rows = await queue_status(context_of(request), request.path_params["topic"])
    return json_response({"queues": [r.to_json() for r in rows]})


routes: list[BaseRoute] = [
    Route("/topics", index, name="topics"),
    # "+" is not a topic name character: no topic's page can be shadowed by the form.
    Route("/topics/+new", new_form, name="topic_new"),
    Route("/topics/+new", create, methods=["POST"], name="topic_create"),
    Route("/topics/{topic}", detail, name="topic"),
    Route("/topics/{topic}/edit", edit_form, name="topic_edit"),
    Route("/topics/{topic}/edit", update, methods=["POST"], name="topic_update"),
    Route("/topics/{topic}/send", send, methods=["POST"], name="topic_send"),
    Route("/topics/{topic}/delete", delete, methods=["POST"], name="topic_delete"),
    Route("/api/topics", api_topics, name="api_topics"),
    Route("/api/topics/{topic}/status", api_status, name="api_topic_status"),
]
