"""Every metric the broker and the NameServer export is documented in docs/operations.md, and
the shipped Grafana dashboard (docs/grafana/apogee.json) is well-formed and queries only
metrics they export, so a renamed metric cannot leave a dashboard panel silently empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

from apogee.broker.metrics import SPECS as BROKER
from apogee.common.metrics_http import SCRAPE_SPECS, MetricSpec
from apogee.namesrv.metrics import SPECS as NAMESRV_OWN

NAMESRV = {**NAMESRV_OWN, **SCRAPE_SPECS}  # every server's scrape reports its snapshot time

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = ("rocketmq_", "apogee_")


def exported(specs: dict[str, MetricSpec]) -> set[str]:
    """The sample names a scrape shows (a histogram's as _bucket/_sum/_count)."""
    names = set()
    for name, spec in specs.items():
        names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if spec.kind == "histogram" else {name}
    return names


def test_counters_end_in_total_and_nothing_is_declared_twice() -> None:
    for name, spec in {**BROKER, **NAMESRV}.items():
        assert name.startswith(PREFIXES)
        if name.startswith("apogee_"):  # rocketmq-exporter's own names are kept as they are
            assert (spec.kind == "counter") == name.endswith("_total"), name
    shared = set(BROKER) & set(NAMESRV)
    assert all(n.startswith("apogee_remoting_") for n in shared)  # same meaning on both servers


def test_every_metric_is_documented() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    missing = [n for n in {**BROKER, **NAMESRV} if f"`{n}`" not in doc]
    assert not missing, missing


def test_the_grafana_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads((ROOT / "docs" / "grafana" / "apogee.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    assert len(exprs) > 20
    used = {m for e in exprs for m in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e) if m.startswith(PREFIXES)}
    unknown = used - exported(BROKER) - exported(NAMESRV)
    assert not unknown, unknown
    assert {"rocketmq_group_diff", "apogee_consumer_lag_seconds", "apogee_store_flush_seconds_bucket"} <= used
