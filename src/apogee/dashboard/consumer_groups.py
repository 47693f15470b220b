"""What the consumer group pages show and do, over ``AdminClient`` (no request of its own).

* ``queue_lags``: the group's progress on every queue (208) with each queue's newest store
  time (202 per topic), so the lag reads in messages and in time, and (given the clients'
  running info) which client owns each queue now;
* ``clients``: the group's live consumers (203) and, asked of each through the broker (307),
  its subscriptions, owned queues, consume figures and settings;
* ``reset``: reset offset by time or skip the backlog (222 on every broker of each topic), as a
  job whose progress the page shows;
* ``save_group`` / ``delete_group``: the subscription group's config on the masters chosen
  (200 / 207).

A failure of one part (a client that does not answer 307) is noted with the part it concerns,
so the rest of the page still shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apogee.admin import AdminClient
from apogee.admin.errors import GroupNotFoundError, TopicNotFoundError
from apogee.admin.groups import GROUP_DEFAULTS, Connections
from apogee.common import constants as c
from apogee.common.validators import validate_group
from apogee.dashboard.errors import BadInput, Problem, describe
from apogee.dashboard.jobs import Job
from apogee.dashboard.lag import QueueLag, queue_lags
from apogee.errors import ApogeeError
from apogee.remoting.bodies.consumer_info import ConsumerRunningInfo

QueueId = tuple[str, str, int]  # topic, broker name, queue id

# The subscription group settings the form edits: RocketMQ's field name -> (label, kind).
GROUP_FIELDS: dict[str, tuple[str, str]] = {
    "consumeEnable": ("Consume enabled", "bool"),
    "consumeBroadcastEnable": ("Broadcast consumption allowed", "bool"),
    "consumeFromMinEnable": ("Consume from the minimum offset", "bool"),
    "notifyConsumerIdsChangedEnable": ("Notify consumers when the group changes", "bool"),
    "retryQueueNums": ("Retry queues", "int"),
    "retryMaxTimes": ("Max reconsume times (then the DLQ)", "int"),
    "brokerId": ("Consume from broker id", "int"),
    "whichBrokerWhenConsumeSlowly": ("Broker id when consuming slowly", "int"),
}


@dataclass
class ClientView:
    """One live consumer of the group: its connection (203) and running info (307)."""

    client_id: str
    addr: str
    language: str
    version: str
    info: ConsumerRunningInfo | None = None
    problem: Problem | None = None

    @property
    def queues(self) -> list[QueueId]:
        return sorted((q.topic, q.broker_name, q.queue_id) for q in (self.info.mq_table if self.info else {}))


@dataclass
class GroupDetail:
    group: str
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # master address -> config
    connections: Connections | None = None
    clients: list[ClientView] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def owners(self) -> dict[QueueId, str]:
        return {q: cl.client_id for cl in self.clients for q in cl.queues}


async def queue_lags_of(admin: AdminClient, group: str, owners: Mapping[QueueId, str] | None = None
                        ) -> tuple[list[QueueLag], float]:
    """Every queue the group has progress on, with its lag in messages and time, and the
    group's consume TPS."""
    stats = await admin.consume_stats(group)
    topics = sorted({q.topic for q in stats.offset_table})
    newest: dict[QueueId, int] = {}

    async def topic_newest(topic: str) -> None:
        try:
            table = await admin.topic_stats(topic)
        except (TopicNotFoundError, ApogeeError):
            return  # no newest time: the lag in time shows as unknown
        newest.update({(q.topic, q.broker_name, q.queue_id): o.last_update_timestamp for q, o in table.items()})

    await asyncio.gather(*(topic_newest(t) for t in topics))
    rows = queue_lags(
        ((q.topic, q.broker_name, q.queue_id, w.broker_offset, w.consumer_offset, w.last_timestamp)
         for q, w in stats.offset_table.items()),
        newest, owners,
    )
    return rows, stats.consume_tps


async def group_detail(admin: AdminClient, group: str) -> GroupDetail:
    """The group's configs, live clients and their running info; an unknown group raises
    ``GroupNotFoundError`` (a misspelt name is not an idle group)."""
    detail = GroupDetail(group)
    try:
        detail.configs = await admin.group_config(group)
    except GroupNotFoundError:
        await admin.require_group(group)  # offsets but no config: still a group
    try:
        detail.connections = await admin.consumer_connection(group)
    except GroupNotFoundError:
        return detail  # no live consumer: no clients to ask
    except (TopicNotFoundError, ApogeeError) as exc:
        detail.problems.append(describe(exc, "live consumers"))
        return detail
    views = [ClientView(str(conn.get("clientId", "")), str(conn.get("clientAddr", "")),
                        str(conn.get("language", "")), str(conn.get("version", "")))
             for conn in detail.connections.clients]

    async def running(view: ClientView) -> None:
        try:
            view.info = ConsumerRunningInfo.from_json(await admin.running_info(group, view.client_id))
        except ApogeeError as exc:
            view.problem = describe(exc, f"running info of {view.client_id}")

    await asyncio.gather(*(running(v) for v in views))
    detail.clients = sorted(views, key=lambda v: v.client_id)
    return detail


def group_topics(rows: list[QueueLag], group: str, *, retry: bool = False) -> list[str]:
    """The topics a reset acts on: the group's, its retry topic only when ``retry``."""
    return sorted({r.topic for r in rows if retry or r.topic != c.retry_topic(group)})


async def reset(admin: AdminClient, job: Job, group: str, topics: list[str], timestamp_ms: int) -> dict[str, Any]:
    """Reset ``group`` on each of ``topics`` to the message stored nearest ``timestamp_ms``
    (-1: past the last one, mqadmin skipAccumulatedMessage), on every broker of each topic
    (222); live consumers are told to resume there.  Progress: topics done."""
    if not topics:
        raise BadInput(f"consumer group {group!r} has no offsets on any topic: nothing to reset")
    done: dict[str, int] = {}
    job.tick(0, len(topics))
    for i, topic in enumerate(topics):
        job.note(f"{topic}: resetting on every broker ({i + 1} of {len(topics)})")
        offsets = await admin.reset_offset_by_time(group, topic, timestamp_ms)
        done[topic] = len(offsets)
        job.tick(i + 1, len(topics))
    job.note("reset " + ", ".join(f"{t} ({n} queues)" for t, n in done.items()))
    return {"group": group, "queues": done}


def parse_group_form(form: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The group name and the settings of the create/update form (RocketMQ's field names);
    checkboxes absent from the form are false."""
    group = (form.get("groupName") or "").strip()
    problem = validate_group(group) if group else "the group name is required"
    if problem is not None:
        raise BadInput(problem)
    settings: dict[str, Any] = {}
    for name, (label, kind) in GROUP_FIELDS.items():
        if kind == "bool":
            settings[name] = form.get(name) in ("on", "true", "1")
            continue
        text = (form.get(name) or "").strip()
        try:
            settings[name] = int(text) if text else GROUP_DEFAULTS[name]
        except ValueError:
            raise BadInput(f"{label} ({name}) must be a whole number, not {text!r}") from None
        if settings[name] < 0:
            raise BadInput(f"{label} ({name}) cannot be negative")
    return group, settings


async def save_group(admin: AdminClient, group: str, settings: dict[str, Any], brokers: list[str]) -> list[str]:
    """Create or update the group on the masters named (broker names; none: every master)."""
    masters = await admin.cluster_masters()
    chosen = brokers or sorted(masters)
    unknown = [b for b in chosen if b not in masters]
    if unknown:
        raise BadInput(f"no master broker named {', '.join(unknown)} (masters: {', '.join(sorted(masters))})")
    for name in chosen:
        await admin.update_group(masters[name], group, **settings)
    return chosen


async def delete_group(admin: AdminClient, group: str, remove_offsets: bool) -> list[str]:
    """Delete the group's config (and with ``remove_offsets`` its committed offsets) on every
    master that has it (207)."""
    configs = await admin.group_config(group)
    view = await admin.cluster_info()
    for addr in configs:
        await admin.delete_group(addr, group, remove_offset=remove_offsets)
    return sorted(view.name_of(a) or a for a in configs)
