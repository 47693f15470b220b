"""The `apogee` command as a user runs it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess


def apogee(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apogee", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", [[], ["namesrv"], ["broker"], ["dev"], ["demo"], ["dashboard"]])
def test_help_everywhere(command: list[str]) -> None:
    result = apogee(*command, "--help")
    assert result.returncode == 0 and "Usage:" in result.stdout


def test_broker_conf_with_rocketmq_names(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=C1\nbrokerName=broker-x\nbrokerId=0\nnamesrvAddr=127.0.0.1:9876\n"
        "listenPort=10921\nstorePathRootDir=/tmp/x\nflushDiskType=SYNC_FLUSH\nbrokerRole=ASYNC_MASTER\n"
        "autoCreateTopicEnable=false\nfileReservedTime=48\ndeleteWhen=04\n"
    )
    result = apogee("broker", "-c", str(conf), "-p")
    assert result.returncode == 0, result.stderr
    config = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert config["brokerClusterName"] == "C1" and config["listenPort"] == "10921"
    assert config["flushDiskType"] == "SYNC_FLUSH" and config["fileReservedTime"] == "48"
    assert config["autoCreateTopicEnable"] == "false"


@pytest.mark.parametrize(
    ("role", "conf_name", "text", "suggestion"),
    [
        ("broker", "broker.conf", "brokerName=b\nfileReservedTme=48\n", "fileReservedTime"),
        ("namesrv", "namesrv.conf", "listenPort=0\norderMessageEnabled=true\n", "orderMessageEnable"),
    ],
)
def test_a_misspelled_key_stops_the_server_with_a_suggestion(
    tmp_path: Path, role: str, conf_name: str, text: str, suggestion: str
) -> None:
    """A typo in a conf file would otherwise leave the setting at its default unnoticed."""
    conf = tmp_path / conf_name
    conf.write_text(text)
    result = apogee(role, "-c", str(conf), "--listen", "127.0.0.1:0")
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"(did you mean {suggestion!r}?)" in lines[0] and str(conf) in lines[0]


def test_bad_config_value_is_one_clear_line(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("flushDiskType=SOMETIMES\n")
    result = apogee("broker", "-c", str(conf))
    assert result.returncode == 3
    assert "flushDiskType" in result.stderr and "Traceback" not in result.stderr


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def test_dev_runs_namesrv_and_broker_in_one_process(tmp_path: Path) -> None:
    with ServerProcess(["dev", "--dir", str(tmp_path / "dev"), "--namesrv-listen", "127.0.0.1:0",
                        "--broker-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                        "--dashboard-listen", "127.0.0.1:0"]) as dev:
        assert "broker 127.0.0.1:" in dev.ready_line
        # /metrics is on in dev: the ready line gives the NameServer's and the broker's URLs.
        urls = re.findall(r"http://127\.0\.0\.1:\d+/metrics", dev.ready_line)
        assert len(urls) == 2, dev.ready_line
        texts = [http_text(url) for url in urls]
        assert "apogee_namesrv_topics" in texts[0] and "rocketmq_producer_offset" in texts[1]
        # So is the web dashboard, on the dev NameServer: its cluster page lists the broker.
        (dashboard,) = re.findall(r"dashboard (http://127\.0\.0\.1:\d+/)", dev.ready_line)
        assert "broker-a" in http_text(dashboard + "cluster")
        assert dev.stop() == 0
    assert (tmp_path / "dev" / "store" / "config" / "topics.json").exists()


def test_a_dashboard_on_a_busy_port_says_so_in_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = apogee("dashboard", "-n", "127.0.0.1:9876", "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 4, result.stderr
    assert result.stderr.strip().endswith(f"error: cannot start: dashboard on 127.0.0.1:{port}: Address already in use")


@pytest.mark.spark
def test_demo_finishes_by_itself(tmp_path: Path) -> None:
    result = apogee("demo", "--orders", "20", "--out", str(tmp_path / "out"), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert re.search(r"OrderEvents: (\d+) events sent, \1 read back through Spark", text), text
    assert (tmp_path / "out" / "minute_stats").is_dir()
