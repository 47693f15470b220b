"""CPU cost of one request through ``Connection`` on each side, without sockets.

The path every W1 send takes twice (client and broker): ``data_received`` → decoder →
dispatch → answer → ``_write`` → end of the loop turn.  A transport that only records writes
stands in for the socket, so what is timed is the connection's own bookkeeping, steady
enough to compare two versions of the code on a busy machine:

  server  a request frame arrives, a processor answers a FieldsAnswer (a send's answer)
  client  invoke_fields writes a request, its response frame arrives and resolves the future
  large   W2's traffic on the broker: 500 KB frames (an auto-batched send) arriving in reads
          of 256 KiB, so most reads end inside a frame (figure per frame)

Each figure is the best of --repeat runs of --n requests, in ns of CPU time (process_time,
which leaves out the time other processes hold the CPU) per request.

Run:  .venv/bin/python benchmarks/connection_bench.py [--n 200000] [--repeat 7]
      (PYTHONPATH=<old checkout>/src to time another version)
"""

from __future__ import annotations

import argparse
import asyncio
import time

import apogee
from apogee.remoting.codec import encode_bytes
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.config import RemotingConfig
from apogee.remoting.connection import Connection
from apogee.remoting.loop import run
from apogee.remoting.server import FieldsAnswer, RemotingServer, RequestDispatcher


class NullTransport:
    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += 1

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


ANSWER = FieldsAnswer(0, ("msgId", "queueId", "queueOffset"), ("0A0000010000000000000000", 1, 12345))


def server_connection() -> Connection:
    dispatcher = RequestDispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE_V2, lambda conn, req: ANSWER)
    server = RemotingServer(dispatcher, RemotingConfig())
    conn = server._make_connection()  # what the listening socket creates, limits included
    assert isinstance(conn, Connection)
    conn.connection_made(NullTransport())  # type: ignore[arg-type]
    return conn


async def time_server(n: int) -> float:
    conn = server_connection()
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "T", "c": "x"}, b"x" * 1024)
    frame = encode_bytes(request)
    start = time.process_time()
    for _ in range(n):
        conn.data_received(frame)
        await asyncio.sleep(0)  # the turn ends
    return (time.process_time() - start) / n * 1e9


async def time_large(n: int) -> float:
    conn = server_connection()
    frame = encode_bytes(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "T"}, b"x" * 500_000))
    stream = frame * 8
    reads = [stream[i : i + 256 * 1024] for i in range(0, len(stream), 256 * 1024)]
    start = time.process_time()
    for _ in range(n // 8):
        for data in reads:
            conn.data_received(data)
        await asyncio.sleep(0)
    return (time.process_time() - start) / (n // 8 * 8) * 1e9


async def time_client(n: int) -> float:
    conn = Connection(None, RemotingConfig())
    conn.connection_made(NullTransport())  # type: ignore[arg-type]
    keys, values, body = ("a", "b", "c"), ("g", "T", "x"), b"x" * 1024
    answers = []
    for opaque in range(n):
        cmd = RemotingCommand(code=0, ext_fields={"msgId": "0A", "queueId": "1", "queueOffset": "5"})
        cmd.opaque = opaque
        cmd.flag = 1
        answers.append(encode_bytes(cmd))
    start = time.process_time()
    for i in range(n):
        future = conn.invoke_fields(RequestCode.SEND_MESSAGE_V2, keys, values, body, 3000)
        conn.data_received(answers[i])
        await future
        await asyncio.sleep(0)
    return (time.process_time() - start) / n * 1e9


async def baseline(n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        await asyncio.sleep(0)
    return (time.process_time() - start) / n * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    async def bench() -> None:
        loop_ns = min([await baseline(args.n) for _ in range(args.repeat)])
        server = min([await time_server(args.n) for _ in range(args.repeat)])
        client = min([await time_client(args.n) for _ in range(args.repeat)])
        large = min([await time_large(max(8, args.n // 100)) for _ in range(args.repeat)])
        print(f"{apogee.__file__}: server {server - loop_ns:.0f} ns/request, client {client - loop_ns:.0f} "
              f"ns/request (a loop turn, {loop_ns:.0f} ns, taken out); large {large / 1000:.1f} us/frame")

    run(bench())


if __name__ == "__main__":
    main()
