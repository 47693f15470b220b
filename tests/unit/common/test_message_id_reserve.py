"""UNIQ_KEYs reserved in blocks (the Spark sink's) come from the same generator as single ids."""

from __future__ import annotations

from apogee.common.uniq_id import UniqIdGenerator


def test_reserved_ids_are_unique_in_the_java_layout_and_never_repeat_the_single_ones() -> None:
    gen = UniqIdGenerator("10.0.0.1", pid=3)
    singles = [gen.next_id() for _ in range(10)]
    blocks = gen.reserve(70_000)  # more than one millisecond's 65,536 counter values
    assert sum(k for _, _, k in blocks) == 70_000 and all(k <= 0x10000 for _, _, k in blocks)
    assert all(head.startswith(gen.bulk_prefix) and len(head) == 28 for head, _, _ in blocks)
    assert gen.bulk_prefix[:12] == gen.prefix[:12] and gen.bulk_prefix != gen.prefix  # same IP and PID
    taken = gen.take(5) + [gen.next_id()]
    ids = [f"{head}{first + i:04X}" for head, first, k in blocks for i in range(k)]
    everything = singles + ids + taken
    assert len(set(everything)) == len(everything) and all(len(i) == 32 for i in everything)
    assert [int(i[-4:], 16) for i in ids[:3]] == [0, 1, 2]  # a millisecond's first reservation


def test_ensure_keeps_a_given_key_and_sets_a_missing_one() -> None:
    gen = UniqIdGenerator("10.0.0.1", pid=3)
    props = {"UNIQ_KEY": "MINE"}
    assert gen.ensure(props) == "MINE"
    empty: dict[str, str] = {}
    new = gen.ensure(empty)
    assert empty == {"UNIQ_KEY": new} and len(new) == 32
