"""``/metrics`` for Prometheus, served by ``prometheus_client`` beside a server's event loop.

Why this shape.  A server's state (topics, offsets, statistics, the store) belongs to its
event loop and must not be read from another thread while the loop changes it; and a scrape
must not stall the loop for the time it takes to format thousands of samples.  So:

* prometheus_client's own HTTP server (``start_http_server``: wsgiref in a daemon thread, one
  thread per request) answers the scrape, no HTTP code of ours;
* its collector (``LoopCollector``) asks the loop for a snapshot: plain ``(name, label
  values, value)`` tuples read on the loop in a few steps (one callback each), so nothing is
  read while the loop changes it and the loop is busy only for the reading;
* the thread turns the rows into metric families (``families``) and formats the text.

Each server declares its metrics once, as ``MetricSpec``s (type, help, label names): the docs
and the Grafana dashboard's test check against that table.  Rows for a name not declared are a
bug and raise.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from apogee.common.histogram import Histogram
from apogee.remoting.config import parse_listen

log = logging.getLogger("apogee.metrics")

SCRAPE_TIMEOUT_S = 10.0  # how long a scrape waits for the loop's snapshot


@dataclass(frozen=True)
class MetricSpec:
    kind: Literal["gauge", "counter", "histogram"]
    help: str
    labels: tuple[str, ...]


Value = float | int | list[tuple[float, int]]
"""A gauge or counter value, or a histogram's ``(le, cumulative count)`` list."""
Row = tuple[str, Sequence[str], Value] | tuple[str, Sequence[str], Value, float]
"""``(name, label values, value)``; a histogram row adds its sum."""


def histogram_row(name: str, labels: Sequence[str], histogram: Histogram) -> Row:
    """A histogram copied as it is now (on the loop), for ``families`` to emit later."""
    return name, labels, histogram.cumulative(), histogram.sum * histogram.unit


def families(specs: Mapping[str, MetricSpec], rows: Iterable[Row]) -> list[Metric]:
    """Every declared metric as a family (empty ones too: a dashboard sees the name), filled
    with ``rows``.  Counter names end in ``_total`` in the specs; prometheus_client's counter
    family takes the name without it and adds it back."""
    out: dict[str, Metric] = {}
    for name, spec in specs.items():
        labels = list(spec.labels)
        if spec.kind == "counter":
            out[name] = CounterMetricFamily(name.removesuffix("_total"), spec.help, labels=labels)
        elif spec.kind == "histogram":
            out[name] = HistogramMetricFamily(name, spec.help, labels=labels)
        else:
            out[name] = GaugeMetricFamily(name, spec.help, labels=labels)
    for row in rows:
        family = out[row[0]]
        if isinstance(family, HistogramMetricFamily):
            buckets = row[2]
            assert isinstance(buckets, list) and len(row) == 4
            family.add_metric(list(row[1]), [(_le(le), n) for le, n in buckets], row[3])
        else:
            value = row[2]
            assert not isinstance(value, list)
            family.add_metric(list(row[1]), value)  # type: ignore[attr-defined]
    return list(out.values())


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def remoting_rows(prefix: Sequence[str], connections: int, counters: object) -> list[Row]:
    """The remoting server's open connections and what its limits refused or closed
    (``remoting.limits.LimitCounters``), labelled with ``prefix``."""
    rows: list[Row] = [("apogee_remoting_connections", prefix, connections)]
    for field in counters.__slots__:  # type: ignore[attr-defined]
        rows.append((f"apogee_remoting_{field}_total", prefix, getattr(counters, field)))
    return rows


def remoting_specs(labels: tuple[str, ...]) -> dict[str, MetricSpec]:
    """Specs of ``remoting_rows``."""
    def counter(what: str) -> MetricSpec:
        return MetricSpec("counter", what, labels)

    return {
        "apogee_remoting_connections": MetricSpec("gauge", "Open client connections.", labels),
        "apogee_remoting_connections_refused_total": counter("Connections closed at once: serverMaxConnections."),
        "apogee_remoting_idle_closed_total": counter("Connections closed after serverChannelMaxIdleTimeSeconds."),
        "apogee_remoting_frames_timed_out_total": counter("Connections closed: a frame incomplete past its deadline."),
        "apogee_remoting_frames_dropped_for_memory_total": counter(
            "Connections closed to keep serverMaxIncompleteFrameBytes."),
        "apogee_remoting_protocol_errors_total": counter("Connections closed on a malformed or oversized frame."),
        "apogee_remoting_write_pauses_total": counter("Times a connection stopped being read: its peer did not read."),
        "apogee_remoting_tls_refused_total": counter("Plain-text connections closed: tls.server.mode=enforcing."),
        "apogee_remoting_tls_handshake_failures_total": counter("TLS handshakes failed or not done in time."),
    }


SNAPSHOT_METRIC = "apogee_metrics_snapshot_seconds"
STEP_METRIC = "apogee_metrics_snapshot_max_step_seconds"
SCRAPE_SPECS = {
    SNAPSHOT_METRIC: MetricSpec("gauge", "Event-loop time this scrape's snapshot took, all steps.", ()),
    STEP_METRIC: MetricSpec("gauge", "The longest the snapshot held the event loop at once (one step).", ()),
}

Parts = Callable[[], Iterator[list[Row]]]
"""A snapshot in steps: each ``next`` reads one part of the state into rows."""


class LoopCollector(Collector):
    """A prometheus_client collector whose samples are read on ``loop`` (see the module doc).

    The snapshot is taken in steps (``parts``), one loop callback each, so a broker with
    thousands of topics and groups answers the sends queued meanwhile between two steps rather
    than after the whole snapshot; each step's rows are consistent with each other.  Each
    scrape reports the loop time its snapshot took and its longest step."""

    def __init__(self, loop: asyncio.AbstractEventLoop, specs: Mapping[str, MetricSpec], parts: Parts) -> None:
        self._loop = loop
        self._specs = {**specs, **SCRAPE_SPECS}
        self._parts = parts

    def snapshot(self) -> list[Row]:
        """The rows, read on the loop one step per callback (called from any other thread)."""
        done: concurrent.futures.Future[list[Row]] = concurrent.futures.Future()
        rows: list[Row] = []
        spent = [0.0, 0.0]  # total, longest step
        steps: list[Iterator[list[Row]]] = []

        def step() -> None:
            t0 = time.perf_counter()
            try:
                if not steps:
                    steps.append(self._parts())
                rows.extend(next(steps[0]))
            except StopIteration:
                rows.append((SNAPSHOT_METRIC, (), spent[0]))
                rows.append((STEP_METRIC, (), spent[1]))
                done.set_result(rows)
                return
            except BaseException as exc:  # the scrape fails with it; the loop goes on
                done.set_exception(exc)
                return
            took = time.perf_counter() - t0
            spent[0] += took
            spent[1] = max(spent[1], took)
            self._loop.call_soon(step)

        self._loop.call_soon_threadsafe(step)
        return done.result(SCRAPE_TIMEOUT_S)

    def collect(self) -> Iterable[Metric]:
        return families(self._specs, self.snapshot())


def metrics_address(value: str, listen_host: str) -> tuple[str, int] | None:
    """``metricsListen`` -> (host, port), or None when empty.  ``HOST:PORT``; ``:PORT`` or a
    bare ``PORT`` serve on ``listen_host``."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        value = f":{value}"
    if ":" not in value:
        raise ValueError(f"metricsListen {value!r}: expected HOST:PORT, :PORT or PORT")
    host, port = parse_listen(value, 0)
    return (listen_host if value.startswith(":") else host), port


class MetricsServer:
    """``/metrics`` on its own port; ``start`` on the loop whose state ``rows`` reads."""

    def __init__(self, specs: Mapping[str, MetricSpec], parts: Parts) -> None:
        self._specs = specs
        self._parts = parts
        self._httpd: object | None = None
        self.address: tuple[str, int] | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(LoopCollector(asyncio.get_running_loop(), self._specs, self._parts))
        # The process' CPU, memory, file descriptors, GC: what any Python exporter shows.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        try:
            httpd, _thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:  # say which port: the server's own may be fine
            raise OSError(exc.errno, f"metrics on {host}:{port}: {exc.strerror or exc}") from exc
        self._httpd = httpd
        self.address = (host, httpd.server_port)
        log.info("serving Prometheus metrics on http://%s:%d/metrics", host, httpd.server_port)
        return self.address

    @property
    def url(self) -> str:
        assert self.address is not None
        host, port = self.address
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/metrics"

    async def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            # shutdown() waits for serve_forever's poll (up to 0.5 s): off the loop, which
            # stays free to answer a scrape that is in flight meanwhile.
            await asyncio.to_thread(httpd.shutdown)  # type: ignore[attr-defined]
            httpd.server_close()  # type: ignore[attr-defined]
