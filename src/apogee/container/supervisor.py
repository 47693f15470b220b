"""The container's supervisor: one ``apogee broker`` child process per broker.

It starts every broker, waits for each one's ready line, prints its own, and then only
watches: a broker that dies is started again (``backoff``), the others never notice; a
SIGTERM or SIGINT is passed to every broker and the container exits once they have all
stopped, with status 0 when every one stopped cleanly.  It handles no message and no
request: each broker serves its own port on its own core, so the supervisor costs nothing
per message (it only relays the brokers' log lines, prefixed with their names).

Each child runs in a session of its own, so a Ctrl-C in a terminal reaches the supervisor
alone, which stops the brokers in order rather than racing them; and on Linux each child
asks the kernel for a SIGTERM when the supervisor dies (``PR_SET_PDEATHSIG``), so a
SIGKILLed container leaves no broker running without it.  The brokers are not pinned to
cores: the kernel spreads runnable processes over idle cores by itself, and pinning would
tie each broker's I/O thread to its event loop's core (docs/multicore.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from apogee.common.atomic_file import write_atomic
from apogee.container.backoff import RestartBackoff
from apogee.container.plan import BrokerSpec, child_args

log = logging.getLogger("apogee.container")

_READY = re.compile(rb"ready on (\S+):(\d+)")
_LINE_LIMIT = 1 << 20  # longest log line relayed whole
_PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_S = 60.0


def write_derived_configs(specs: Sequence[BrokerSpec]) -> None:
    """Write each derived broker's broker.conf (a listed broker's file is the operator's)."""
    for spec in specs:
        if spec.config_text is not None:
            write_atomic(spec.config_path, spec.config_text.encode("utf-8"), keep_backup=False)


def _parent_death_signal() -> Callable[[], None] | None:
    """A function a child runs before exec so the kernel sends it SIGTERM when the
    supervisor dies (Linux); None elsewhere.  The C function is looked up here, in the
    parent, so the child between fork and exec only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_it() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the supervisor died before the call: nobody to signal us
            os._exit(1)

    return set_it


class BrokerChild:
    """One broker of the container: its current process, where it serves, its restarts."""

    def __init__(self, spec: BrokerSpec, backoff: RestartBackoff) -> None:
        self.spec = spec
        self.backoff = backoff
        self.proc: asyncio.subprocess.Process | None = None
        self.addr = ""  # HOST:PORT of its ready line
        # A broker given port 0 binds a free port; a restart binds that same one, so clients
        # and the NameServer find it where it was.
        self.listen: str | None = None
        self.starts = 0
        self.first_ready: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.prefix = f"[{spec.label}] ".encode()

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0


class Supervisor:
    """Runs ``specs`` as child processes until asked to stop (``run``)."""

    def __init__(
        self,
        specs: Sequence[BrokerSpec],
        *,
        namesrv: str = "",
        broker_ip: str = "",
        log_level: str = "INFO",
        stop_timeout_s: float = STOP_TIMEOUT_S,
        program: Sequence[str] = (sys.executable, "-m", "apogee"),
    ) -> None:
        self.specs = list(specs)
        self.namesrv, self.broker_ip, self.log_level = namesrv, broker_ip, log_level
        self.stop_timeout_s = stop_timeout_s
        self.program = list(program)
        self.children: list[BrokerChild] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[int]] = []
        self._relays: set[asyncio.Task[None]] = set()  # referenced until done
        self._preexec = _parent_death_signal()

    def request_stop(self) -> None:
        """SIGTERM/SIGINT: stop every broker (``run`` returns once they have)."""
        if not self._stop.is_set():
            log.info("stopping %d brokers", len(self.children))
        self._stop.set()

    async def run(self, on_ready: Callable[[str], None]) -> int:
        """Start the brokers, call ``on_ready`` with the ready line, supervise until a stop
        is requested; the exit status: 0 when every broker stopped cleanly, a broker's own
        status when one could not start (3: its config, 4: its port), else 1."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop)
        self.children = [BrokerChild(spec, RestartBackoff()) for spec in self.specs]
        self._tasks = [asyncio.create_task(self._supervise(child)) for child in self.children]
        failed = await self._wait_started()
        if failed is not None:
            self.request_stop()
            await self._stop_all()
            code = failed.proc.returncode if failed.proc is not None else None
            return code if code is not None and 0 < code < 128 else 1
        if not self._stop.is_set():
            on_ready(self.ready_line())
            await self._stop.wait()
        return await self._stop_all()

    def ready_line(self) -> str:
        brokers = "; ".join(f"{c.spec.label} {c.addr} pid {c.pid}" for c in self.children)
        return f"apogee broker-container ready on {self.children[0].addr} ({len(self.children)} brokers: {brokers})"

    async def _wait_started(self) -> BrokerChild | None:
        """Wait until every broker printed its ready line (None), one exited before it did
        (that one), or a stop was requested (None)."""
        stop: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
        pending: set[asyncio.Future[Any]] = {stop, *(c.first_ready for c in self.children)}
        try:
            while len(pending) > 1 and not stop.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for child in self.children:
                    if child.first_ready in done and not child.first_ready.result():
                        log.error("broker %s exited with status %s before it was ready: the container stops",
                                  child.spec.label, child.proc.returncode if child.proc else None)
                        return child
        finally:
            stop.cancel()
        return None

    async def _supervise(self, child: BrokerChild) -> int:
        """Run ``child`` until the container stops, starting it again whenever it dies;
        returns its last exit status."""
        loop = asyncio.get_running_loop()
        code = 0
        while not self._stop.is_set():
            started = loop.time()
            try:
                proc = await self._spawn(child)
            except OSError as exc:  # no such interpreter, too many processes, ...
                log.error("broker %s could not be started: %s", child.spec.label, exc)
                if not child.first_ready.done():
                    child.first_ready.set_result(False)
                    return 1
                code = 1
                await self._pause(child.backoff.delay_after(0.0))
                continue
            if await self._read_ready(child, proc):
                if child.first_ready.done():
                    log.warning("broker %s is back on %s (pid %d, start %d)",
                                child.spec.label, child.addr, proc.pid, child.starts)
                else:
                    child.first_ready.set_result(True)
            code = await proc.wait()
            if self._stop.is_set():
                break
            if not child.first_ready.done():
                child.first_ready.set_result(False)
                break
            delay = child.backoff.delay_after(loop.time() - started)
            log.warning("broker %s (pid %d) exited with status %d after %.1f s; starting it again in %.1f s",
                        child.spec.label, proc.pid, code, loop.time() - started, delay)
            await self._pause(delay)
        return code

    async def _pause(self, delay_s: float) -> None:
        """Wait ``delay_s``, or less when the container is asked to stop meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), delay_s)

    async def _spawn(self, child: BrokerChild) -> asyncio.subprocess.Process:
        args = child_args(child.spec, listen=child.listen, namesrv=self.namesrv, broker_ip=self.broker_ip,
                          log_level=self.log_level)
        child.proc = proc = await asyncio.create_subprocess_exec(
            *self.program, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=self._preexec, limit=_LINE_LIMIT,
        )
        child.starts += 1
        log.info("broker %s started (pid %d): %s", child.spec.label, proc.pid, " ".join(args))
        assert proc.stderr is not None
        self._start_relay(proc.stderr, child.prefix)
        if self._stop.is_set():  # the stop came while it was being started: its signal missed it
            proc.send_signal(signal.SIGTERM)
        return proc

    async def _read_ready(self, child: BrokerChild, proc: asyncio.subprocess.Process) -> bool:
        """Read the child's stdout up to its ready line (True) or its end (False); anything
        after the ready line is relayed like its log."""
        assert proc.stdout is not None
        while line := await _read_line(proc.stdout):
            match = _READY.search(line)
            if match is None:
                _write_err(child.prefix + line)
                continue
            host, port = match.group(1).decode(), int(match.group(2))
            child.addr = f"{host}:{port}"
            if child.spec.listen_port == 0:
                child.listen = child.addr
            self._start_relay(proc.stdout, child.prefix)
            return True
        return False

    def _start_relay(self, stream: asyncio.StreamReader, prefix: bytes) -> None:
        """Copy ``stream``'s lines to our stderr, each prefixed with the broker's name."""

        async def relay() -> None:
            while line := await _read_line(stream):
                _write_err(prefix + line)

        task = asyncio.create_task(relay())
        self._relays.add(task)
        task.add_done_callback(self._relays.discard)

    async def _stop_all(self) -> int:
        """SIGTERM every running broker, wait for all (SIGKILL after ``stop_timeout_s``),
        and return 0 when every one exited 0, else 1."""
        for child in self.children:
            if child.proc is not None and child.proc.returncode is None:
                child.proc.send_signal(signal.SIGTERM)
        done, pending = await asyncio.wait(self._tasks, timeout=self.stop_timeout_s)
        if pending:
            for child in self.children:
                if child.proc is not None and child.proc.returncode is None:
                    log.error("broker %s (pid %d) did not stop within %.0f s: killed",
                              child.spec.label, child.proc.pid, self.stop_timeout_s)
                    child.proc.kill()
            await asyncio.wait(pending)
        if self._relays:  # their last log lines
            await asyncio.wait(list(self._relays), timeout=5.0)
        status = 0
        for child, task in zip(self.children, self._tasks, strict=True):
            code = task.result()
            log.info("broker %s (pid %d) stopped with status %d", child.spec.label, child.pid, code)
            status = status or (1 if code else 0)
        return status


async def _read_line(stream: asyncio.StreamReader) -> bytes:
    """The next line (b"" at the end); a line longer than the stream's limit comes in parts."""
    try:
        return await stream.readline()
    except ValueError:
        return await stream.read(_LINE_LIMIT)


def _write_err(data: bytes) -> None:
    sys.stderr.buffer.write(data if data.endswith(b"\n") else data + b"\n")
    sys.stderr.buffer.flush()


def run_container(supervisor: Supervisor, on_ready: Callable[[str], None]) -> int:
    """Run ``supervisor`` on a standard asyncio loop (it handles no traffic: uvloop would buy
    nothing) until it stops; its exit status."""
    return asyncio.run(supervisor.run(on_ready))
