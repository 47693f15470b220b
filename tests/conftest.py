from __future__ import annotations

import os

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
    """Longest first: Spark tests that restart drivers, other Spark tests (a JVM each time
    they start one), the C++ client, crash and slow tests, then the rest."""
    marks = {m.name for m in item.iter_markers()}
    if {"spark", "crash"} <= marks:
        return 0
    if "spark" in marks:
        return 1
    if marks & {"interop", "crash", "slow"}:
        return 2
    return 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test` runs two workers), start the long tests first: the
    workers then share the short ones at the end instead of one worker finishing a long test
    alone.  The sort is stable, so tests of a module stay together within a weight."""
    if getattr(config.option, "numprocesses", None):
        items.sort(key=_weight)
