"""Every example under examples/ runs against a real cluster and does what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.client.conftest import Cluster, unique

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def run(script: str, *args: str, timeout: float = 90) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_producer_then_push_consumer_then_lite_pull(cluster: Cluster) -> None:
    topic = unique("ExampleTopic")
    out = run("producer.py", "--namesrv", cluster.ns, "--topic", topic, "--count", "10")
    assert out.count("sent ") == 10 and "SEND_OK" in out
    out = run("push_consumer.py", "--namesrv", cluster.ns, "--topic", topic, "--group", unique("G"), "--expect", "10")
    assert out.count("received ") == 10 and "done: 10 messages" in out
    out = run("lite_pull.py", "--namesrv", cluster.ns, "--topic", topic, "--group", unique("G"), "--expect", "10")
    assert out.count("polled queue") == 10


def test_async_producer(cluster: Cluster) -> None:
    out = run("async_producer.py", "--namesrv", cluster.ns, "--topic", unique("ExampleAsync"), "--count", "2000")
    assert "sent 2000 of 2000 messages" in out and "0 failed" in out


def test_ordered(cluster: Cluster) -> None:
    out = run("ordered.py", "--namesrv", cluster.ns, "--topic", unique("ExampleOrder"), "--orders", "5", "--steps", "4")
    assert "every order in sequence: True" in out


def test_a_consumer_example_on_a_topic_that_does_not_exist_says_what_to_do(cluster: Cluster) -> None:
    topic = unique("NoSuchTopic")
    for script, *args in (
        ("push_consumer.py", "--topic", topic, "--expect", "1"),
        ("lite_pull.py", "--topic", topic, "--expect", "1"),
        ("spark_streaming.py", "--source", topic, "--out", "unused", "--checkpoint", "unused"),  # before Spark starts
    ):
        proc = subprocess.run(
            [sys.executable, str(EXAMPLES / script), "--namesrv", cluster.ns, *args],
            capture_output=True, text=True, timeout=60,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"topic {topic} does not exist yet: create it with `apogee admin update-topic")
