"""PULL response bodies to Arrow record batches, column by column.

A pull body is stored records back to back (layout in ``apogee.common.message_codec``, whose
``RECORD_FIXED`` struct and field offsets are used here).  Building one ``MessageExt`` per
message and then converting rows would cost more than the network, so the per-record Python
work is kept to the minimum: one ``struct`` unpack of the fixed header and two
``memoryview`` slices (body, properties).  Everything else is columnar: numbers become Arrow
arrays straight from the unpacked tuples, bodies are joined once into one Arrow binary
buffer, and the properties strings are split into tags, keys, message id and the user
``properties`` map by Arrow compute kernels.  Columns the query did not ask for are not built.

Only records whose queue offset lies in the slice being read are kept (pipelined pulls may
overlap), and with a tag filter only records whose tag is in the set: the broker filters by
tag *hash*, so an exact check is needed here.
"""

from __future__ import annotations

import socket
import struct
from array import array
from itertools import accumulate
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from apogee.common import constants as c
from apogee.common.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    OFF_BODY,
    RECORD_FIXED,
    decode_record,
    properties_to_string,
)
from apogee.spark.schema import INTERNAL_PROPERTY_PREFIX, SYSTEM_PROPERTIES

_SIZE_MAGIC = struct.Struct(">ii")
_MAX_BODY_BYTES = 1 << 30  # int32 Arrow offsets: flush a batch well before 2 GiB
_SLOW_FLAGS = c.COMPRESSED_FLAG | c.BORNHOST_V6_FLAG | c.STOREHOSTADDRESS_V6_FLAG
_SYSTEM = pa.array(sorted(SYSTEM_PROPERTIES), pa.string())

# The fields of RECORD_FIXED this decoder uses (the others are skipped as pad bytes): TOTALSIZE,
# MAGICCODE, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP, BORNHOST, STORETIMESTAMP,
# STOREHOST, RECONSUMETIMES, BODYLENGTH.
_HEAD = struct.Struct(">ii12xqqiq4siq4sii8xi")
assert _HEAD.size == RECORD_FIXED.size
_TOTAL, _MAGIC, _QOFF, _PHYS, _SYSFLAG, _BORN_TS, _BORN_IP, _BORN_PORT, _STORE_TS, _STORE_IP, _STORE_PORT = range(11)
_RECONSUME, _BODY_LEN = 11, 12


class ColumnBuilder:
    """Accumulates decoded records of one queue slice; ``take()`` returns a RecordBatch."""

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
        self.want_body = "body" in self.names
        self.want_props_text = bool(self.names & {"properties", "msg_id", "keys", "tags"}) or bool(tag_filter)
        self._hosts: dict[tuple[Any, int], str] = {}
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self.body_bytes = 0
        self.heads: list[tuple[Any, ...]] = []
        self.bodies: list[Any] = []
        self.props: list[Any] = []

    @property
    def full(self) -> bool:
        return self.body_bytes >= _MAX_BODY_BYTES

    def add(self, buf: bytes, lo: int, hi: int) -> None:
        """Add the records of ``buf`` whose queue offset is in ``[lo, hi)``."""
        view = memoryview(buf)
        unpack_fixed = _HEAD.unpack_from
        heads_append = self.heads.append
        bodies_append = self.bodies.append
        props_append = self.props.append
        want_body = self.want_body
        want_props = self.want_props_text
        body_bytes = 0
        pos, end = 0, len(buf)
        while pos + 8 <= end:
            fixed = unpack_fixed(buf, pos)
            total = fixed[0]
            if total <= 0 or fixed[_MAGIC] == BLANK_MAGIC_CODE:
                break
            if pos + total > end:
                raise ValueError(f"truncated record at {pos} of a {end}-byte pull body")
            qoff = fixed[_QOFF]
            if lo <= qoff < hi:
                if fixed[_MAGIC] != MESSAGE_MAGIC_CODE or fixed[_SYSFLAG] & _SLOW_FLAGS:
                    self._add_slow(buf, pos)
                else:
                    body_len = fixed[_BODY_LEN]
                    p = pos + OFF_BODY + body_len
                    heads_append(fixed)
                    if want_body:
                        bodies_append(view[pos + OFF_BODY : p])
                        body_bytes += body_len
                    if want_props:
                        props_at = p + 1 + buf[p]
                        props_append(view[props_at + 2 : props_at + 2 + ((buf[props_at] << 8) | buf[props_at + 1])])
            pos += total
        self.body_bytes += body_bytes
        self.count = len(self.heads)

    def _add_slow(self, buf: bytes, pos: int) -> None:
        """A compressed body or IPv6 hosts: the shared full decoder, in the same row shape."""
        msg = decode_record(buf, pos)
        born_ip: Any = msg.born_host[0]
        store_ip: Any = msg.store_host[0]
        fixed = (
            msg.store_size,
            MESSAGE_MAGIC_CODE,
            msg.queue_offset,
            msg.commit_log_offset,
            msg.sys_flag,
            msg.born_timestamp,
            born_ip,
            msg.born_host[1],
            msg.store_timestamp,
            store_ip,
            msg.store_host[1],
            msg.reconsume_times,
            len(msg.body),
        )
        self.heads.append(fixed)
        if self.want_body:
            self.bodies.append(msg.body)
            self.body_bytes += len(msg.body)
        if self.want_props_text:
            self.props.append(properties_to_string(msg.properties).encode("utf-8"))

    # --- columns ------------------------------------------------------------------------------

    def take(self) -> pa.RecordBatch:
        """The accumulated rows as one batch of ``self.schema``; the builder starts over."""
        n = len(self.heads)
        cols = _Columns(self.heads)
        props = self._properties(n) if self.want_props_text else None
        arrays = [self._column(field.name, field.type, n, cols, props) for field in self.schema]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if self.tag_filter is not None and n:
            tags = props["tags"] if props is not None else pa.nulls(n, pa.string())
            batch = batch.filter(pc.fill_null(pc.is_in(tags, pa.array(sorted(self.tag_filter), pa.string())), False))
        self._reset()
        return batch

    def _properties(self, n: int) -> dict[str, Any]:
        """Tags, keys, UNIQ_KEY and the user properties of every row, from the properties
        strings, with Arrow kernels (no per-row Python)."""
        lengths = [len(p) for p in self.props]
        offsets = array("i", accumulate(lengths, initial=0))
        text = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(self.props))])
        items = pc.split_pattern(text, "\x02")
        parents = pc.list_parent_indices(items)
        pairs = pc.split_pattern(items.flatten(), "\x01", max_splits=1)
        ok = pc.equal(pc.list_value_length(pairs), 2)
        pairs, parents = pairs.filter(ok), parents.filter(ok)
        names = pc.list_element(pairs, 0)
        values = pc.list_element(pairs, 1)
        nonempty = pc.and_(pc.greater(pc.utf8_length(names), 0), pc.greater(pc.utf8_length(values), 0))
        names, values, parents = names.filter(nonempty), values.filter(nonempty), parents.filter(nonempty)
        rows = pa.array(range(n), pa.int64())

        def one(name: str) -> pa.Array:
            mask = pc.equal(names, name)
            where = pc.index_in(rows, value_set=parents.filter(mask))
            return pc.take(values.filter(mask), where)

        out: dict[str, Any] = {"tags": one(c.TAGS), "keys": one(c.KEYS), "uniq": one(c.UNIQ_KEY)}
        if "properties" in self.names:
            user = pc.invert(pc.or_(pc.is_in(names, _SYSTEM), pc.starts_with(names, INTERNAL_PROPERTY_PREFIX)))
            user_parents = parents.filter(user).to_pylist()
            counts = [0] * (n + 1)
            for parent in user_parents:
                counts[parent + 1] += 1
            map_offsets = pa.array(array("i", accumulate(counts)), pa.int32())
            out["map"] = (map_offsets, names.filter(user), values.filter(user))
        return out

    def _hosts_of(self, ips: list[Any], ports: list[int]) -> list[str]:
        hosts = self._hosts
        pairs = list(zip(ips, ports, strict=True))
        for ip, port in set(pairs) - hosts.keys():
            text = socket.inet_ntoa(ip) if isinstance(ip, bytes) else str(ip)
            hosts[(ip, port)] = f"{text}:{port}"
        return list(map(hosts.__getitem__, pairs))

    def _column(self, name: str, kind: pa.DataType, n: int, cols: _Columns, props: dict[str, Any] | None) -> pa.Array:
        if name == "topic":
            return pa.repeat(pa.scalar(self.topic, kind), n)
        if name == "broker":
            return pa.repeat(pa.scalar(self.broker, kind), n)
        if name == "queue_id":
            return pa.repeat(pa.scalar(self.queue_id, kind), n)
        if name == "queue_offset":
            return pa.array(cols[_QOFF], kind)
        if name in ("born_timestamp", "store_timestamp"):
            ms = pa.array(cols[_BORN_TS if name == "born_timestamp" else _STORE_TS], pa.int64())
            return pc.multiply(ms, 1000).cast(kind)
        if name == "reconsume_times":
            return pa.array(cols[_RECONSUME], kind)
        if name == "born_host":
            return pa.array(self._hosts_of(cols[_BORN_IP], cols[_BORN_PORT]), kind)
        if name == "body":
            offsets = array("i", accumulate(cols[_BODY_LEN], initial=0))
            data = b"".join(self.bodies)
            if len(self.bodies) == n and offsets[-1] != len(data):  # an inflated body: real lengths
                offsets = array("i", accumulate((len(b) for b in self.bodies), initial=0))
            return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        assert props is not None
        if name in ("tags", "keys"):
            return props[name].cast(kind)
        if name == "msg_id":
            uniq = props["uniq"]
            if uniq.null_count:
                fallback = [
                    _offset_id(ip, port, phys)
                    for ip, port, phys in zip(cols[_STORE_IP], cols[_STORE_PORT], cols[_PHYS], strict=True)
                ]
                uniq = pc.fill_null(uniq, pa.array(fallback, pa.string()))
            return uniq.cast(kind)
        if name == "properties":
            offsets, keys, values = props["map"]
            return pa.MapArray.from_arrays(offsets, keys, values, type=kind)
        return pa.nulls(n, kind)


class _Columns:
    """Columns of the unpacked record headers, each built only when first used."""

    def __init__(self, heads: list[tuple[Any, ...]]) -> None:
        self.heads = heads
        self._cache: dict[int, list[Any]] = {}

    def __getitem__(self, index: int) -> list[Any]:
        col = self._cache.get(index)
        if col is None:
            col = self._cache[index] = [h[index] for h in self.heads]
        return col


def _offset_id(ip: Any, port: int, phys: int) -> str:
    if isinstance(ip, bytes):
        return (ip + port.to_bytes(4, "big") + phys.to_bytes(8, "big")).hex().upper()
    raw = socket.inet_pton(socket.AF_INET6, ip) + struct.pack(">Iq", port, phys)
    return raw.hex().upper()
