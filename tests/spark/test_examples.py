"""The Spark examples under examples/ run against a real cluster and do what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import Apogee, read, unique

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, *args: str, timeout: float = 180) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        causes = [line for line in proc.stderr.splitlines() if "apogee:" in line or "Error" in line][:10]
        raise AssertionError(
            f"{script} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n" + "\n".join(causes) + proc.stderr[-3000:]
        )
    return proc.stdout


def test_batch_example(apogee_cluster: Apogee) -> None:
    topic = apogee_cluster.create_topic(unique("ExBatch"), 4)
    out = run("spark_batch.py", "--namesrv", apogee_cluster.ns, "--topic", topic, "--rows", "300")
    assert "wrote 300 rows" in out and "read back tag click: 100 rows" in out and "read back tag view: 200 rows" in out
    assert "tag filter at the broker: 100 clicks" in out and out.count("queue 0 offset") == 5


def test_streaming_example_continues_where_it_stopped(spark: Any, apogee_cluster: Apogee, tmp_path: Path) -> None:
    source = apogee_cluster.create_topic(unique("ExIn"), 2)
    target = apogee_cluster.create_topic(unique("ExOut"), 2)
    apogee_cluster.send_to_queues(source, 25, 2)
    args = (
        "--namesrv",
        apogee_cluster.ns,
        "--source",
        source,
        "--target",
        target,
        "--out",
        str(tmp_path / "out"),
        "--checkpoint",
        str(tmp_path / "cp"),
        "--max-per-trigger",
        "20",
    )
    assert "50 messages to Parquet" in run("spark_streaming.py", *args)
    apogee_cluster.send_to_queues(source, 5, 2)
    assert "10 messages to Parquet" in run("spark_streaming.py", *args)
    assert spark.read.parquet(str(tmp_path / "out")).count() == 60
    first = [f"{source}-{q}-{i}" for q in range(2) for i in range(25)]
    second = [f"{source}-{q}-{i}" for q in range(2) for i in range(5)]  # same bodies, sent again
    assert sorted(r.body for r in read(spark, apogee_cluster.ns, topic=target).collect()) == sorted(
        b.upper().encode() for b in first + second
    )


AUTO = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
df = spark.read.format("apogee").option("namesrv", sys.argv[1]).option("topic", sys.argv[2]).load()
print("rows", df.where("queue_id = 1").count())
spark.stop()
"""


def test_format_registered_automatically_without_register(apogee_cluster: Apogee) -> None:
    """PySpark finds the top-level ``pyspark_apogee`` module itself; with its default
    settings (filter pushdown off) the read still works."""
    topic = apogee_cluster.create_topic(unique("Auto"), 2)
    apogee_cluster.send_to_queues(topic, 7, 2)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(
        [sys.executable, "-c", AUTO, apogee_cluster.ns, topic], capture_output=True, text=True, timeout=180, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rows 7" in proc.stdout
