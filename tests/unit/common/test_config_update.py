"""The pure rules of a runtime config change: which keys, why not, and how the file is rewritten."""

from __future__ import annotations

from pathlib import Path

from apogee.broker.config import BrokerConfig
from apogee.common.config import did_you_mean, unknown_keys_error
from apogee.common.config_update import LiveConfig, rewrite_properties
from apogee.store.config import StoreConfig


def _live() -> tuple[LiveConfig, BrokerConfig, StoreConfig]:
    broker, store = BrokerConfig(broker_name="b"), StoreConfig()
    live = LiveConfig((broker, store), Path("/x/broker.conf"), live={"fileReservedTime", "brokerPermission"},
                      never={"secretPath"}, now_ms=5)
    return live, broker, store


def test_a_live_key_is_applied_and_counted() -> None:
    live, broker, store = _live()
    update = live.plan({"fileReservedTime": " 12 ", "brokerPermission": str(broker.broker_permission)})
    assert update.problems == [] and update.changes == {"fileReservedTime": "12"}  # the same value is no change
    live.apply(update, 9)
    assert store.file_reserved_time_h == 12 and live.version() == {"counter": 1, "timestamp": 9}


def test_refusals_name_the_key_and_the_reason_and_change_nothing() -> None:
    live, _, store = _live()
    update = live.plan({"fileReservedTime": "1", "flushDiskType": "SYNC_FLUSH"})
    assert update.restart_only and update.changes == {"fileReservedTime": "1"}
    assert len(update.problems) == 1 and "flushDiskType is read only at start" in update.problems[0]
    assert "/x/broker.conf" in update.problems[0]
    bad = live.plan({"fileReservedTme": "1", "secretPath": "/", "fileReservedTime": "x"})
    assert not bad.restart_only
    assert "unknown key fileReservedTme (did you mean 'fileReservedTime'?)" in bad.problems
    assert any(p.startswith("secretPath cannot be changed") for p in bad.problems)
    assert any("fileReservedTime='x': expected an integer" in p for p in bad.problems)
    assert store.file_reserved_time_h == 72


def test_the_rewrite_keeps_comments_and_other_lines() -> None:
    text = "# mine\nbrokerName = b\nfileReservedTime=72\n\n! other\ndeleteWhen=04\n"
    out = rewrite_properties(text, {"fileReservedTime": "12", "traceOn": "false"})
    assert out.startswith("# mine\nbrokerName = b\nfileReservedTime=12\n\n! other\ndeleteWhen=04\n\n# changed at")
    assert out.endswith("\ntraceOn=false\n")
    again = rewrite_properties(out, {"regionId": "r"})
    assert again.count("# changed at runtime") == 1 and again.endswith("traceOn=false\nregionId=r\n")
    assert rewrite_properties("", {"a": "1"}).splitlines()[-1] == "a=1"


def test_did_you_mean_ignores_case_and_says_nothing_when_nothing_is_close() -> None:
    assert did_you_mean("namesrvaddr", ["namesrvAddr", "brokerName"]) == " (did you mean 'namesrvAddr'?)"
    assert did_you_mean("zzz", ["namesrvAddr"]) == ""
    error = unknown_keys_error("b.conf", ["brokerNme", "qqq"], ["brokerName"])
    assert str(error) == "unknown keys in b.conf: brokerNme (did you mean 'brokerName'?), qqq"
