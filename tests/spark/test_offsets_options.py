"""The pure parts of the connector: offset arithmetic and option parsing (no Spark, no I/O)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_acl_options_sign_source_and_sink_and_hide_the_secret() -> None:
    base = {"namesrv": "127.0.0.1:9876", "topic": "T"}
    sink = parse_sink_options({**base, "accessKey": "appKey01", "secretKey": "appSecret1"}, streaming=False)
    assert sink.credentials is not None and sink.credentials.access_key == "appKey01"
    assert "appSecret1" not in repr(sink)
    source = parse_source_options({**base, "accesskey": "appKey01", "SECRETKEY": "appSecret1"}, streaming=False)
    assert source.credentials == sink.credentials
    assert parse_source_options(base, streaming=False).credentials is None
    with pytest.raises(ApogeeSparkError, match="accessKey and secretKey go together"):
        parse_sink_options({**base, "accessKey": "appKey01"}, streaming=False)


def test_one_line_digs_our_message_out_of_spark_text() -> None:
    wrapped = Exception(
        "[PYTHON_DATA_SOURCE_ERROR] Failed: Traceback (most recent call last):\n  File x\n"
        "apogee.spark.errors.ApogeeSparkError: apogee: topic 'X' does not exist: nope\n\tat org.apache..."
    )
    assert one_line(wrapped) == "apogee: topic 'X' does not exist: nope"
    assert one_line(RuntimeError("first line\nsecond")) == "first line"


def test_sink_batch_encoding_is_the_codecs() -> None:
    import numpy as np
    import pyarrow as pa

    from apogee.common.message_codec import decode_batch, encode_batch, encode_batch_columns
    from apogee.spark.writer import BulkIds, _cuts

    bodies = [b"x" * n for n in (1, 100, 5000)]
    props = ["UNIQ_KEY\x01A\x02TAGS\x01t", "", "k\x01v\u00e9"]
    items = encode_batch_columns(pa.array(bodies, pa.binary()), pa.array([p.encode() for p in props], pa.binary()))
    ends = np.frombuffer(items.buffers()[1], np.int32)[: len(bodies) + 1].astype(np.int64)
    data = items.buffers()[2].to_pybytes()
    assert data[: ends[-1]] == encode_batch([(0, b, p) for b, p in zip(bodies, props, strict=True)])
    split = list(_cuts(ends, 0, 3, 200))
    assert split == [(0, 2), (2, 3)]
    assert [i.body for lo, hi in split for i in decode_batch(data[ends[lo] : ends[hi]])] == bodies
    assert list(_cuts(ends, 1, 3, 1 << 20)) == [(1, 3)]
    ids = BulkIds().take(70_000)
    assert len(set(ids)) == 70_000 and all(len(i) == 32 for i in ids[:10])
    assert int(ids[1][-4:], 16) == int(ids[0][-4:], 16) + 1


def test_pull_decoder_matches_the_record_decoder() -> None:
    """The columnar decoder gives what ``decode_record`` gives, record by record, on the fast
    path and on the slow one (a compressed body), with a tag filter and column subsets."""
    import random
    import zlib

    from pyspark.sql.types import StructType

    from apogee.common import constants as c
    from apogee.common.message_codec import decode_records, encode_record
    from apogee.spark.decode import ColumnBuilder
    from apogee.spark.reader import arrow_schema, source_schema

    rnd = random.Random(7)

    def records(first: int, n: int, compressed: int | None = None) -> bytes:
        out = []
        for i in range(n):
            props = {"UNIQ_KEY": f"ID{first + i:030d}"} if i % 5 else {}
            if i % 3:
                props["TAGS"] = ("TagA", "TagB", "TagC")[i % 3]
            if i % 2:
                props["KEYS"] = f"k{i} other"
            props.update({f"u{j}": f"v{i}-{j}\u00e9" for j in range(i % 3)})
            body = bytes(rnd.randrange(256) for _ in range(rnd.choice((1, 5, 12, 13, 40, 1024))))
            flag = 0
            if compressed == i:
                body, flag = zlib.compress(body), c.COMPRESSED_FLAG
            out.append(
                encode_record(
                    topic="T", body=body, queue_offset=first + i, physical_offset=4096 * (first + i), sysflag=flag,
                    born_timestamp=1_700_000_000_000 + i, store_timestamp=1_700_000_001_000 + i,
                    born_host=(f"10.0.0.{i % 3}", 5000 + i % 2), store_host=("127.0.0.1", 10911),
                    reconsume_times=i % 4, properties=props,
                )
            )  # fmt: skip
        return b"".join(out)

    def expected(msgs: list, tags: frozenset[str] | None) -> list[dict]:
        rows = []
        for m in msgs:
            if tags is not None and m.properties.get("TAGS") not in tags:
                continue
            rows.append(
                {
                    "topic": "T", "broker": "b", "queue_id": 3, "queue_offset": m.queue_offset, "msg_id": m.msg_id,
                    "keys": m.properties.get("KEYS"), "tags": m.properties.get("TAGS"), "body": m.body,
                    "properties": [(k, v) for k, v in m.properties.items() if k.startswith("u")],
                    "born_timestamp": m.born_timestamp, "store_timestamp": m.store_timestamp,
                    "born_host": f"{m.born_host[0]}:{m.born_host[1]}", "reconsume_times": m.reconsume_times,
                }
            )  # fmt: skip
        return rows

    def as_plain(batch: Any) -> list[dict]:
        rows = batch.to_pylist()
        for r in rows:
            for k in ("born_timestamp", "store_timestamp"):
                if k in r:
                    r[k] = int(r[k].timestamp() * 1000)
        return rows

    full = source_schema()
    for compressed in (None, 7):
        chunks = [(records(0, 50), 5, 45), (records(40, 60, compressed), 45, 100), (records(100, 33), 100, 120)]
        msgs = [m for buf, lo, hi in chunks for m in decode_records(buf) if lo <= m.queue_offset < hi]
        for names in (None, ("body",), ("queue_offset", "msg_id"), ("tags", "properties", "born_host")):
            schema = full if names is None else StructType([f for f in full.fields if f.name in names])
            for tags in (None, frozenset({"TagA", "TagC"})):
                builder = ColumnBuilder(arrow_schema(schema), "T", "b", 3, tags)
                for buf, lo, hi in chunks:
                    builder.add(buf, lo, hi)
                want = [{k: r[k] for k in schema.names} for r in expected(msgs, tags)]
                assert as_plain(builder.take()) == want, (compressed, names, tags)


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


def test_tls_options() -> None:
    plain = parse_source_options({"namesrv": "h:1", "topic": "T"}, streaming=False)
    assert plain.tls is None
    opts = parse_source_options({"namesrv": "h:1", "topic": "T", "tlsCaFile": "/ca.pem"}, streaming=False)
    assert opts.tls is not None and opts.tls.enable and opts.tls.ca_file == "/ca.pem" and opts.tls.verifies
    sink = parse_sink_options(
        {"namesrv": "h:1", "tls": "true", "tlsVerify": "false", "tlsCertFile": "/c.pem", "tlsKeyFile": "/k.pem",
         "tlsServerName": "localhost"}, streaming=False,
    )
    assert sink.tls is not None and not sink.tls.verifies
    assert (sink.tls.cert_file, sink.tls.key_file, sink.tls.server_name) == ("/c.pem", "/k.pem", "localhost")
    assert parse_sink_options({"namesrv": "h:1", "tls": "false", "tlsCaFile": "/ca.pem"}, streaming=False).tls is None
    with pytest.raises(ApogeeSparkError, match="tlsKeyFile needs tlsCertFile"):
        parse_source_options({"namesrv": "h:1", "topic": "T", "tlsKeyFile": "/k.pem"}, streaming=False)
    with pytest.raises(ApogeeSparkError, match="did you mean 'tlsCaFile'"):
        parse_source_options({"namesrv": "h:1", "topic": "T", "tlsCAFiles": "/ca.pem"}, streaming=False)
