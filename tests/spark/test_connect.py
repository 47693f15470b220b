"""The ``apogee`` source under Spark Connect: a real local Connect server (started by PySpark's
``builder.remote("local[2]")`` in a client process of its own) against real ``apogee``
processes.  Registration (automatic and explicit), batch read with pushdown, write and read
back, a streaming read to Parquet and a streaming write through the exactly-once sink."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import Apogee, unique

pytestmark = pytest.mark.spark

JOB = Path(__file__).parent / "jobs" / "connect_client.py"


def run_client(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run the Connect client to the end; its ``RESULT`` lines, by name (the log on failure)."""
    log = tmp_path / "connect-client.log"
    with log.open("wb") as out:
        proc = subprocess.run(
            [sys.executable, str(JOB), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=240,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
            check=False,
        )
    text = log.read_text(errors="replace")
    results = {}
    for line in text.splitlines():
        if line.startswith("RESULT "):
            _, name, value = line.split(" ", 2)
            results[name] = json.loads(value)
    assert proc.returncode == 0 and results.get("done"), text[-6000:]
    return results


def test_connect_batch_write_and_streaming(apogee_cluster: Apogee, tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql.connect.session")
    pytest.importorskip("grpc")
    source = apogee_cluster.create_topic(unique("ConnIn"), 4)
    target = apogee_cluster.create_topic(unique("ConnOut"), 2)
    stream_out = apogee_cluster.create_topic(unique("ConnSink"), 2)
    sent = apogee_cluster.send_to_queues(source, 30, 4)
    expected = sorted(
        [q, i, m.body.hex(), " ".join(m.keys), m.tags, {"seq": str(i)}]
        for q in range(4)
        for i, m in enumerate(sent[q * 30 : (q + 1) * 30])
    )
    results = run_client(tmp_path, apogee_cluster.ns, source, target, stream_out, str(tmp_path / "work"))

    assert results["connect"] is True  # really a Connect session, not a classic one
    assert results["batch_auto"] == expected
    assert results["pushdown_flag"] == "true"
    assert results["batch_filtered"] == [row for row in expected if row[0] == 1 and row[1] >= 5]
    written = sorted(results["written"])
    assert sorted([body, keys, tags, props] for _, _, body, keys, tags, props in results["written_back"]) == written
    assert results["stream_error"] is None
    assert results["stream_batches"] == [50, 50, 20]
    assert results["stream_rows"] == sorted([q, i, body] for q, i, body, *_ in expected)
    assert results["sink_error"] is None
    assert results["sink_rows"] == sorted([body, keys, tags, props] for _, _, body, keys, tags, props in expected)
