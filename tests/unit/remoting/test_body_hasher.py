"""The hasher thread (remoting/body_hasher.py): bodies fed off the loop, results back on the
loop in submission order, a failure handed to the request it belongs to."""

from __future__ import annotations

import asyncio
import threading

import pytest

from apogee.remoting.body_hasher import BodyHasher
from apogee.remoting.codec import body_size
from apogee.remoting.signing import Keyed


async def test_bodies_are_hashed_on_another_thread_and_answered_on_the_loop_in_order() -> None:
    keyed = Keyed("12345678")
    hasher = BodyHasher()
    loop = asyncio.get_running_loop()
    bodies = [bytes([i]) * (200_000 + i) for i in range(6)]
    answered: list[tuple[int, str, bool]] = []
    all_done = loop.create_future()
    feeding_threads: set[int] = set()

    class Recording:  # a hash that notes which thread feeds it
        def __init__(self, mac: object) -> None:
            self.mac = mac

        def update(self, data: bytes) -> None:
            feeding_threads.add(threading.get_ident())
            self.mac.update(data)  # type: ignore[attr-defined]

    for i, body in enumerate(bodies):
        mac = Recording(keyed.begin(b"head"))

        def done(error: BaseException | None, i: int = i, mac: Recording = mac) -> None:
            assert error is None
            answered.append((i, keyed.finish(mac.mac), threading.get_ident() == loop_thread))
            if len(answered) == len(bodies):
                all_done.set_result(None)

        hasher.submit(mac, body, loop, done)
    loop_thread = threading.get_ident()
    await asyncio.wait_for(all_done, 10)
    assert [i for i, _, _ in answered] == list(range(len(bodies)))
    assert [sig for _, sig, _ in answered] == [keyed.sign(b"head", body) for body in bodies]
    assert all(on_loop for _, _, on_loop in answered)
    assert feeding_threads and loop_thread not in feeding_threads


async def test_a_failing_hash_is_reported_to_its_request_and_the_next_ones_go_on() -> None:
    hasher = BodyHasher()
    loop = asyncio.get_running_loop()
    results: list[BaseException | None] = []
    finished = asyncio.Event()

    class Broken:
        def update(self, data: bytes) -> None:
            raise MemoryError("no room")

    def note(error: BaseException | None) -> None:
        results.append(error)
        if len(results) == 2:
            finished.set()

    hasher.submit(Broken(), b"x" * 10, loop, note)
    hasher.submit(Keyed("12345678").begin(b""), b"x" * 10, loop, note)
    await asyncio.wait_for(finished.wait(), 10)
    assert isinstance(results[0], MemoryError) and results[1] is None


def test_body_size_counts_every_shape_of_body() -> None:
    assert body_size(None) == 0
    assert body_size(b"abc") == 3 and body_size(bytearray(4)) == 4
    assert body_size(memoryview(b"abcdef")[1:]) == 5
    assert body_size([b"ab", memoryview(b"cde")]) == 5


def test_a_forked_child_hashes_with_a_thread_of_its_own() -> None:
    """The parent's thread does not exist in a forked child: the child's first job starts one."""
    import os

    from apogee.remoting.body_hasher import HASHER

    async def hash_once() -> str:
        keyed = Keyed("12345678")
        mac = keyed.begin(b"")
        done = asyncio.get_running_loop().create_future()
        HASHER.submit(mac, b"x" * 100_000, asyncio.get_running_loop(), done.set_result)
        assert await asyncio.wait_for(done, 10) is None
        return keyed.finish(mac)

    expected = asyncio.run(hash_once())  # the thread runs in this process now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if it got the same signature
        try:
            os._exit(0 if asyncio.run(hash_once()) == expected else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_cores_counted_are_those_the_process_may_run_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one core (a container's CPU set) large bodies stay on the loop: the thread would
    only take turns with it.  ``BACKGROUND_MIN_BYTES`` is set from this at import."""
    from apogee.remoting import body_hasher

    monkeypatch.setattr(body_hasher.os, "sched_getaffinity", lambda pid: {3})
    assert body_hasher._cores() == 1
    monkeypatch.setattr(body_hasher.os, "sched_getaffinity", lambda pid: {0, 1})
    assert body_hasher._cores() == 2
