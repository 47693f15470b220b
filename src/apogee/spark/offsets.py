"""Offset arithmetic of the connector: pure functions, no I/O, no pyspark.

A position in the stream is, per message queue, the *next* queue offset to read (exclusive
end of what was read).  Queues are keyed ``(topic, brokerName, queueId)``; in JSON (Spark's
checkpoint, the ``startingOffsets`` / ``endingOffsets`` options) the same positions nest as
``{"topic": {"brokerName": {"queueId": offset}}}`` with queue ids as strings.  In user input
``-2`` means earliest and ``-1`` latest; they are resolved on the driver before anything is
stored, so checkpoints only ever hold real positions.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from apogee.spark.errors import ApogeeSparkError

EARLIEST = -2
LATEST = -1


class QueueKey(NamedTuple):
    topic: str
    broker: str
    queue_id: int


Flat = dict[QueueKey, int]
"""Positions by queue."""

_SHAPE = '{"topic": {"brokerName": {"queueId": offset}}}'


@dataclass(frozen=True)
class OffsetSpec:
    """A start or end position as the user gave it.

    ``kind`` is ``earliest``, ``latest``, ``json`` (``positions``, -2/-1 allowed) or
    ``timestamp`` (epoch ms, resolved through the broker's search-by-time).
    """

    kind: str
    positions: Mapping[QueueKey, int] = field(default_factory=dict)
    timestamp: int = 0


def parse_offset_spec(name: str, raw: str, *, allow_earliest: bool) -> OffsetSpec:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        if text.lower() == "earliest" and not allow_earliest:
            raise ApogeeSparkError(f"option {name} cannot be earliest")
        return OffsetSpec(text.lower())
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ApogeeSparkError(
            f"option {name} must be earliest, latest or JSON {_SHAPE}; {raw!r} is not valid JSON ({exc})"
        ) from None
    positions = from_json(obj, name)
    lowest = EARLIEST if allow_earliest else LATEST
    for key, value in positions.items():
        if value < lowest:
            allowed = "-2 (earliest), -1 (latest)" if allow_earliest else "-1 (latest)"
            raise ApogeeSparkError(
                f"option {name}: offset {value} of {key.topic}/{key.broker}/{key.queue_id} must be >= 0 or {allowed}"
            )
    return OffsetSpec("json", positions)


def from_json(obj: Any, what: str = "offsets") -> Flat:
    """``{"topic": {"broker": {"qid": n}}}`` (a dict, or its JSON text) to flat positions."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError as exc:
            raise ApogeeSparkError(f"{what} is not valid JSON ({exc}); expected {_SHAPE}") from None
    if not isinstance(obj, dict):
        raise ApogeeSparkError(f"{what} must be a JSON object {_SHAPE}, got {type(obj).__name__}")
    out: Flat = {}
    for topic, brokers in obj.items():
        if not isinstance(brokers, dict):
            raise ApogeeSparkError(f"{what}: topic {topic!r} must map broker names to queues, as in {_SHAPE}")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ApogeeSparkError(f"{what}: {topic}/{broker} must map queue ids to offsets, as in {_SHAPE}")
            for qid, offset in queues.items():
                try:
                    queue_id = int(qid)
                except (TypeError, ValueError):
                    raise ApogeeSparkError(f"{what}: queue id {qid!r} of {topic}/{broker} is not an integer") from None
                if isinstance(offset, bool) or not isinstance(offset, int):
                    raise ApogeeSparkError(
                        f"{what}: offset of {topic}/{broker}/{qid} must be an integer, got {offset!r}"
                    )
                out[QueueKey(str(topic), str(broker), queue_id)] = offset
    return out


def to_json(positions: Mapping[QueueKey, int]) -> dict[str, dict[str, dict[str, int]]]:
    """Flat positions to the nested, JSON-ready form (sorted, so equal positions print equal)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for key in sorted(positions):
        out.setdefault(key.topic, {}).setdefault(key.broker, {})[str(key.queue_id)] = int(positions[key])
    return out


def total(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> int:
    return sum(max(0, end[k] - start.get(k, end[k])) for k in end)


def limit_rows(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int], max_rows: int) -> Flat:
    """``end`` cut so that at most ``max_rows`` messages lie between ``start`` and it.

    The budget is shared in proportion to what each queue has available (as Kafka's
    ``maxOffsetsPerTrigger``), with the remainder given by largest fractional share, so the
    sum is exactly ``max_rows`` whenever more than that is available.  Deterministic.
    """
    avail = {k: max(0, end[k] - start.get(k, end[k])) for k in end}
    available = sum(avail.values())
    if available <= max_rows:
        return dict(end)
    out: Flat = {}
    given = 0
    fractions: list[tuple[float, QueueKey]] = []
    for key in sorted(avail):
        exact = avail[key] * max_rows / available
        whole = min(avail[key], int(exact))
        out[key] = whole
        given += whole
        if whole < avail[key]:
            fractions.append((-(exact - whole), key))
    fractions.sort()
    left = max_rows - given
    for _, key in fractions:
        if left <= 0:
            break
        out[key] += 1
        left -= 1
    return {k: start.get(k, end[k]) + out.get(k, 0) for k in end}


def limit_bytes(
    start: Mapping[QueueKey, int], end: Mapping[QueueKey, int], sizes: Mapping[QueueKey, float], max_bytes: int
) -> Flat:
    """``end`` cut so that the estimated bytes (messages x average size of each queue) stay
    within ``max_bytes``; at least one message is admitted when any is available, so a
    budget smaller than one message still makes progress."""
    avail = {k: max(0, end[k] - start.get(k, end[k])) for k in end}
    bytes_avail = {k: avail[k] * max(1.0, float(sizes.get(k, 1.0))) for k in avail}
    total_bytes = sum(bytes_avail.values())
    if total_bytes <= max_bytes:
        return dict(end)
    out: Flat = {}
    for key in sorted(avail):
        share = bytes_avail[key] * max_bytes / total_bytes
        out[key] = min(avail[key], int(share // max(1.0, float(sizes.get(key, 1.0)))))
    if sum(out.values()) == 0:
        first = next((k for k in sorted(avail) if avail[k] > 0), None)
        if first is not None:
            out[first] = 1
    return {k: start.get(k, end[k]) + out.get(k, 0) for k in end}


def clamp(end: Mapping[QueueKey, int], cap: Mapping[QueueKey, int], start: Mapping[QueueKey, int]) -> Flat:
    """``end`` no further than ``cap`` (the AvailableNow target); queues the cap does not know
    (found after the target was taken) stay where they start."""
    out: Flat = {}
    for key, value in end.items():
        if key in cap:
            out[key] = max(start.get(key, 0), min(value, cap[key])) if key in start else min(value, cap[key])
        else:
            out[key] = start.get(key, value)
    return out


class Slice(NamedTuple):
    key: QueueKey
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_slices(
    ranges: Iterable[tuple[QueueKey, int, int]], *, max_per_slice: int, min_slices: int | None = None
) -> list[Slice]:
    """Contiguous offset slices covering ``ranges``: each range cut into pieces of at most
    ``max_per_slice``, then the largest pieces halved until there are ``min_slices``.
    Deterministic: the same ranges give the same slices (recovery re-plans a batch)."""
    slices: list[Slice] = []
    for key, start, end in sorted(ranges):
        if end <= start:
            continue
        n = -(-(end - start) // max_per_slice)
        step = -(-(end - start) // n)
        for s in range(start, end, step):
            slices.append(Slice(key, s, min(end, s + step)))
    if min_slices and slices and len(slices) < min_slices:
        heap = [(-s.size, s.key, s.start, s) for s in slices]
        heapq.heapify(heap)
        while len(heap) < min_slices:
            neg, _, _, big = heapq.heappop(heap)
            if -neg < 2:
                heapq.heappush(heap, (neg, big.key, big.start, big))
                break
            mid = big.start + big.size // 2
            for part in (Slice(big.key, big.start, mid), Slice(big.key, mid, big.end)):
                heapq.heappush(heap, (-part.size, part.key, part.start, part))
        slices = [item[3] for item in heap]
    slices.sort(key=lambda s: (s.key, s.start))
    return slices
