"""A batch (or a single send) written by the C path leaves the same files as the pure-Python path.

Two stores with the same clock take the same batches, one through ``InnerBatch.raw`` (C), one
through decoded items (the reference); after dispatch every CommitLog, ConsumeQueue and index
file must be byte-identical.  Small files make the batches cross ConsumeQueue and index files.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from apogee.common import message_codec as mc
from apogee.common.accel import native
from apogee.store import InnerBatch, InnerMessage, MessageStore, PlainMessage, StoreConfig
from apogee.store.dispatch import SCAN_SINGLES_FROM

pytestmark = pytest.mark.skipif(native is None, reason="apogee._native is not built")


def _batches(seed: int) -> list[tuple[str, int, bytes]]:
    rng = random.Random(seed)
    out = []
    for i in range(60):
        items = []
        for j in range(rng.randrange(1, 9)):
            props = {}
            if rng.random() < 0.8:
                props["TAGS"] = rng.choice(["A", "B", "C", "é"] + [f"T{k}" for k in range(12)])
            if rng.random() < 0.5:
                props["KEYS"] = rng.choice(["k1", "k1 k2", " k3  k4 ", "订单 😀"])
            if rng.random() < 0.9:
                props["UNIQ_KEY"] = f"UNIQ{i:04d}{j}"
            items.append((rng.randrange(3), rng.randbytes(rng.randrange(1, 200)), mc.properties_to_string(props)))
        out.append((rng.choice(["TopicA", "TopicB"]), rng.randrange(3), mc.encode_batch_py(items)))
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.parent.name != "config" and p.name not in ("checkpoint", "lock", "abort")}


async def _fill(cfg: StoreConfig, batches: list[tuple[str, int, bytes]], raw: bool) -> None:
    ticks = iter(range(1_700_000_000_000, 1_800_000_000_000, 700))
    store = MessageStore(cfg, clock=lambda: next(ticks))
    await store.start()
    for topic, qid, body in batches:
        props = "CLUSTER\x01DefaultCluster"
        if raw:
            scan = native.scan_batch(body, props.encode(), 4096)
            assert scan is not None
            batch = InnerBatch(topic, qid, [], props, born_host=("10.0.0.2", 1), store_host=("10.0.0.1", 2),
                               raw=body, raw_scan=scan)
        else:
            batch = InnerBatch(topic, qid, mc.decode_batch(body), props, born_host=("10.0.0.2", 1),
                               store_host=("10.0.0.1", 2))
        result, _ = store.put_messages_nowait(batch)
        assert result.ok
        assert result.record_offsets[0] == result.wrote_offset and len(result.record_offsets) == result.msg_num
    await store.wait_dispatched()
    await store.shutdown()


async def _stores_both_ways(
    store_config: Callable[..., StoreConfig], tmp_path: Path, commitlog_size: int,
    fill: Callable[[StoreConfig, bool], Awaitable[None]],
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The files of two small-file stores filled by ``fill(config, c_path)``: C path, then pure."""
    files = []
    for c_path in (True, False):
        cfg = store_config(mapped_file_size_commitlog=commitlog_size, mapped_file_size_consume_queue=8 * 20,
                           max_hash_slot_num=16, max_index_num=40)
        cfg.store_path_root_dir = str(tmp_path / ("c" if c_path else "py"))
        await fill(cfg, c_path)
        files.append(_files(Path(cfg.store_path_root_dir)))
    files_c, files_py = files
    assert sorted(files_c) == sorted(files_py)
    for name in files_py:
        assert files_c[name] == files_py[name], name
    return files_c, files_py


async def test_c_batches_leave_identical_files(store_config: Callable[..., StoreConfig], tmp_path: Path) -> None:
    batches = _batches(1)
    files_c, _ = await _stores_both_ways(store_config, tmp_path, 64 * 1024, lambda cfg, c: _fill(cfg, batches, raw=c))
    assert len([n for n in files_c if n.startswith("index")]) > 3  # crossed index files


async def _fill_singles(
    cfg: StoreConfig, batches: list[tuple[str, int, bytes]], c_path: bool, per_pass: int | None = None
) -> None:
    """Every batch item sent as a single message: through ``put_plain_nowait`` (the broker's C
    path, properties as the client sent them plus WAIT) or as the full path's InnerMessage.
    ``per_pass``: dispatch after every that many puts (their hints, or one scan of the records
    from ``dispatch.SCAN_SINGLES_FROM`` on); None: once at the end."""
    ticks = iter(range(1_700_000_000_000, 1_800_000_000_000, 700))
    store = MessageStore(cfg, clock=lambda: next(ticks))
    await store.start()
    extra = b"CLUSTER\x01DefaultCluster"
    puts = 0
    for topic, qid, body in batches:
        for item in mc.decode_batch(body):
            sent = "WAIT\x01true\x02" + item.properties if item.properties else "WAIT\x01true"
            if c_path:
                size = native.scan_single(sent.encode(), extra)
                assert size is not None
                result, _ = store.put_plain_nowait(PlainMessage(
                    topic, qid, item.body, sent.encode(), extra, size, 0, item.flag, 77, ("10.0.0.2", 1),
                    ("10.0.0.1", 2), 0))
            else:
                props = mc.parse_properties(sent)
                props.pop("WAIT")
                props["CLUSTER"] = "DefaultCluster"
                result, _ = store.put_message_nowait(InnerMessage(
                    topic, qid, item.body, item.flag, mc.properties_to_string(props), born_timestamp=77,
                    born_host=("10.0.0.2", 1), store_host=("10.0.0.1", 2)))
            assert result.ok and result.msg_num == 1
            puts += 1
            if per_pass is not None and puts % per_pass == 0:
                await store.wait_dispatched()
    await store.wait_dispatched()
    await store.shutdown()


@pytest.mark.parametrize("per_pass", [None, 1, SCAN_SINGLES_FROM - 1, SCAN_SINGLES_FROM])
async def test_c_single_sends_leave_identical_files(
    store_config: Callable[..., StoreConfig], tmp_path: Path, per_pass: int | None
) -> None:
    """However many single sends each dispatch pass finds (one hint each, or one scan of their
    records), the ConsumeQueues and index are the full path's, byte for byte."""
    batches = _batches(2)
    files_c, _ = await _stores_both_ways(
        store_config, tmp_path, 16 * 1024, lambda cfg, c: _fill_singles(cfg, batches, c, per_pass)
    )
    assert len([n for n in files_c if n.startswith("commitlog")]) > 3  # crossed CommitLog files


async def test_c_batch_is_readable_and_queryable(store_config: Callable[..., StoreConfig]) -> None:
    cfg = store_config(mapped_file_size_commitlog=64 * 1024)
    store = MessageStore(cfg)
    await store.start()
    items = [(0, f"body{i}".encode(), mc.properties_to_string({"TAGS": "A", "KEYS": f"key{i}", "UNIQ_KEY": f"U{i}"}))
             for i in range(5)]
    body = mc.encode_batch_py(items)
    scan = native.scan_batch(body, b"CLUSTER\x01c", 4096)
    result, _ = store.put_messages_nowait(InnerBatch("T", 0, [], "CLUSTER\x01c", raw=body, raw_scan=scan))
    assert result.ok and result.logics_offset == 0 and result.msg_num == 5
    await store.wait_dispatched()
    got = store.get_message("g", "T", 0, 0, 10)
    msgs = mc.decode_records(b"".join(bytes(b) for b in got.buffers))
    got.release()
    assert [m.body for m in msgs] == [f"body{i}".encode() for i in range(5)]
    assert [m.msg_id for m in msgs] == [f"U{i}" for i in range(5)]
    assert msgs[0].properties == {"TAGS": "A", "KEYS": "key0", "UNIQ_KEY": "U0", "CLUSTER": "c"}
    assert result.msg_id.split(",") == [m.offset_msg_id for m in msgs]
    found = store.query_message("T", "key3", 10, 0, 1 << 62)
    assert [mc.decode_record(b).body for b in found.buffers] == [b"body3"]
    found.release()
    await store.shutdown()
