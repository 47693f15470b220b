from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=300, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# Every JVM of a test run (the Spark session of the tests, the Spark drivers they start as
# subprocesses, `apogee demo`) lives seconds, not hours: with the C1 compiler only and the
# serial collector it starts markedly faster on 2 shared cores, and runs small batches no
# slower.  Inherited by subprocesses; a JDK_JAVA_OPTIONS set by the caller wins.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def _weight(item: pytest.Item) -> int:
    """Longest first: the Spark tests, then the C++ client, crash and slow tests, then the rest."""
    marks = {m.name for m in item.iter_markers()}
    if {"spark", "crash"} <= marks:
        return 0
    if "spark" in marks:
        return 1
    if marks & {"interop", "crash", "slow"}:
        return 2
    return 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker, longest tests first: the scheduler below hands out work in
    this order, so no long test is left to run alone at the end.  The sort is stable: tests
    of a module stay together."""
    if hasattr(config, "workerinput"):
        items.sort(key=_weight)


# Run on the Spark worker too: the Spark tests take about as long as all the others together,
# so the longest non-Spark module (the failover trial, ~25 s) evens the two workers out.
_WITH_SPARK = ("tests/spark/", "tests/interop/test_ha_failover.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` (``-n 2 --dist loadscope``): each module goes to one worker, so its servers
    start once, and every test under tests/spark/ (and ``_WITH_SPARK``) goes to the same worker, so one Spark
    session (a JVM of ~3 GB that takes seconds to start) serves them all while the other
    worker runs the rest.  (``--dist loadgroup`` would say the same with marks, but does not
    group at all with pytest 9.2: pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(_WITH_SPARK):
                return "tests/spark"
            if nodeid.startswith("tests/browser/"):  # one Chromium and one shared cluster for all
                return "tests/browser"
            return super()._split_scope(nodeid)

    return SparkTogether(config, log)
