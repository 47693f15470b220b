"""The pieces of /metrics that need no socket: the histogram, rows to metric families (as
Prometheus' parser reads them back), the snapshot taken on the loop, and metricsListen."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apogee.common.histogram import Histogram, NullHistogram
from apogee.common.metrics_http import LoopCollector, MetricSpec, Row, families, histogram_row, metrics_address

SPECS = {
    "x_total": MetricSpec("counter", "a counter", ("a",)),
    "y": MetricSpec("gauge", "a gauge", ()),
    "z_seconds": MetricSpec("histogram", "a histogram", ("a",)),
    "empty": MetricSpec("gauge", "declared, no rows", ()),
}


def test_histogram_buckets_are_prometheus_le_and_cumulative() -> None:
    h = Histogram((1, 5, 10), unit=0.001)
    for ms in (0, 1, 2, 5, 11, 300):
        h.observe(ms)
    assert h.counts == [2, 2, 0, 2]  # <=1, <=5, <=10, above
    assert h.cumulative() == [(0.001, 2), (0.005, 4), (0.01, 4), (float("inf"), 6)]
    assert h.count == 6 and h.sum == 319
    null = NullHistogram((1, 2))
    null.observe(1)
    assert null.count == 0
    with pytest.raises(ValueError):
        Histogram((2, 1))


def _render(rows: list[Row]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    registry = CollectorRegistry(auto_describe=False)

    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return families(SPECS, rows)

    registry.register(Fixed())  # type: ignore[arg-type]
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_rows_become_families_that_prometheus_parses_back() -> None:
    h = Histogram((0.5, 1.0))
    h.observe(0.2)
    h.observe(0.7)
    text = _render([("x_total", ("p",), 7), ("y", (), 2.5), histogram_row("z_seconds", ("q",), h)])
    assert text["x_total"] == {(("a", "p"),): 7.0}
    assert text["y"] == {(): 2.5}
    assert text["z_seconds_bucket"][(("a", "q"), ("le", "0.5"))] == 1
    assert text["z_seconds_bucket"][(("a", "q"), ("le", "+Inf"))] == 2
    assert text["z_seconds_count"] == {(("a", "q"),): 2.0}
    assert text["z_seconds_sum"][(("a", "q"),)] == pytest.approx(0.9)


def test_a_row_of_an_undeclared_metric_is_a_bug() -> None:
    with pytest.raises(KeyError):
        families(SPECS, [("nope", (), 1)])


async def test_the_snapshot_is_read_on_the_loop_from_the_scrape_thread() -> None:
    readers: list[int] = []

    def parts() -> Iterator[list[Row]]:
        readers.append(threading.get_ident())
        yield [("y", (), 1)]
        readers.append(threading.get_ident())
        yield [("x_total", ("b",), 2)]

    collector = LoopCollector(asyncio.get_running_loop(), SPECS, parts)
    got = {s.name: s.value for f in await asyncio.to_thread(lambda: list(collector.collect())) for s in f.samples}
    assert readers == [threading.get_ident()] * 2  # each step on the loop's thread, not the scrape's
    assert got["y"] == 1 and got["x_total"] == 2
    assert 0 < got["apogee_metrics_snapshot_max_step_seconds"] <= got["apogee_metrics_snapshot_seconds"]

    def broken() -> Iterator[list[Row]]:
        yield [("y", (), 1)]
        raise RuntimeError("state unreadable")

    failing = LoopCollector(asyncio.get_running_loop(), SPECS, broken)
    with pytest.raises(RuntimeError, match="unreadable"):
        await asyncio.to_thread(failing.snapshot)


def test_metrics_listen_forms() -> None:
    assert metrics_address("", "0.0.0.0") is None
    assert metrics_address("127.0.0.1:5557", "0.0.0.0") == ("127.0.0.1", 5557)
    assert metrics_address(":5557", "10.0.0.1") == ("10.0.0.1", 5557)
    assert metrics_address("5557", "10.0.0.1") == ("10.0.0.1", 5557)
    for bad in ("localhost", "h:port", "h:70000"):
        with pytest.raises(ValueError):
            metrics_address(bad, "0.0.0.0")
