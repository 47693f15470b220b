"""Signatures of the optional C speed-ups (``src/apogee/_native/*.c``), so that mypy checks
every call made through ``apogee.common.accel.native``.

Each function's docstring in C names its pure-Python reference and what it declines; every
function raises (TypeError, ValueError, OverflowError) for arguments outside these types or
their documented ranges rather than crash.  All positional-only, as the C functions parse
them.
"""

import asyncio
import mmap
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, TypeVar, overload

_T = TypeVar("_T")
_Readable: TypeAlias = bytes | bytearray | memoryview | mmap.mmap
_Writable: TypeAlias = bytearray | memoryview | mmap.mmap

# hashes.c
def java_hash(s: str, prefix: int = 0, /) -> int: ...
def index_hashes(prefix: int, keys: Sequence[str], /) -> list[int]: ...
def index_put(
    buf: _Writable,
    slots: int,
    index_num: int,
    header: tuple[int, int, int, int, int, int],
    store_ts: int,
    entries: _Readable,
    start: int,
    /,
) -> tuple[tuple[int, int, int, int, int, int], int]: ...

# records.c: (cq entries, index entries, comma-joined offset msg ids, distinct tag codes or None)
_RunNotes: TypeAlias = tuple[bytes, bytes, str, tuple[int, ...] | None]

def scan_batch(body: _Readable, batch_props: _Readable, max_body: int, /) -> tuple[int, int] | None: ...
def write_batch(
    buf: _Writable,
    pos: int,
    body: _Readable,
    batch_props: _Readable,
    topic_field: _Readable,
    queue_id: int,
    first_queue_offset: int,
    first_phys: int,
    sysflag: int,
    born_ts: int,
    born_ip: _Readable,
    born_port: int,
    store_ts: int,
    store_ip: _Readable,
    store_port: int,
    reconsume_times: int,
    index_prefix: int,
    /,
) -> _RunNotes: ...
def scan_single(props: str | bytes, extra: bytes, /) -> int | None: ...
def send_v2_fields(
    ext: dict[str, Any], extra: bytes, keys: tuple[str, ...], /
) -> tuple[str, int, int, int, int, str, int, int] | None: ...
def write_single(
    buf: _Writable,
    pos: int,
    body: _Readable,
    props: str | _Readable,
    extra: _Readable,
    topic_field: _Readable,
    queue_id: int,
    queue_offset: int,
    phys: int,
    sysflag: int,
    flag: int,
    born_ts: int,
    born_ip: _Readable,
    born_port: int,
    store_ts: int,
    store_ip: _Readable,
    store_port: int,
    reconsume_times: int,
    index_prefix: int,
    /,
) -> _RunNotes: ...

# client.c
def encode_batch(items: Sequence[tuple[int, bytes, str]], /) -> bytes: ...
def decode_records(buf: _Readable, pos: int, cls: type[_T], /) -> tuple[list[_T], int]: ...
@overload
def properties_to_string(props: dict[str, str], strict: Literal[False] = False, /) -> str: ...
@overload
def properties_to_string(props: dict[str, str], strict: bool, /) -> str | None: ...
def uniq_id_now(prefix: str, start_ms: int, next_start_ms: int, seq: int, /) -> str | None: ...
def batch_append(
    buf: bytearray,
    flag: int,
    body: bytes,
    props: dict[str, str],
    prefix: str,
    start_ms: int,
    next_start_ms: int,
    seq: int,
    /,
) -> str | None: ...
def complete_sends(
    futures: list[asyncio.Future[Any]],
    result_type: type[tuple[Any, ...]],
    status: object,
    uniqs: list[str],
    offset_ids: list[str],
    mq: object,
    first_offset: int,
    region: str | None,
    trace: bool,
    /,
) -> None: ...

# frames.c
def decode_frames(
    data: bytes | bytearray,
    max_frame_size: int,
    command_type: type[_T],
    language_by_name: dict[str, int],
    other_language: int,
    /,
) -> tuple[list[_T], int] | None: ...
def json_frame_head(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str] | None,
    body_length: int,
    language_names: dict[int, str],
    /,
) -> bytes | None: ...
def fields_frame(
    code: int,
    opaque: int,
    flag: int,
    language_name: str,
    version: int,
    keys: tuple[str, ...],
    values: tuple[str | int | None, ...],
    body: bytes | int | None,
    /,
) -> bytes | None: ...

# reads.c
def pull_fields(
    ext: dict[str, Any], keys: tuple[str, ...], /
) -> tuple[str, str, int, int, int, int, int, int, int, str | None, str | None] | None: ...
def collect_records(
    entries: _Readable,
    max_units: int,
    file: _Readable,
    file_start: int,
    file_wrote: int,
    first_offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    max_bytes: int,
    max_count: int,
    low_phys: int,
    codes: set[int] | frozenset[int] | None,
    /,
) -> tuple[memoryview, list[int], int, int] | None: ...

# dispatch.c: (topic, queue_id, first_queue_offset, count, cq entries, distinct tag codes or None)
_SpanGroup: TypeAlias = tuple[str, int, int, int, bytes, tuple[int, ...] | None]

def scan_dispatch(
    buf: _Readable, start: int, end: int, phys: int, max_records: int, index: bool, /
) -> tuple[int, int, int, int, list[_SpanGroup], bytes]: ...
def record_ends(buf: _Readable, start: int, end: int, /) -> int: ...

# crc32.c
def crc32(data: _Readable, value: int = 0, /) -> int: ...

# flusher.c
class Flusher:
    def __init__(self) -> None: ...
    def request(self, file_key: int, fd: int, end: int, store_ts: int, /) -> bool: ...
    def take(self) -> tuple[int, int, int, int, int]: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...
