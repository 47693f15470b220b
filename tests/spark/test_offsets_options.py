"""The pure parts of the connector: offset arithmetic and option parsing (no Spark, no I/O)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apogee.spark.errors import ApogeeSparkError, one_line
from apogee.spark.offsets import QueueKey, clamp, from_json, limit_bytes, limit_rows, plan_slices, to_json
from apogee.spark.options import parse_sink_options, parse_source_options, tag_set

pytestmark = pytest.mark.spark


def k(q: int, topic: str = "T") -> QueueKey:
    return QueueKey(topic, "b", q)


def test_json_round_trip_and_shape_errors() -> None:
    flat = {k(0): 5, k(10): 7, k(1, "U"): 0}
    assert from_json(to_json(flat)) == flat
    assert to_json(flat) == {"T": {"b": {"0": 5, "10": 7}}, "U": {"b": {"1": 0}}}
    with pytest.raises(ApogeeSparkError, match="not valid JSON"):
        from_json("{oops")
    with pytest.raises(ApogeeSparkError, match="must map queue ids"):
        from_json({"T": {"b": 3}})
    with pytest.raises(ApogeeSparkError, match="is not an integer"):
        from_json({"T": {"b": {"x": 3}}})
    with pytest.raises(ApogeeSparkError, match="must be an integer"):
        from_json({"T": {"b": {"0": "3"}}})


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=12),
    st.integers(1, 3000),
)
def test_limit_rows_is_exact_and_proportional(ranges: list[tuple[int, int]], max_rows: int) -> None:
    start = {k(i): lo for i, (lo, _) in enumerate(ranges)}
    end = {k(i): lo + n for i, (lo, n) in enumerate(ranges)}
    out = limit_rows(start, end, max_rows)
    available = sum(n for _, n in ranges)
    admitted = sum(out[key] - start[key] for key in end)
    assert admitted == min(available, max_rows)
    assert all(start[key] <= out[key] <= end[key] for key in end)
    assert limit_rows(start, end, max_rows) == out  # deterministic


def test_limit_bytes_uses_sizes_and_always_progresses() -> None:
    start = {k(0): 0, k(1): 0}
    end = {k(0): 100, k(1): 100}
    out = limit_bytes(start, end, {k(0): 1000.0, k(1): 1000.0}, 50_000)
    assert sum(out.values()) == 50
    assert limit_bytes(start, end, {k(0): 1000.0, k(1): 1000.0}, 10) == {k(0): 1, k(1): 0}
    assert limit_bytes(start, end, {}, 10**9) == end


def test_clamp_to_available_now_target() -> None:
    start = {k(0): 5, k(1): 0}
    assert clamp({k(0): 50, k(1): 9, k(2): 4}, {k(0): 20, k(1): 30}, {**start, k(2): 0}) == {k(0): 20, k(1): 9, k(2): 0}


@given(
    st.lists(st.integers(0, 500), min_size=1, max_size=10),
    st.integers(1, 200),
    st.one_of(st.none(), st.integers(1, 40)),
)
def test_slices_cover_ranges_exactly(sizes: list[int], max_per: int, min_slices: int | None) -> None:
    ranges = [(k(i), 10, 10 + n) for i, n in enumerate(sizes)]
    slices = plan_slices(ranges, max_per_slice=max_per, min_slices=min_slices)
    covered: dict[QueueKey, list[tuple[int, int]]] = {}
    for s in slices:
        assert 0 < s.size <= max_per
        covered.setdefault(s.key, []).append((s.start, s.end))
    for key, lo, hi in ranges:
        parts = sorted(covered.get(key, []))
        if hi == lo:
            assert not parts
            continue
        assert parts[0][0] == lo and parts[-1][1] == hi
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    if min_slices:
        assert len(slices) >= min(min_slices, sum(sizes))
    assert plan_slices(ranges, max_per_slice=max_per, min_slices=min_slices) == slices


def test_source_options_are_case_insensitive_and_checked() -> None:
    opts = parse_source_options(
        {"namesrv": "h:1", "topic": "T", "startingoffsets": "latest", "MAXMESSAGESPERTRIGGER": "5"}, streaming=True
    )
    assert opts.starting.kind == "latest" and opts.max_messages_per_trigger == 5
    assert parse_source_options({"namesrv": "h:1", "topic": "T"}, streaming=True).starting.kind == "latest"
    assert parse_source_options({"namesrv": "h:1", "topic": "T"}, streaming=False).starting.kind == "earliest"
    bad = [
        ({"topic": "T"}, "option namesrv is required"),
        ({"namesrv": "nohost", "topic": "T"}, "is not host:port"),
        ({"namesrv": "h:1"}, "exactly one of the options topic, topics or topicPattern"),
        ({"namesrv": "h:1", "topic": "T", "topics": "A,B"}, "exactly one"),
        ({"namesrv": "h:1", "topic": "T", "startingOffsets": "[1]"}, "must be a JSON object"),
        ({"namesrv": "h:1", "topic": "T", "endingOffsets": "earliest"}, "cannot be earliest"),
        ({"namesrv": "h:1", "topic": "T", "minPartitions": "x"}, "must be an integer"),
        ({"namesrv": "h:1", "topic": "T", "startingTimestamp": "yesterday"}, "epoch milliseconds or an ISO-8601"),
        ({"namesrv": "h:1", "topic": "T", "tags": "A", "sqlFilter": "a > 1"}, "only one of tags and sqlFilter"),
        ({"namesrv": "h:1", "topic": "T", "maxMessagesPerTrigger": "3"}, "streaming reads only"),
        ({"namesrv": "h:1", "topic": "T", "failOnDataLoss": "maybe"}, "true or false"),
        ({"namesrv": "h:1", "topicPattern": "("}, "not a regular expression"),
    ]
    for options, message in bad:
        with pytest.raises(ApogeeSparkError, match=message.replace("(", r"\(")):
            parse_source_options(options, streaming=False)
    assert tag_set("A || B ||C") == frozenset({"A", "B", "C"}) and tag_set(" * ") is None


def test_sink_options() -> None:
    assert parse_sink_options({"namesrv": "h:1"}, streaming=True).delivery_guarantee == "exactlyOnce"
    assert parse_sink_options({"namesrv": "h:1"}, streaming=False).delivery_guarantee == "atLeastOnce"
    assert (
        parse_sink_options({"namesrv": "h:1", "deliveryguarantee": "ATLEASTONCE"}, streaming=True).delivery_guarantee
        == "atLeastOnce"
    )
    with pytest.raises(ApogeeSparkError, match="exactlyOnce or atLeastOnce"):
        parse_sink_options({"namesrv": "h:1", "deliveryGuarantee": "twice"}, streaming=True)
    with pytest.raises(ApogeeSparkError, match="applies to streaming writes"):
        parse_sink_options({"namesrv": "h:1", "deliveryGuarantee": "exactlyOnce"}, streaming=False)


def test_one_line_digs_our_message_out_of_spark_text() -> None:
    wrapped = Exception(
        "[PYTHON_DATA_SOURCE_ERROR] Failed: Traceback (most recent call last):\n  File x\n"
        "apogee.spark.errors.ApogeeSparkError: apogee: topic 'X' does not exist: nope\n\tat org.apache..."
    )
    assert one_line(wrapped) == "apogee: topic 'X' does not exist: nope"
    assert one_line(RuntimeError("first line\nsecond")) == "first line"


def test_sink_batch_encoding_is_the_codecs() -> None:
    from apogee.common.message_codec import decode_batch, encode_batch
    from apogee.spark.writer import BulkIds, _encode_items

    bodies = [b"x" * n for n in (1, 100, 5000)]
    props = ["UNIQ_KEY\x01A\x02TAGS\x01t", "", "k\x01v"]
    parts = list(_encode_items(bodies, [p.encode() for p in props], 1 << 20))
    assert parts == [(encode_batch([(0, b, p) for b, p in zip(bodies, props, strict=True)]), 0, 3)]
    split = list(_encode_items(bodies, [p.encode() for p in props], 200))
    assert [(lo, hi) for _, lo, hi in split] == [(0, 2), (2, 3)]
    assert [i.body for part, _, _ in split for i in decode_batch(part)] == bodies
    ids = BulkIds().take(70_000)
    assert len(set(ids)) == 70_000 and all(len(i) == 32 for i in ids[:10])


def java_env(tmp_path: Path, version: str | None) -> dict[str, str]:
    """An environment whose only `java` (if any) prints ``version``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if version is not None:
        java = bin_dir / "java"
        java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n")
        java.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bin_dir)
    return env


def test_missing_or_old_java_is_one_line(tmp_path: Path) -> None:
    for version, expected in ((None, "no `java` was found"), ("1.8.0_392", "is Java 8"), ("11.0.2", "is Java 11")):
        result = subprocess.run(
            [sys.executable, "-m", "apogee.spark.session"],
            env=java_env(tmp_path, version),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Spark needs Java 17+") and expected in lines[0], lines
    ok = subprocess.run(
        [sys.executable, "-m", "apogee.spark.session"],
        env=java_env(tmp_path, "17.0.15"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0
    demo = subprocess.run(
        [sys.executable, "-m", "apogee", "demo", "--orders", "1"],
        env=java_env(tmp_path, "1.8.0_1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert demo.returncode != 0 and "Traceback" not in demo.stdout + demo.stderr
    assert (
        demo.stdout.strip().startswith("apogee demo: Spark needs Java 17+")
        and len(demo.stdout.strip().splitlines()) == 1
    )
