"""Broker statistics as RocketMQ 4.9 keeps them (BrokerStatsManager + StoreStatsService).

Two families, fed by the send and pull processors with one cheap call per request:

* named items (``StatsItem``): ``TOPIC_PUT_NUMS``/``TOPIC_PUT_SIZE`` keyed by topic,
  ``GROUP_GET_NUMS``/``GROUP_GET_SIZE``/``SNDBCK_PUT_NUMS`` keyed by ``topic@group``,
  ``BROKER_PUT_NUMS``/``BROKER_GET_NUMS`` keyed by the cluster name.  Each keeps a running
  value and call count, sampled every 10 s (minute window, 7 samples), every 10 min (hour
  window, 7) and every hour (day window, 25), as RocketMQ's StatsItem does; VIEW_BROKER_STATS_DATA
  (315) answers sum, tps and avgpt over each window.
* store counters for GET_BROKER_RUNTIME_INFO: put/get-found/get-miss/transferred totals
  sampled every second (601 samples) for ``putTps`` etc. as "tps10 tps60 tps600", and the
  put latency distribution (``putMessageDistributeTime`` and the buckets behind
  ``putLatency99``/``putLatency999``), rotated every minute.

Pure: the owner calls ``tick(now_ms)`` about once a second; nothing here reads a clock.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

from apogee.common.stats_item import WINDOWS, StatsItem

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"

TPS_SAMPLES = 601  # one a second: enough for the 600 s figure
TPS_SECONDS = (10, 60, 600)
# The runtime-info TPS keys and the fields of a TPS sample (time, put, found, miss, transferred) each adds.
TPS_FIELDS = {"putTps": (1,), "getFoundTps": (2,), "getMissTps": (3,), "getTotalTps": (2, 3), "getTransferedTps": (4,)}
# StoreStatsService's coarse distribution: upper bounds (ms, exclusive) of slots 1..11.
DISTRIBUTE_DESC = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
    "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)
_DISTRIBUTE_BOUNDS = (10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def _fine_bounds() -> tuple[int, ...]:
    """StoreStatsService's percentile buckets: steps of 1 ms x20, 2 x15, 5 x10, 10 x10,
    50 x6, 100 x5, 1000 x9 (inclusive upper bounds), then everything above."""
    out: list[int] = []
    edge = 0
    for step, times in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(times):
            edge += step
            out.append(edge)
    return tuple(out)


FINE_BOUNDS = _fine_bounds()


def java_double(value: float) -> str:
    """A double as Java's ``String.valueOf`` prints it for the magnitudes TPS figures take."""
    text = repr(float(value))
    return text if "e" not in text else text.replace("e+", "E").replace("e", "E")


class BrokerStats:
    """Every counter of one broker.  Hot-path methods (``put``, ``got``, ``sent_back``) do a
    dict lookup and a few additions; everything else runs on ``tick`` or on a read."""

    def __init__(self, cluster_name: str, boot_ms: int) -> None:
        self.cluster_name = cluster_name
        self.boot_ms = boot_ms
        self.items: dict[str, dict[str, StatsItem]] = {
            name: {} for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS)
        }
        self._broker_put = StatsItem()
        self._broker_get = StatsItem()
        self.items[BROKER_PUT_NUMS] = {cluster_name: self._broker_put}
        self.items[BROKER_GET_NUMS] = {cluster_name: self._broker_get}
        self._topic_put: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._group_get: dict[tuple[str, str], tuple[StatsItem, StatsItem]] = {}
        # Store-level counters (StoreStatsService).
        self.put_times = 0  # messages stored
        self.put_size = 0
        self.put_failed = 0
        self.put_time_max = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transferred = 0
        self._tps: deque[tuple[int, int, int, int, int]] = deque(maxlen=TPS_SAMPLES)
        self._distribute = [0] * len(DISTRIBUTE_DESC)
        self._last_distribute = [0] * len(DISTRIBUTE_DESC)
        self._fine = [0] * (len(FINE_BOUNDS) + 1)
        self._last_fine = [0] * (len(FINE_BOUNDS) + 1)
        self._next = {"second": 0, "minute": 0, "hour": 0, "day": 0, "rotate": 0}
        self.today_morning_put = 0
        self.today_morning_get = 0
        self.yesterday_morning_put = 0
        self.yesterday_morning_get = 0
        self._day: int | None = None

    # --- hot path -----------------------------------------------------------------------------

    def put(self, topic: str, nums: int, size: int, elapsed_ms: int) -> None:
        """``nums`` messages of ``size`` bytes stored in ``topic`` by one request in ``elapsed_ms``."""
        pair = self._topic_put.get(topic)
        if pair is None:
            pair = self._new_topic(topic)
        pair[0].value += nums
        pair[0].times += 1
        pair[1].value += size
        pair[1].times += 1
        broker = self._broker_put
        broker.value += nums
        broker.times += 1
        self.put_times += nums
        self.put_size += size
        if elapsed_ms <= 0:
            self._distribute[0] += 1
            self._fine[0] += 1
        else:
            self._record_latency(elapsed_ms)

    def put_failed_once(self) -> None:
        self.put_failed += 1

    def got(self, group: str, topic: str, nums: int, size: int) -> None:
        """A pull of ``group`` on ``topic`` that found ``nums`` messages (0: found nothing)."""
        if nums <= 0:
            self.get_miss += 1
            return
        self.get_found += 1
        self.get_transferred += nums
        pair = self._group_get.get((group, topic))
        if pair is None:
            pair = self._new_group(group, topic)
        pair[0].value += nums
        pair[0].times += 1
        pair[1].value += size
        pair[1].times += 1
        broker = self._broker_get
        broker.value += nums
        broker.times += 1

    def sent_back(self, group: str, topic: str) -> None:
        """One message handed back by ``group`` (CONSUMER_SEND_MSG_BACK) of ``topic``."""
        item = self._item(SNDBCK_PUT_NUMS, f"{topic}@{group}")
        item.value += 1
        item.times += 1

    def _record_latency(self, ms: int) -> None:
        self.put_time_max = max(self.put_time_max, ms)
        self._distribute[1 + bisect_left(_DISTRIBUTE_BOUNDS, ms + 1)] += 1
        self._fine[bisect_left(FINE_BOUNDS, ms)] += 1

    def _item(self, name: str, key: str) -> StatsItem:
        table = self.items[name]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem()
        return item

    def _new_topic(self, topic: str) -> tuple[StatsItem, StatsItem]:
        pair = (self._item(TOPIC_PUT_NUMS, topic), self._item(TOPIC_PUT_SIZE, topic))
        self._topic_put[topic] = pair
        return pair

    def _new_group(self, group: str, topic: str) -> tuple[StatsItem, StatsItem]:
        key = f"{topic}@{group}"
        pair = (self._item(GROUP_GET_NUMS, key), self._item(GROUP_GET_SIZE, key))
        self._group_get[(group, topic)] = pair
        return pair

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's items (and its groups'), so the tables stay bounded."""
        self._topic_put.pop(topic, None)
        self.items[TOPIC_PUT_NUMS].pop(topic, None)
        self.items[TOPIC_PUT_SIZE].pop(topic, None)
        for group, t in [k for k in self._group_get if k[1] == topic]:
            del self._group_get[(group, t)]
        prefix = f"{topic}@"
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            for key in [k for k in self.items[name] if k.startswith(prefix)]:
                del self.items[name][key]

    # --- sampling -----------------------------------------------------------------------------

    def tick(self, now_ms: int, day: int) -> None:
        """Take the samples that are due.  ``day`` is the local calendar day number: when it
        changes, today's totals so far become "this morning's" (RocketMQ's BrokerStats)."""
        due = self._next
        if self._day != day:
            if self._day is not None:
                self.yesterday_morning_put, self.yesterday_morning_get = self.today_morning_put, self.today_morning_get
            self.today_morning_put, self.today_morning_get = self.put_times, self._broker_get.value
            self._day = day
        if now_ms >= due["second"]:
            due["second"] = now_ms + 1000
            self._tps.append((now_ms, self.put_times, self.get_found, self.get_miss, self.get_transferred))
        if now_ms >= due["rotate"]:
            due["rotate"] = now_ms + 60_000
            self._last_distribute, self._distribute = self._distribute, [0] * len(DISTRIBUTE_DESC)
            self._last_fine, self._fine = self._fine, [0] * (len(FINE_BOUNDS) + 1)
        for window, name in enumerate(("minute", "hour", "day")):
            if now_ms >= due[name]:
                due[name] = now_ms + WINDOWS[window][0]
                for table in self.items.values():
                    for item in table.values():
                        item.sample(window, now_ms)

    # --- reading ------------------------------------------------------------------------------

    def find(self, name: str, key: str) -> StatsItem | None:
        table = self.items.get(name)
        return None if table is None else table.get(key)

    def tps(self, key: str, seconds: int) -> float | None:
        """StoreStatsService's figure ``key`` (``putTps`` ...) over the last ``seconds`` samples;
        None until that many seconds have been sampled."""
        samples = self._tps
        if len(samples) <= seconds:
            return None
        first, last = samples[-(seconds + 1)], samples[-1]
        span = last[0] - first[0]
        if span <= 0:
            return 0.0
        return sum(last[f] - first[f] for f in TPS_FIELDS[key]) * 1000.0 / span

    def _tps3(self, key: str) -> str:
        """"tps10 tps60 tps600" as Java writes it: a figure not sampled yet is "" (a sum: "0.0")."""
        figures = (self.tps(key, s) for s in TPS_SECONDS)
        empty = "" if len(TPS_FIELDS[key]) == 1 else "0.0"
        return " ".join(empty if f is None else java_double(f) for f in figures)

    @property
    def get_total(self) -> int:
        """Messages handed to consumers since boot (BROKER_GET_NUMS)."""
        return self._broker_get.value

    def last_minute_distribution(self) -> list[int]:
        """Last minute's put latency counts, one per ``DISTRIBUTE_DESC`` slot."""
        return list(self._last_distribute)

    def topic_puts(self) -> list[tuple[str, StatsItem, StatsItem]]:
        """(topic, TOPIC_PUT_NUMS item, TOPIC_PUT_SIZE item) of every topic put to."""
        return [(topic, nums, size) for topic, (nums, size) in self._topic_put.items()]

    def group_gets(self) -> list[tuple[str, str, StatsItem, StatsItem]]:
        """(group, topic, GROUP_GET_NUMS item, GROUP_GET_SIZE item) of every group that got messages."""
        return [(group, topic, nums, size) for (group, topic), (nums, size) in self._group_get.items()]

    def percentile(self, px: float) -> float:
        """StoreStatsService.findPutMessageEntireTimePX over last minute's buckets."""
        buckets = self._last_fine
        index = int(sum(buckets) * px)
        passed = 0
        bounds = (*FINE_BOUNDS, FINE_BOUNDS[-1])
        for i, count in enumerate(buckets):
            if index <= passed + count:
                relative = index - passed
                if i == 0:
                    return 0.0 if count == 0 else bounds[0] * relative / count
                low = bounds[i - 1]
                return low + (0.0 if count == 0 else (bounds[i] - low) * relative / count)
            passed += count
        return 0.0

    def runtime_info(self, now_ms: int) -> dict[str, str]:
        """The keys of RocketMQ's StoreStatsService.getRuntimeInfo and BrokerStats, as Java
        formats them."""
        times = self.put_times or 1
        span = now_ms - self.boot_ms
        days, rest = divmod(span // 1000, 86400)
        dist = self._last_distribute
        return {
            "bootTimestamp": str(self.boot_ms),
            "runtime": f"[ {days} days, {rest // 3600} hours, {rest % 3600 // 60} minutes, {rest % 60} seconds ]",
            "putMessageEntireTimeMax": str(self.put_time_max),
            "putMessageTimesTotal": str(times),
            "putMessageFailedTimes": str(self.put_failed),
            "putMessageSizeTotal": str(self.put_size),
            "putMessageDistributeTime": "".join(f"{desc}:{n} " for desc, n in zip(DISTRIBUTE_DESC, dist, strict=True)),
            "putMessageAverageSize": java_double(self.put_size / times),
            "putTps": self._tps3("putTps"),
            "getFoundTps": self._tps3("getFoundTps"),
            "getMissTps": self._tps3("getMissTps"),
            "getTotalTps": self._tps3("getTotalTps"),
            "getTransferedTps": self._tps3("getTransferedTps"),
            "putLatency99": f"{self.percentile(0.99):.2f}",
            "putLatency999": f"{self.percentile(0.999):.2f}",
            "msgPutTotalYesterdayMorning": str(self.yesterday_morning_put),
            "msgPutTotalTodayMorning": str(self.today_morning_put),
            "msgPutTotalTodayNow": str(self.put_times),
            "msgGetTotalYesterdayMorning": str(self.yesterday_morning_get),
            "msgGetTotalTodayMorning": str(self.today_morning_get),
            "msgGetTotalTodayNow": str(self._broker_get.value),
        }


class NullBrokerStats(BrokerStats):
    """Counts nothing: the broker's statistics with ``brokerStatsEnable=false``.

    RocketMQ has no such switch; Apogee has it to measure what the statistics cost (the send
    benchmark with them on and off).  The per-request calls still happen and return at once,
    so what "off" saves is the counting itself, not the call or the two clock reads around a
    put.  Every reader (runtime info, VIEW_BROKER_STATS_DATA, /metrics) sees zeros."""

    def put(self, topic: str, nums: int, size: int, elapsed_ms: int) -> None:
        return None

    def put_failed_once(self) -> None:
        return None

    def got(self, group: str, topic: str, nums: int, size: int) -> None:
        return None

    def sent_back(self, group: str, topic: str) -> None:
        return None
