from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock judgments: a test's deadline and the "input generation is slow" health check
# time the machine, not the code (a CI run once failed when this shared VM stalled for 42 s
# while Hypothesis drew one example).  The other health checks judge the strategies and stay.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=300, **_UNTIMED)
settings.register_profile("dev", max_examples=100, **_UNTIMED)
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


# The tests of the one Spark session (the ``spark`` fixture: a JVM of ~1 GB that takes seconds
# to start) share a worker, so the session starts once.  These Spark tests do not use it (they
# start JVMs of their own, or none): they go to any worker, each module (or test) on its own,
# so the Spark tests' CPU is spread over the workers instead of lengthening the session's.
_SPARK_SESSION = "tests/spark/"
_NO_SPARK_SESSION = (
    "tests/spark/test_connect.py",
    "tests/spark/test_offsets_options.py",
    "tests/spark/test_examples.py::test_batch_example",
    "tests/spark/test_examples.py::test_format_registered_automatically_without_register",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker, longest tests first: the scheduler below hands out work in
    this order, so no long test is left to run alone at the end.  The sort is stable: tests
    of a module stay together."""
    for item in items:
        if item.nodeid.startswith(_NO_SPARK_SESSION) and "spark" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} uses the Spark session: take it out of _NO_SPARK_SESSION")
    if hasattr(config, "workerinput"):
        items.sort(key=_weight)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` (``--dist loadscope``): each module goes to one worker, so its servers
    start once, and every test of the Spark session (under tests/spark/ but not in
    ``_NO_SPARK_SESSION``) goes to the same worker, so one session serves them all while the
    other workers run the rest.  (``--dist loadgroup`` would say the same with marks, but
    does not group at all with pytest 9.2: pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for entry in _NO_SPARK_SESSION:
                if nodeid.startswith(entry):  # a listed test is a scope of its own
                    return entry if "::" in entry else super()._split_scope(nodeid)
            if nodeid.startswith(_SPARK_SESSION):
                return "tests/spark"
            if nodeid.startswith("tests/browser/"):  # one Chromium and one shared cluster for all
                return "tests/browser"
            return super()._split_scope(nodeid)

    return SparkTogether(config, log)
