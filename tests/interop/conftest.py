"""Interop fixtures: real `apogee namesrv` + `apogee broker` processes and the real C++ client.

The C++ client (PyPI ``rocketmq==0.4.4``, bundling librocketmq 1.2.3) lives in its own virtual
environment, ``.venv-interop``, which ``make test`` builds; its scripts run as subprocesses
and report JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apogee.admin import AdminClient
from apogee.common.constants import parse_delay_levels
from apogee.errors import NoRouteError
from tests.support.names import unique
from tests.support.processes import ServerProcess, start_namesrv
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
INTEROP_PYTHON = ROOT / ".venv-interop" / "bin" / "python"
CPP_CLIENT = Path(__file__).parent / "clients" / "cpp_client.py"


# Short delay levels (RocketMQ's default is "1s 5s 10s 30s 1m ..."): a retry (level 3 and up)
# comes back in a second, and level 2 is still long enough to tell a delayed message from an
# immediate one.  The same number of levels as the default, so no level is out of range.
DELAY_LEVELS = "1s 2s " + " ".join(["1s"] * 16)


def delay_ms(level: int) -> int:
    """The delay of ``level`` on the interop broker (what the delay test asserts against)."""
    return parse_delay_levels(DELAY_LEVELS)[level - 1]


@dataclass
class Cluster:
    namesrv: ServerProcess
    broker: ServerProcess

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create ``topic`` without putting a message in it; return once the NameServer routes it."""

        async def create() -> None:
            async with AdminClient(self.namesrv.addr) as admin:
                await admin.update_topic(topic, self.broker.addr, queues)
                await wait_until(lambda: routed(admin, topic), 10, f"a route for {topic}")

        asyncio.run(create())


async def routed(admin: AdminClient, topic: str) -> bool:
    try:
        return bool((await admin.route(topic)).queue_datas)
    except NoRouteError:
        return False


def start_broker(namesrv_addr: str, store_dir: Path, *extra: str) -> ServerProcess:
    conf = store_dir.parent / "broker.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f"messageDelayLevel={DELAY_LEVELS}\n")
    return ServerProcess(
        ["broker", "-n", namesrv_addr, "-c", str(conf), "--listen", "127.0.0.1:0", "--store-dir", str(store_dir),
         "--broker-ip", "127.0.0.1", *extra]
    ).start()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not INTEROP_PYTHON.exists():
        pytest.fail(f"{INTEROP_PYTHON} is missing: `make test` builds it (rocketmq==0.4.4)")
    base = tmp_path_factory.mktemp("interop")
    namesrv = start_namesrv(base / "namesrv")
    broker = start_broker(namesrv.addr, base / "store")
    try:
        yield Cluster(namesrv, broker)
    finally:
        broker.close()
        namesrv.close()



def aborted_in_shutdown(returncode: int, events: list[dict[str, object]], stderr: str) -> bool:
    """The C++ client 0.4.4's own shutdown race: an abort on an uncaught
    ``boost::thread_interrupted`` *after* the script reported its work finished (the
    ``finished`` event, printed just before ``shutdown()``).  Every result was printed by
    then, so the test still judges all of them; any other exit, or an abort before the work
    was done, fails."""
    return (
        returncode == -signal.SIGABRT
        and any(e.get("event") == "finished" for e in events)
        and "boost::thread_interrupted" in stderr
    )


class CppRun:
    """A running C++ client script; ``events()`` parses its JSON lines."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [str(INTEROP_PYTHON), str(CPP_CLIENT), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/tmp",  # the C++ client writes its logs under $HOME/logs; keep cwd neutral
        )
        self.stdout = ""
        self.stderr = ""
        self._early = ""  # lines read before 'started' (the consumer may receive first)

    def wait(self, timeout: float = 120, *, check: bool = True) -> list[dict]:
        """The events printed; a non-zero exit fails unless ``check`` is False (then see
        ``returncode`` and ``stderr``)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            tail = err.decode(errors="replace")[-3000:]
            raise AssertionError(f"C++ client {self.args} timed out:\n{tail}") from None
        self.stdout = self._early + out.decode(errors="replace")
        self.stderr = err.decode(errors="replace")
        events = [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]
        if check and self.proc.returncode != 0 and not aborted_in_shutdown(self.proc.returncode, events, self.stderr):
            raise AssertionError(
                f"C++ client {self.args} exited {self.proc.returncode}:\n{self.stderr[-3000:]}"
            )
        return events

    def wait_started(self, timeout: float = 30) -> None:
        """Block until the script printed its 'started' event (consumers)."""
        assert self.proc.stdout is not None
        # The C++ consumer's threads can deliver a message before the script prints 'started':
        # keep such lines for wait().
        while True:
            line = self.proc.stdout.readline().decode()
            if '"started"' in line:
                return
            if not line.startswith("{"):
                stderr = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"consumer did not start: {self._early + line!r} {stderr}")
            self._early += line


def cpp(*args: str) -> CppRun:
    return CppRun([str(a) for a in args])


def received(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("event") == "received"]


def sent(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("event") == "sent"]


__all__ = ["Cluster", "cpp", "delay_ms", "received", "sent", "unique", "sys"]
