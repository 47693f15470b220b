"""Offsets in memory and in the broadcasting consumer's local file (atomic, .bak fallback)."""

from __future__ import annotations

from pathlib import Path

from apogee.client.consumer.offset_store import (
    OFFSET_NOT_FOUND,
    LocalFileOffsetStore,
    ReadOffsetType,
    decode_offsets,
    encode_offsets,
    load_offsets_file,
)
from apogee.common.message import MessageQueue

MQ0 = MessageQueue("T", "b", 0)
MQ1 = MessageQueue("T", "b", 1)


async def test_update_rules_and_persist_round_trip(tmp_path: Path) -> None:
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@inst", "G")
    await store.load()
    assert await store.read_offset(MQ0, ReadOffsetType.STORE) == OFFSET_NOT_FOUND
    store.update_offset(MQ0, 10)
    store.update_offset(MQ0, 5, increase_only=True)  # ignored: would go back
    assert store.memory_offset(MQ0) == 10
    store.update_offset(MQ0, 5)  # explicit reset
    store.update_offset(MQ1, 7)
    await store.persist_all()
    assert store.path == tmp_path / "10.0.0.1@inst" / "G" / "offsets.json"
    again = LocalFileOffsetStore(tmp_path, "10.0.0.1@inst", "G")
    await again.load()
    assert again.table() == {MQ0: 5, MQ1: 7}
    again.remove_offset(MQ1)
    assert await again.read_offset(MQ1, ReadOffsetType.MEMORY) == OFFSET_NOT_FOUND


async def test_corrupt_file_falls_back_to_backup(tmp_path: Path) -> None:
    store = LocalFileOffsetStore(tmp_path, "c", "G")
    store.update_offset(MQ0, 1)
    await store.persist_all()
    store.update_offset(MQ0, 2)
    await store.persist_all()  # the first version is now offsets.json.bak
    store.path.write_bytes(b"{garbage")
    assert load_offsets_file(store.path) == {MQ0: 1}
    store.path.with_name("offsets.json.bak").write_bytes(b"")
    assert load_offsets_file(store.path) == {}


def test_encoding_is_stable_json() -> None:
    data = encode_offsets({MQ1: 3, MQ0: 9})
    assert decode_offsets(data) == {MQ0: 9, MQ1: 3}
    assert data.index(b'"queueId": 0') < data.index(b'"queueId": 1')
