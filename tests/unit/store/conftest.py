"""Store test helpers: small file sizes so every test crosses file boundaries."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apogee.common import message_codec
from apogee.store import FlushDiskType, InnerMessage, StoreConfig

# A 1 KiB CommitLog file holds a handful of small records; a ConsumeQueue file 8 entries.
SMALL: dict[str, Any] = {
    "mapped_file_size_commitlog": 4096,
    "mapped_file_size_consume_queue": 8 * 20,
    "max_hash_slot_num": 16,
    "max_index_num": 32,
    "flush_interval_commitlog_ms": 20,
    "flush_interval_consume_queue_ms": 50,
    "clean_resource_interval_ms": 3_600_000,
    "populate_ahead_bytes": 0,
}


@pytest.fixture
def store_config(tmp_path: Path) -> Callable[..., StoreConfig]:
    def make(flush: FlushDiskType = FlushDiskType.ASYNC_FLUSH, **overrides: Any) -> StoreConfig:
        cfg = StoreConfig(store_path_root_dir=str(tmp_path / "store"), flush_disk_type=flush)
        for key, value in {**SMALL, **overrides}.items():
            setattr(cfg, key, value)
        return cfg

    return make


def make_msg(
    topic: str = "T",
    queue_id: int = 0,
    body: bytes = b"hello",
    *,
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    sysflag: int = 0,
    extra: dict[str, str] | None = None,
    as_dict: bool = False,
) -> InnerMessage:
    props: dict[str, str] = dict(extra or {})
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    if uniq:
        props["UNIQ_KEY"] = uniq
    return InnerMessage(
        topic, queue_id, body, properties=props if as_dict else message_codec.properties_to_string(props),
        sysflag=sysflag, born_timestamp=1, born_host=("10.0.0.2", 5000), store_host=("10.0.0.1", 10911),
    )


@pytest.fixture
async def open_store(store_config: Callable[..., StoreConfig]):  # type: ignore[no-untyped-def]
    """``await open_store(flush, **config)`` -> a started MessageStore, shut down afterwards."""
    from apogee.store import MessageStore

    stores: list[MessageStore] = []

    async def opener(flush: FlushDiskType = FlushDiskType.ASYNC_FLUSH, *, store_kwargs: dict[str, Any] | None = None,
                     **overrides: Any) -> MessageStore:
        store = MessageStore(store_config(flush, **overrides), **(store_kwargs or {}))
        await store.start()
        stores.append(store)
        return store

    yield opener
    for store in stores:
        await store.shutdown()


def bodies(store: Any, topic: str, queue_id: int, start: int = 0) -> list[bytes]:
    """Every message body of a queue from ``start``, read with get_message."""
    out: list[bytes] = []
    offset = start
    while True:
        res = store.get_message("g", topic, queue_id, offset, 32)
        if not res.buffers:
            return out
        out.extend(m.body for m in message_codec.decode_records(b"".join(res.buffers)))
        offset = res.next_begin_offset
        res.release()


def crash_copy(store: Any, dest: Path) -> Path:
    """What a SIGKILL leaves: the store's files as they are now (abort file and all), lock
    dropped.  The store keeps running while they are copied, so a file listed may be renamed
    or deleted before its turn (checkpoint.tmp becoming checkpoint): a crash at that instant
    would not have left it either, so it is skipped."""
    shutil.copytree(store.config.root, dest, copy_function=_copy_if_present)
    (dest / "lock").unlink()
    return dest


def _copy_if_present(src: str, dst: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(src, dst)
