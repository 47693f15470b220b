"""PULL response bodies to Arrow record batches, column by column.

A pull body is stored records back to back (layout in ``apogee.common.message_codec``, whose
``RECORD_FIXED_LAYOUT`` names the offsets used here).  Building one ``MessageExt`` per message
and then converting rows would cost more than the network, so the only per-record Python work
is ``record_positions`` walking the TOTALSIZE chain.  Everything else is done for a whole
batch at once with numpy and Arrow:

* the 88 fixed bytes of every record are gathered into one array of a numpy record type
  made from ``RECORD_FIXED_LAYOUT`` (big-endian fields), so numbers are column slices;
* bodies and properties strings become Arrow *binary view* arrays pointing into the pulled
  bytes (offset + length per row), which one cast turns into plain binary / string columns;
* the properties strings are split into tags, keys, message id and the user ``properties``
  map by Arrow compute kernels; hosts are formatted once per distinct (ip, port).

Columns the query did not ask for are not built.  Only records whose queue offset lies in the
slice being read are kept (pipelined pulls may overlap), and with a tag filter only records
whose tag is in the set: the broker filters by tag *hash*, so an exact check is needed here.
Records the fast path cannot read (compressed bodies, IPv6 hosts, another magic) send their
batch through ``message_codec.decode_record``, the shared full decoder.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from numpy.lib.stride_tricks import as_strided

from apogee.common import constants as c
from apogee.common.inet import ipv4_text
from apogee.common.message_codec import (
    MESSAGE_MAGIC_CODE,
    OFF_BODY,
    RECORD_FIXED_LAYOUT,
    decode_record,
    record_positions,
)
from apogee.spark.schema import INTERNAL_PROPERTY_PREFIX, SYSTEM_PROPERTIES

_MAX_BYTES = 1 << 30  # int32 view offsets: flush a batch well before 2 GiB of pulled bytes
_PAD = bytes(16)  # after the last record, so 12-byte and 88-byte windows never run off the end
_SLOW_FLAGS = c.COMPRESSED_FLAG | c.BORNHOST_V6_FLAG | c.STOREHOSTADDRESS_V6_FLAG
_SYSTEM = pa.array(sorted(SYSTEM_PROPERTIES), pa.string())
_HEX = np.array([f"{i:02X}".encode() for i in range(256)], dtype="S2")

# The fixed part of a record as a numpy record type: big-endian numbers, hosts' IPs as 4 bytes.
_NP_CODES = {"i": ">i4", "q": ">i8", "4s": "V4"}
FIXED_DTYPE = np.dtype(
    {
        "names": list(RECORD_FIXED_LAYOUT),
        "formats": [_NP_CODES[code] for _, code in RECORD_FIXED_LAYOUT.values()],
        "offsets": [off for off, _ in RECORD_FIXED_LAYOUT.values()],
        "itemsize": OFF_BODY,
    }
)


class ColumnBuilder:
    """Accumulates pulled bodies of one queue slice; ``take()`` returns a RecordBatch."""

    def __init__(
        self,
        arrow_schema: pa.Schema,
        topic: str,
        broker: str,
        queue_id: int,
        tag_filter: frozenset[str] | None = None,
    ) -> None:
        self.schema = arrow_schema
        self.names = set(arrow_schema.names)
        self.topic = topic
        self.broker = broker
        self.queue_id = queue_id
        self.tag_filter = tag_filter
        self.want_props_text = bool(self.names & {"properties", "msg_id", "keys", "tags"}) or bool(tag_filter)
        self._hosts: dict[int, str] = {}
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self.nbytes = 0
        self.chunks: list[tuple[bytes, list[int], int, int]] = []

    @property
    def full(self) -> bool:
        return self.nbytes >= _MAX_BYTES

    def add(self, buf: bytes, lo: int, hi: int) -> None:
        """Add the records of ``buf`` whose queue offset is in ``[lo, hi)``."""
        positions = record_positions(buf)
        if positions:
            self.chunks.append((buf, positions, lo, hi))
            self.count += len(positions)
            self.nbytes += len(buf)

    # --- columns ------------------------------------------------------------------------------

    def take(self) -> pa.RecordBatch:
        """The accumulated rows as one batch of ``self.schema``; the builder starts over."""
        chunks = self.chunks
        self._reset()
        if not chunks:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        data = b"".join([buf for buf, *_ in chunks] + [_PAD]) if len(chunks) != 1 else chunks[0][0] + _PAD
        raw = np.frombuffer(data, np.uint8)
        bases = np.cumsum([0] + [len(buf) for buf, *_ in chunks[:-1]], dtype=np.int64)
        counts = [len(p) for _, p, _, _ in chunks]
        pos = np.concatenate([np.asarray(p, np.int64) for _, p, _, _ in chunks])
        pos += np.repeat(bases, counts)
        head = _gather(raw, pos, OFF_BODY).view(FIXED_DTYPE).ravel()
        qoff = head["QUEUEOFFSET"]
        keep = (qoff >= np.repeat([lo for *_, lo, _ in chunks], counts)) & (
            qoff < np.repeat([hi for *_, hi in chunks], counts)
        )
        if not keep.all():
            pos, head = pos[keep], head[keep]
        if ((head["MAGICCODE"] != MESSAGE_MAGIC_CODE) | ((head["SYSFLAG"] & _SLOW_FLAGS) != 0)).any():
            return self._take_slow(data, pos)
        n = len(pos)
        cols = _Fast(self, raw, data, pos, head, n)
        arrays = [cols.column(field.name, field.type) for field in self.schema]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        return self._filtered(batch, cols.props)

    def _filtered(self, batch: pa.RecordBatch, props: dict[str, Any] | None = None) -> pa.RecordBatch:
        if self.tag_filter is None or not batch.num_rows:
            return batch
        if props is None:  # the slow path keeps its tags in the batch's own column
            props = {"tags": batch.column("tags")} if "tags" in batch.schema.names else None
        tags = props["tags"] if props is not None else pa.nulls(batch.num_rows, pa.string())
        return batch.filter(pc.fill_null(pc.is_in(tags, pa.array(sorted(self.tag_filter), pa.string())), False))

    def _take_slow(self, data: bytes, pos: Any) -> pa.RecordBatch:
        """Every row through ``decode_record`` (compressed bodies, IPv6 hosts): one Python
        object per message, as the client's consumers decode them."""
        msgs = [decode_record(data, int(p)) for p in pos]
        n = len(msgs)
        values: dict[str, Any] = {
            "topic": [self.topic] * n,
            "broker": [self.broker] * n,
            "queue_id": [self.queue_id] * n,
            "queue_offset": [m.queue_offset for m in msgs],
            "msg_id": [m.msg_id for m in msgs],
            "keys": [m.properties.get(c.KEYS) for m in msgs],
            "tags": [m.properties.get(c.TAGS) for m in msgs],
            "body": [m.body for m in msgs],
            "properties": [[(k, v) for k, v in m.properties.items() if _is_user_property(k)] for m in msgs],
            "born_timestamp": [m.born_timestamp * 1000 for m in msgs],
            "store_timestamp": [m.store_timestamp * 1000 for m in msgs],
            "born_host": [_host_text(*m.born_host) for m in msgs],
            "reconsume_times": [m.reconsume_times for m in msgs],
        }
        names = list(self.schema.names)
        if self.tag_filter is not None and "tags" not in names:
            names.append("tags")
        schema = pa.schema(
            [self.schema.field(x) if x in self.schema.names else pa.field(x, pa.string()) for x in names]
        )
        batch = pa.RecordBatch.from_arrays([pa.array(values[f.name], f.type) for f in schema], schema=schema)
        if self.tag_filter is not None:
            batch = self._filtered(batch)
            return batch.select(self.schema.names)
        return batch


def _is_user_property(name: str) -> bool:
    return name not in SYSTEM_PROPERTIES and not name.startswith(INTERNAL_PROPERTY_PREFIX)


def _host_text(ip: str, port: int) -> str:
    return f"{ip}:{port}"


def _gather(raw: Any, starts: Any, width: int) -> Any:
    """``width`` bytes at each of ``starts`` as one (n, width) uint8 array (a row copy each)."""
    window = as_strided(raw, shape=(len(raw) - width + 1, width), strides=(1, 1), writeable=False)
    return window[starts]


def _view_array(raw: Any, data: bytes, starts: Any, lengths: Any, kind: pa.DataType) -> pa.Array:
    """Rows ``data[starts[i] : starts[i] + lengths[i]]`` as an Arrow array of ``kind``, made from
    a binary-view array over ``data`` (16 bytes per row: length, then the bytes inline up to
    12, else a 4-byte prefix, buffer 0 and the offset) and one cast, which copies the bytes."""
    n = len(starts)
    views = np.zeros((n, 16), np.uint8)
    ints = views.view("<i4")
    ints[:, 0] = lengths
    head = _gather(raw, starts, 12)
    short = lengths <= 12
    views[:, 4:16] = head * (np.arange(12) < lengths[:, None])
    long = ~short
    if long.any():
        ints[long, 2] = 0
        ints[long, 3] = starts[long]
    arr = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(data)])
    return arr.cast(kind)


class _Fast:
    """The columns of one batch of IPv4, uncompressed records, each built when first asked."""

    def __init__(self, owner: ColumnBuilder, raw: Any, data: bytes, pos: Any, head: Any, n: int) -> None:
        self.owner = owner
        self.raw = raw
        self.data = data
        self.pos = pos
        self.head = head
        self.n = n
        self.body_len = head["BODYLENGTH"].astype(np.int64)
        self.props = self._properties() if owner.want_props_text else None

    def _properties_text(self) -> pa.Array:
        raw = self.raw
        after_body = self.pos + OFF_BODY + self.body_len
        topic_len = raw[after_body].astype(np.int8).astype(np.int64)
        at = after_body + 1 + topic_len
        lengths = (raw[at].astype(np.int64) << 8) | raw[at + 1]
        return _view_array(raw, self.data, at + 2, lengths, pa.string())

    def _properties(self) -> dict[str, Any]:
        """Tags, keys, UNIQ_KEY and the user properties of every row, from the properties
        strings, with Arrow kernels and numpy (no per-row Python).  Items without a ``\x01``
        or with an empty name or value are dropped, and a name given twice keeps its last
        value, as ``parse_properties`` does; filters run only when something is dropped."""
        n = self.n
        items = pc.split_pattern(self._properties_text(), "\x02")
        parents = pc.list_parent_indices(items)
        pairs = pc.split_pattern(items.flatten(), "\x01", max_splits=1)
        ok = pc.equal(pc.list_value_length(pairs), 2)
        if not pc.all(ok).as_py():
            pairs, parents = pairs.filter(ok), parents.filter(ok)
        names = pc.list_element(pairs, 0)
        values = pc.list_element(pairs, 1)
        nonempty = pc.and_(pc.greater(pc.binary_length(names), 0), pc.greater(pc.binary_length(values), 0))
        if not pc.all(nonempty).as_py():
            names, values, parents = names.filter(nonempty), values.filter(nonempty), parents.filter(nonempty)
        row_of = parents.to_numpy(zero_copy_only=False)

        def one(name: str) -> pa.Array:
            mask = pc.equal(names, name)
            at = np.full(n, -1, np.int64)
            at[row_of[mask.to_numpy(zero_copy_only=False)]] = np.arange(pc.sum(mask).as_py() or 0)
            return pc.take(values.filter(mask), pa.array(at, mask=at < 0))

        out: dict[str, Any] = {"tags": one(c.TAGS), "keys": one(c.KEYS), "uniq": one(c.UNIQ_KEY)}
        if "properties" in self.owner.names:
            user = pc.invert(pc.or_(pc.is_in(names, _SYSTEM), pc.starts_with(names, INTERNAL_PROPERTY_PREFIX)))
            user_np = user.to_numpy(zero_copy_only=False)
            counts = np.bincount(row_of[user_np], minlength=n)
            map_offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
            out["map"] = (map_offsets, names.filter(user), values.filter(user))
        return out

    def _hosts(self, ip_field: str, port_field: str) -> pa.Array:
        """``ip:port`` per row, formatted once per distinct (ip, port)."""
        ip = self.head[ip_field].view(">u4").astype(np.uint64)
        port = self.head[port_field].astype(np.int64).astype(np.uint64) & 0xFFFFFFFF
        distinct, inverse = np.unique((ip << np.uint64(32)) | port, return_inverse=True)
        cache = self.owner._hosts
        texts = []
        for key in distinct.tolist():
            text = cache.get(key)
            if text is None:
                text = cache[key] = f"{ipv4_text((key >> 32).to_bytes(4, 'big'))}:{key & 0xFFFFFFFF}"
            texts.append(text)
        return pc.take(pa.array(texts, pa.string()), pa.array(inverse.astype(np.int32).ravel()))

    def _offset_ids(self) -> pa.Array:
        """RocketMQ's offset message id (store host, port, CommitLog offset, as hex) per row."""
        raw = self.head.view(np.uint8).reshape(self.n, OFF_BODY)
        host_at = RECORD_FIXED_LAYOUT["STOREHOST_IP"][0]
        phys_at = RECORD_FIXED_LAYOUT["PHYSICALOFFSET"][0]
        id_bytes = np.concatenate([raw[:, host_at : host_at + 8], raw[:, phys_at : phys_at + 8]], axis=1)
        text = np.ascontiguousarray(_HEX[id_bytes]).view("S32").ravel()
        return pa.array(text, pa.binary()).cast(pa.string())

    def column(self, name: str, kind: pa.DataType) -> pa.Array:
        owner, head, n = self.owner, self.head, self.n
        if name == "topic":
            return pa.repeat(pa.scalar(owner.topic, kind), n)
        if name == "broker":
            return pa.repeat(pa.scalar(owner.broker, kind), n)
        if name == "queue_id":
            return pa.repeat(pa.scalar(owner.queue_id, kind), n)
        if name == "queue_offset":
            return pa.array(head["QUEUEOFFSET"].astype(np.int64), kind)
        if name in ("born_timestamp", "store_timestamp"):
            ms = head["BORNTIMESTAMP" if name == "born_timestamp" else "STORETIMESTAMP"].astype(np.int64)
            return pa.array(ms * 1000, pa.int64()).cast(kind)
        if name == "reconsume_times":
            return pa.array(head["RECONSUMETIMES"].astype(np.int32), kind)
        if name == "born_host":
            return self._hosts("BORNHOST_IP", "BORNHOST_PORT").cast(kind)
        if name == "body":
            return _view_array(self.raw, self.data, self.pos + OFF_BODY, self.body_len, kind)
        props = self.props
        assert props is not None
        if name in ("tags", "keys"):
            return props[name].cast(kind)
        if name == "msg_id":
            uniq = props["uniq"]
            if uniq.null_count:
                uniq = pc.if_else(pc.is_null(uniq), self._offset_ids(), uniq)
            return uniq.cast(kind)
        if name == "properties":
            offsets, keys, values = props["map"]
            return pa.MapArray.from_arrays(offsets, keys, values, type=kind)
        return pa.nulls(n, kind)
