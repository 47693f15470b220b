"""The dashboard's background sampler: what the brokers say every few seconds, kept for an hour.

Every ``interval_s`` (5 s by default; ``--sample-interval``) one tick asks:

* the NameServer for the cluster (106);
* every broker address, slaves too, for its runtime info (28): the cumulative put and get
  counts (``msgPutTotalTodayNow``, ``msgGetTotalTodayNow``), whose change since the last tick is
  the broker's put and get TPS over exactly that interval;
* every master for its subscription groups (201) and for every group's progress on every
  topic in one answer (GET_BROKER_CONSUME_STATS, 317: offsets, last consume time, and the
  group's TPS on the topic, the broker's GROUP_GET_NUMS one-minute figure): each group's lag
  and TPS, and each topic's get TPS (the sum over its groups);
* each group's live consumers (203, 16 at a time), for the online client count;
* for the charted topics only, their route (105) and queue offsets (GET_TOPIC_STATS_INFO,
  202, on each broker of the topic): the change of the max offsets since the last tick is the
  topic's put TPS over that interval.  Charted are the topics a chart asked for in the last
  ``watch_s`` seconds and the ``top_topics`` busiest by get TPS: asking for every topic would
  cost requests per topic and broker each tick.

So a tick costs 1 + B + 2 M + G + T x (1 + M) requests at most (B broker addresses, M
masters, G groups, T charted topics), whatever the number of topics.  The group list page renders the last
``GroupsSnapshot`` (no request while the page is built), and the charts read the
``Timeline``\\ s (``series.py``): put/get TPS per broker and per charted topic, lag per group.
A failed request leaves a gap in its series and a line in ``errors``; the next tick tries
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from apogee.admin import AdminClient
from apogee.admin.brokers import _int
from apogee.admin.errors import GroupNotFoundError
from apogee.common import constants as c
from apogee.dashboard.lag import GroupRow, top_topics
from apogee.dashboard.series import RateMeter, Timeline, Value, capacity_for
from apogee.errors import ApogeeError
from apogee.remoting.bodies.admin import ConsumeStats

log = logging.getLogger("apogee.dashboard.sampler")

T = TypeVar("T")

BROKER_PUT, BROKER_GET = "broker_put", "broker_get"
TOPIC_PUT, TOPIC_GET = "topic_put", "topic_get"
GROUP_LAG = "group_lag"
TIMELINES = (BROKER_PUT, BROKER_GET, TOPIC_PUT, TOPIC_GET, GROUP_LAG)


@dataclass(frozen=True)
class SamplerSettings:
    interval_s: float = 5.0  # seconds between ticks
    history_s: float = 3600.0  # how far back the charts reach
    top_topics: int = 5  # busiest topics charted besides those asked for
    watch_s: float = 600.0  # how long a topic a chart asked for stays sampled
    concurrency: int = 16  # requests in flight at once within a tick
    max_series: int = 500  # lines kept per chart


@dataclass
class GroupsSnapshot:
    """The consumer groups as of one tick (the group list renders this)."""

    taken_at: float  # seconds since the epoch
    rows: dict[str, GroupRow]
    errors: list[str] = field(default_factory=list)


def broker_label(name: str, broker_id: int) -> str:
    """A broker address's series name: the broker name for the master, ``name/id`` for a slave."""
    return name if broker_id == c.MASTER_ID else f"{name}/{broker_id}"


class Sampler:
    def __init__(self, settings: SamplerSettings | None = None, clock: Callable[[], float] = time.time) -> None:
        self._admin: AdminClient | None = None
        self.settings = settings or SamplerSettings()
        self._clock = clock
        capacity = capacity_for(self.settings.history_s, self.settings.interval_s)
        self.timelines = {name: Timeline(capacity, max_series=self.settings.max_series) for name in TIMELINES}
        self.groups: GroupsSnapshot | None = None
        self.errors: list[str] = []  # the last tick's failures
        self.ticks = 0
        self.tick_seconds = 0.0  # how long the last tick took (its requests, all told)
        self._rates = {BROKER_PUT: RateMeter(), BROKER_GET: RateMeter(), TOPIC_PUT: RateMeter()}
        self._watched: dict[str, float] = {}  # topic -> when a chart last asked for it
        self._poke = asyncio.Event()
        self._ticked = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def admin(self) -> AdminClient:
        assert self._admin is not None, "the sampler is not started"
        return self._admin

    def start(self, admin: AdminClient) -> None:
        """Sample through ``admin`` from now on, every ``interval_s``."""
        self._admin = admin
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="dashboard-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def poke(self) -> None:
        """Sample now rather than at the next interval (after an operation changed offsets)."""
        self._poke.set()

    def watch(self, topics: Iterable[str]) -> None:
        """Chart these topics' TPS from the next tick on (for ``watch_s`` seconds)."""
        now = self._clock()
        for topic in topics:
            self._watched[topic] = now

    async def wait_ticks(self, count: int = 1, timeout_s: float | None = None) -> None:
        """Until ``count`` more ticks have completed."""
        target = self.ticks + count
        async with self._ticked:
            await asyncio.wait_for(self._ticked.wait_for(lambda: self.ticks >= target), timeout_s)

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a tick must never end the loop; the page shows why
                if [str(exc)] != self.errors:  # once per cause, not every interval
                    log.warning("dashboard sample failed: %s", exc, exc_info=not isinstance(exc, ApogeeError))
                self.errors = [str(exc)]
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), self.settings.interval_s)

    # --- one tick -----------------------------------------------------------------------------

    async def tick(self) -> None:
        """Sample everything once and record it at this time."""
        last = self.timelines[BROKER_PUT].last_time
        now = max(self._clock(), last + 0.001 if last is not None else 0.0)  # the wall clock may step back
        began = time.perf_counter()
        ask = _Asker(self.settings.concurrency)
        view = await self.admin.cluster_info()
        addrs = {broker_label(name, bid): addr
                 for name, data in view.brokers.items() for bid, addr in data.broker_addrs.items()}
        masters = view.masters()

        infos = await asyncio.gather(*(ask(f"runtime info of {a}", self.admin.broker_runtime_info(a))
                                       for a in addrs.values()))
        put: dict[str, Value] = {}
        get: dict[str, Value] = {}
        for label, info in zip(addrs, infos, strict=True):
            if info is not None:
                put[label] = self._rates[BROKER_PUT].rate(label, now, _int(info.get("msgPutTotalTodayNow")))
                get[label] = self._rates[BROKER_GET].rate(label, now, _int(info.get("msgGetTotalTodayNow")))
        for meter in (self._rates[BROKER_PUT], self._rates[BROKER_GET]):
            meter.keep_only(addrs)

        names = sorted(masters)
        configs = await asyncio.gather(*(ask(f"groups of {n}", self.admin.groups_on(masters[n])) for n in names))
        stats = await asyncio.gather(*(ask(f"consume stats of {n}", self.admin.broker_group_stats(masters[n]))
                                       for n in names))
        rows = self._group_rows(names, configs, [s[0] if s is not None else None for s in stats])
        await self._count_clients(rows, masters, ask)

        topic_get: dict[str, float] = defaultdict(float)
        for part in stats:
            for _group, group_stats in part[0] if part is not None else []:
                for topic in {q.topic for q in group_stats.offset_table}:
                    topic_get[topic] += group_stats.consume_tps
        charted = top_topics(topic_get, self.settings.top_topics, self._watched_topics(now))
        topic_put = await self._topic_put_tps(charted, now, ask)

        self.timelines[BROKER_PUT].record(now, put)
        self.timelines[BROKER_GET].record(now, get)
        self.timelines[TOPIC_PUT].record(now, topic_put)
        self.timelines[TOPIC_GET].record(now, {t: topic_get.get(t, 0.0) for t in charted})
        self.timelines[GROUP_LAG].record(now, {g: float(r.lag) for g, r in rows.items()})
        self.groups = GroupsSnapshot(now, rows, ask.errors)
        self.errors = ask.errors
        self.tick_seconds = time.perf_counter() - began
        async with self._ticked:
            self.ticks += 1
            self._ticked.notify_all()

    @staticmethod
    def _group_rows(names: list[str], configs: list[dict[str, dict[str, Any]] | None],
                    stats: list[list[tuple[str, ConsumeStats]] | None]) -> dict[str, GroupRow]:
        rows: dict[str, GroupRow] = {}
        for name, table in zip(names, configs, strict=True):
            for group, config in (table or {}).items():
                row = rows.setdefault(group, GroupRow(group))
                row.brokers.append(name)
                retry = config.get("retryMaxTimes")
                if isinstance(retry, int):
                    row.retry_max_times = retry
        for name, pairs in zip(names, stats, strict=True):
            for group, group_stats in pairs or []:
                row = rows.setdefault(group, GroupRow(group))
                if name not in row.brokers:
                    row.brokers.append(name)
                row.tps += group_stats.consume_tps
                for queue, w in group_stats.offset_table.items():
                    row.add_queue(queue.topic, w.broker_offset, w.consumer_offset)
        return dict(sorted(rows.items()))

    async def _count_clients(self, rows: dict[str, GroupRow], masters: dict[str, str],
                             ask: _Asker) -> None:
        """Each group's online consumers, asked of a broker that holds the group (203)."""

        async def one(row: GroupRow) -> None:
            addr = masters.get(row.brokers[0]) if row.brokers else None
            if addr is None:
                return
            try:
                conns = await self.admin.consumer_connection(row.group, addr)
            except GroupNotFoundError:  # CONSUMER_NOT_ONLINE: none
                row.clients = 0
                return
            row.clients = len(conns.clients)
            row.consume_type, row.message_model = conns.consume_type, conns.message_model
            row.version = str(conns.clients[0].get("version", "")) if conns.clients else ""

        await asyncio.gather(*(ask(f"consumers of {r.group}", one(r)) for r in rows.values()))

    def _watched_topics(self, now: float) -> list[str]:
        expired = [t for t, at in self._watched.items() if now - at > self.settings.watch_s]
        for topic in expired:
            del self._watched[topic]
        return sorted(self._watched)

    async def _topic_put_tps(self, topics: list[str], now: float, ask: _Asker) -> dict[str, Value]:
        """Each topic's put TPS since the last tick: the change of its queues' max offsets on
        each broker (202), summed over the brokers.  A broker that did not answer, or whose
        offsets went back (the topic was made again), adds nothing this tick."""
        stats = await asyncio.gather(*(ask(f"offsets of {t}", self.admin.topic_stats(t)) for t in topics))
        out: dict[str, Value] = {}
        seen: list[str] = []
        for topic, table in zip(topics, stats, strict=True):
            if table is None:
                continue
            per_broker: dict[str, int] = defaultdict(int)
            for queue, offsets in table.items():
                per_broker[queue.broker_name] += offsets.max_offset
            rates = [self._rates[TOPIC_PUT].rate(f"{topic}@{b}", now, n) for b, n in per_broker.items()]
            seen.extend(f"{topic}@{b}" for b in per_broker)
            known = [r for r in rates if r is not None]
            out[topic] = sum(known) if known else None
        self._rates[TOPIC_PUT].keep_only(seen)
        return out


class _Asker:
    """Runs one tick's requests, ``concurrency`` at a time; a failure becomes None and a line
    in ``errors`` (the page shows it) instead of ending the tick."""

    def __init__(self, concurrency: int) -> None:
        self._limit = asyncio.Semaphore(concurrency)
        self.errors: list[str] = []

    async def __call__(self, what: str, call: Awaitable[T]) -> T | None:
        async with self._limit:
            try:
                return await call
            except ApogeeError as exc:
                self.errors.append(f"{what}: {exc}")
                return None
