"""The README's first run works exactly as written: the servers started with the sample
``namesrv.conf`` and ``broker.conf`` of the repository root (their fixed loopback ports), then
the first message sent and received with the commands the README shows."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def readme_line(pattern: str) -> list[str]:
    """The README command line matching ``pattern``, without its trailing comment."""
    for line in README.splitlines():
        if re.search(pattern, line):
            return shlex.split(line.split("#", 1)[0])
    raise AssertionError(f"the README has no command line matching {pattern!r}")


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_readme_first_run_as_written(tmp_path: Path) -> None:
    if not (port_free(9876) and port_free(10911)):
        pytest.skip("the README's servers need 127.0.0.1:9876 and :10911, which something else holds")
    for name in ("broker.conf", "namesrv.conf"):
        (tmp_path / name).write_text((ROOT / name).read_text())  # a copy: a runtime change rewrites it
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    namesrv_cmd = readme_line(r"apogee namesrv -c namesrv.conf")
    broker_cmd = readme_line(r"apogee broker -n 127.0.0.1:9876 -c broker.conf")
    namesrv = ServerProcess(namesrv_cmd[1:], cwd=tmp_path, executable=namesrv_cmd[0]).start()
    try:
        broker = ServerProcess(broker_cmd[1:], cwd=tmp_path, executable=broker_cmd[0]).start()
        try:
            assert namesrv.addr == "127.0.0.1:9876" and broker.addr == "127.0.0.1:10911"
            assert (tmp_path / "store" / "commitlog").is_dir()
            for pattern, expected in ((r"examples/producer.py --topic", "SEND_OK"),
                                      (r"examples/push_consumer.py --topic", "done: 1 messages")):
                cmd = readme_line(pattern)
                out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=90)
                assert out.returncode == 0 and expected in out.stdout, out.stdout + out.stderr
        finally:
            broker.close()
    finally:
        namesrv.close()
