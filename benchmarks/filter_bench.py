"""SQL92 filter evaluations per second: compiled closure on property dicts, and the whole
``SqlMessageFilter.is_matched_by_commit_log`` path on stored records.

Run: .venv/bin/python benchmarks/filter_bench.py [--seconds 1.0] [--runs 5]
Prints the median of several timed runs.  Time is this process's CPU time (``process_time``),
not wall time, so other work on a shared machine disturbs the figures less; compare ratios
within one run all the same.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from apogee.common.message_codec import encode_record, parse_properties
from apogee.filter import SqlMessageFilter, compile_sql92, record_properties_text
from apogee.filter.sql92 import evaluate, parse

EXPRESSIONS = [
    "a > 5 AND b IN ('x','y') AND TAGS = 'TagA'",
    "TAGS = 'TagA'",
    "(region = 'eu' OR region = 'us') AND price BETWEEN 10.0 AND 99.5 AND NOT (vip IS NULL)",
]

# What a real producer sends: system properties plus a few user properties.
BASE = {
    "UNIQ_KEY": "7F000001A1B2C3D4E5F60718293A4B5C",
    "WAIT": "true",
    "KEYS": "order-42",
    "TAGS": "TagA",
}
MESSAGES = [
    {**BASE, "a": "7", "b": "x", "region": "eu", "price": "42.5", "vip": "1"},  # matches everything
    {**BASE, "a": "3", "b": "y", "region": "us", "price": "120"},
    {**BASE, "TAGS": "TagB", "a": "9", "b": "z", "region": "cn", "price": "5"},
    {**BASE, "a": "12", "b": "y", "region": "eu", "price": "80", "vip": "0"},
]


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls of ``fn`` per second (each call evaluates every message of MESSAGES once)."""
    n = 0
    start = time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(200):
            fn()
        n += 200
        now = time.process_time()
        if now >= deadline:
            return n * len(MESSAGES) / (now - start)


def median_rate(fn: Callable[[], object], seconds: float, runs: int) -> float:
    return statistics.median(rate(fn, seconds) for _ in range(runs))


def cases(expression: str, records: list[memoryview]) -> list[tuple[str, Callable[[], object]]]:
    compiled = compile_sql92(expression)
    matches = compiled.matches
    tree = parse(expression)
    on_record = SqlMessageFilter(expression).is_matched_by_commit_log

    def closure() -> None:
        for p in MESSAGES:
            matches(p)

    def reference() -> None:
        for p in MESSAGES:
            evaluate(tree, p)

    def commit_log() -> None:
        for r in records:
            on_record(r)

    def full_decode() -> None:  # the obvious alternative: decode every property
        for r in records:
            matches(parse_properties(record_properties_text(r)))

    return [
        ("compiled closure, property dict", closure),
        ("reference tree walk, property dict", reference),
        ("is_matched_by_commit_log, record", commit_log),
        ("same, all properties decoded", full_decode),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    records = [
        memoryview(encode_record(topic="TopicTest", body=b"x" * 1024, properties=p, physical_offset=i))
        for i, p in enumerate(MESSAGES)
    ]
    print(f"{'expression':<60}{'path':<36}{'evals/s (median)':>18}")
    for expression in EXPRESSIONS:
        label = expression if len(expression) <= 58 else expression[:55] + "..."
        for name, fn in cases(expression, records):
            print(f"{label:<60}{name:<36}{median_rate(fn, args.seconds, args.runs):>18,.0f}")
            label = ""
    t0 = time.process_time()
    n = 0
    while time.process_time() - t0 < args.seconds:
        for expression in EXPRESSIONS:
            parse(expression)
            n += 1
    print(f"{'parse + check (uncached), expressions/s':<96}{n / (time.process_time() - t0):>18,.0f}")


if __name__ == "__main__":
    main()
