"""``apogee run module:app`` as a real process: RocketMQ's Spring Boot quick start (examples/quickstart_app.py)
sends through its WarnController and receives in its WarnConsumer; SIGTERM stops it with the
group's offset committed, so the next instance does not receive the message again; a start
that cannot work exits with one line saying why."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import orjson

from apogee.admin.client import AdminClient
from apogee.cli.status import ExitStatus
from tests.integration.client.conftest import Cluster, unique

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class AppProcess:
    """``python -m apogee <args>``, its stdout collected line by line, stopped by PID."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the child writes to it until close()
        self.err = ""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "apogee", *args],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, **env},
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def wait_line(self, text: str, timeout_s: float = 20) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(f"no line with {text!r}; stdout {self.lines}\nstderr:\n{self.stderr_text()[-3000:]}")

    def stderr_text(self) -> str:
        if self.stderr.closed:
            return self.err
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def terminate(self, timeout_s: float = 20) -> int:
        os.kill(self.proc.pid, signal.SIGTERM)
        code = self.proc.wait(timeout_s)
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.err = self.stderr_text()
        self.stderr.close()


def apogee(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apogee", *args], capture_output=True, text=True, timeout=60)


async def committed(cluster: Cluster, group: str, topic: str) -> list[tuple[int, int]]:
    async with AdminClient(cluster.ns) as admin:
        return [(q.broker_offset, q.consumer_offset) for q in await admin.consumer_progress(group, topic)]


def run_quickstart(cluster: Cluster) -> tuple[AppProcess, str]:
    app = AppProcess(
        "run",
        "quickstart_app:app",
        "--app-dir",
        str(EXAMPLES),
        env={"NAMESRV_ADDR": cluster.ns, "WARN_HTTP_LISTEN": "127.0.0.1:0"},
    )
    try:
        ready = app.wait_line("apogee run quickstart_app:app ready")
        assert f"NameServer {cluster.ns}" in ready and "warn_consumer_group <- TopicTest" in ready
        url = app.wait_line("WarnController on ").split(" on ", 1)[1]
    except BaseException:
        app.close()
        raise
    return app, url


def sync_send(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        result: dict[str, object] = orjson.loads(resp.read())
    return result


async def test_sigterm_stops_the_quick_start_with_its_offset_committed(cluster: Cluster) -> None:
    # The quick start creates TopicTest by hand; one queue, so "not again" below is about that queue.
    created = apogee("admin", "update-topic", "-n", cluster.ns, "-t", "TopicTest", "-q", "1")
    assert created.returncode == 0, created.stderr
    assert "topic TopicTest is served by the NameServer" in created.stdout

    first, url = run_quickstart(cluster)
    try:
        result = sync_send(url)
        assert result["sendStatus"] == "SEND_OK"
        first.wait_line("Received message: sync hello world!")
        assert first.terminate() == 0
    finally:
        first.close()
    assert "stopped" in first.stderr_text()
    assert await committed(cluster, "warn_consumer_group", "TopicTest") == [(1, 1)]

    second, url = run_quickstart(cluster)
    try:
        assert sync_send(url)["sendStatus"] == "SEND_OK"
        second.wait_line("Received message: sync hello world!")
        assert second.terminate() == 0
    finally:
        second.close()
    # Its own message only: the first one was not delivered again (one queue, consumed in order).
    assert [line for line in second.lines if line.startswith("Received message")] == [
        "Received message: sync hello world!"
    ]
    assert await committed(cluster, "warn_consumer_group", "TopicTest") == [(2, 2)]


def test_a_start_that_cannot_work_exits_with_one_line(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("T_missing")
    (tmp_path / "missing_app.py").write_text(
        "from apogee.client.app import App\n"
        "app = App('missing')\n"
        f"@app.listener({topic!r}, group='G_missing')\n"
        "def on_text(text: str) -> None: ...\n"
    )
    out = apogee("run", "missing_app:app", "--app-dir", str(tmp_path), "--namesrv", cluster.ns, "--log-level", "ERROR")
    assert out.returncode == ExitStatus.CONFIG, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"topic {topic} does not exist" in errors[0] and "update-topic" in errors[0]

    out = apogee("run", "missing_app:nothing", "--app-dir", str(tmp_path))
    assert out.returncode == ExitStatus.USAGE and "has no attribute 'nothing'" in out.stderr
    out = apogee("run", "no_such_module:app", "--app-dir", str(tmp_path))
    assert out.returncode == ExitStatus.USAGE and "no module 'no_such_module'" in out.stderr
