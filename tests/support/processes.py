"""Real ``apogee`` server processes for integration tests.

A server is started as ``python -m apogee <role> --listen 127.0.0.1:0 ...``; the harness reads
its single ready line from stdout to learn the bound port (no fixed ports, no sleeps) and
always stops it by PID: SIGTERM, a grace period, then SIGKILL.  On failure the server's
stderr is attached to the error so a broken start explains itself.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY = re.compile(r"ready on (\S+):(\d+)")


class ServerProcess:
    def __init__(
        self,
        args: list[str],
        *,
        ready_timeout_s: float = 20.0,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        executable: str | None = None,
    ) -> None:
        """``args`` after ``python -m apogee`` (or after ``executable``, a command as a user
        types it, such as ``.venv/bin/apogee``), run in ``cwd``."""
        self.args = args
        self.cwd = cwd
        self.program = [executable] if executable else [sys.executable, "-m", "apogee"]
        self.ready_timeout_s = ready_timeout_s
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.host = ""
        self.port = 0
        self.ready_line = ""
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> ServerProcess:
        self.proc = subprocess.Popen(
            [*self.program, *self.args],
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self.env,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + self.ready_timeout_s
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=0.1):
                    chunk = self.proc.stdout.read()
                    if chunk:
                        buf += chunk
                    elif chunk == b"":
                        break
                    if b"\n" in buf:
                        self.ready_line = buf.split(b"\n", 1)[0].decode()
                        match = READY.search(self.ready_line)
                        if match:
                            self.host, self.port = match.group(1), int(match.group(2))
                            return self
                if self.proc.poll() is not None:
                    break
        self.stop()
        raise RuntimeError(f"{self.args[0]} did not become ready: {buf!r}\n{self.stderr()}")

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, wait, then SIGKILL; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL at once (crash tests)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def close(self) -> None:
        self.stop()
        self._stderr.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_namesrv(home: Path, *extra: str) -> ServerProcess:
    return ServerProcess(["namesrv", "--listen", "127.0.0.1:0", "--home", str(home), *extra]).start()


def start_broker(namesrv: str, store: Path, conf: str = "", *extra: str) -> ServerProcess:
    """A broker on a free loopback port, advertising 127.0.0.1, with ``conf`` (broker.conf
    lines) written beside ``store``."""
    conf_path = store.parent / f"{store.name}.conf"
    conf_path.parent.mkdir(parents=True, exist_ok=True)
    conf_path.write_text(conf)
    return ServerProcess(
        ["broker", "-n", namesrv, "-c", str(conf_path), "--listen", "127.0.0.1:0", "--store-dir", str(store),
         "--broker-ip", "127.0.0.1", *extra]
    ).start()
