"""Broker, NameServer and cluster commands (mqadmin's clusterList, brokerStatus,
getBrokerConfig, updateBrokerConfig, cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog,
wipeWritePerm, addWritePerm, getNamesrvConfig, updateNamesrvConfig, updateKvConfig,
deleteKvConfig, exportMetadata, exportConfigs, exportMetrics, startMonitoring).

Commands that take ``-b ADDR`` / ``-c CLUSTER`` act on that broker, or on every master of the
cluster; with neither, on every master the NameServer knows (mqadmin prints its help instead).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
import orjson

from apogee.admin.client import AdminClient
from apogee.cli.admin.commands import Output, admin_command, admin_group, opt
from apogee.cli.status import ExitStatus

EXPORT_DIR = "/tmp/rocketmq/export"  # mqadmin's default export path


def _broker_or_cluster(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = opt("c", "clusterName", "--cluster", help="Every master of this cluster.")(fn)
    wrapped: Callable[..., Any] = opt("b", "brokerAddr", help="This broker (host:port).")(fn)
    return wrapped


@admin_group.admin("cluster-list", "clusterList")
@opt("m", "moreStats", is_flag=True, help="Today's put and get counts too.")
@opt("i", "interval", type=int, help="Accepted for mqadmin; Apogee prints one snapshot per run.")
@opt("c", "clusterName", "--cluster", help="Only this cluster.")
@admin_command
async def cluster_list(admin: AdminClient, out: Output, more_stats: bool, interval: int | None,
                       cluster_name: str | None) -> None:
    """Clusters and their brokers, slaves (broker id > 0) included, with version, TPS, age and disk use."""
    with out.progress("brokers") as tick:
        rows = await admin.cluster_rows(cluster_name, tick)
    if more_stats:
        out.table(["cluster", "broker", "bid", "addr", "in total today", "out total today"], [
            [r.cluster, r.broker_name, r.broker_id, r.addr, r.msg_put_today, r.msg_get_today] for r in rows
        ], name="brokers")
        return
    out.table(["cluster", "broker", "bid", "addr", "version", "in tps", "out tps", "hour", "space"], [
        [r.cluster, r.broker_name, r.broker_id, r.addr, r.version or r.error, f"{r.in_tps:.2f}", f"{r.out_tps:.2f}",
         f"{r.hours:.2f}", f"{r.space:.4f}"] for r in rows
    ], name="brokers")


async def _each(admin: AdminClient, out: Output, broker_addr: str | None, cluster: str | None,
                action: Callable[[str], Awaitable[Any]], what: str) -> None:
    for addr in await admin.targets(broker_addr, cluster):
        await action(addr)
        out.line(f"{what} {addr} success")


@admin_group.admin("broker-status", "brokerStatus")
@_broker_or_cluster
@admin_command
async def broker_status(admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None) -> None:
    """Every runtime figure a broker reports (RocketMQ's keys and Apogee's own)."""
    for addr in await admin.targets(broker_addr, cluster_name):
        info = dict(sorted((await admin.broker_runtime_info(addr)).items()))
        out.pairs(info, "runtimeInfo" if broker_addr else addr, title=None if broker_addr else addr)


@admin_group.admin("get-broker-config", "getBrokerConfig")
@_broker_or_cluster
@admin_command
async def get_broker_config(admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None) -> None:
    """A broker's settings under RocketMQ's names."""
    for addr in await admin.targets(broker_addr, cluster_name):
        out.pairs(await admin.broker_config(addr), addr if not broker_addr else "config", title=f"broker {addr}")


@admin_group.admin("update-broker-config", "updateBrokerConfig")
@_broker_or_cluster
@opt("k", "key", required=True)
@opt("v", "value", required=True)
@admin_command
async def update_broker_config(admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None,
                               key: str, value: str) -> None:
    """Change a broker setting at runtime (the broker refuses keys it cannot change, saying why)."""
    await _each(admin, out, broker_addr, cluster_name,
                lambda addr: admin.update_broker_config(addr, key, value), f"update broker config {key}={value} on")


@admin_group.admin("clean-expired-cq", "cleanExpiredCQ")
@_broker_or_cluster
@admin_command
async def clean_expired_cq(admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None) -> None:
    """Remove ConsumeQueue files whose messages the CommitLog no longer holds."""
    await _each(admin, out, broker_addr, cluster_name, admin.clean_expired_cq, "clean expired ConsumeQueue on")


@admin_group.admin("clean-unused-topic", "cleanUnusedTopic")
@_broker_or_cluster
@admin_command
async def clean_unused_topic(
    admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None
) -> None:
    """Remove the ConsumeQueues of topics the broker no longer has."""
    await _each(admin, out, broker_addr, cluster_name, admin.clean_unused_topic, "clean unused topics on")


@admin_group.admin("delete-expired-commit-log", "deleteExpiredCommitLog")
@_broker_or_cluster
@admin_command
async def delete_expired_commit_log(admin: AdminClient, out: Output, broker_addr: str | None,
                                    cluster_name: str | None) -> None:
    """Delete expired CommitLog files now, whatever the hour."""
    await _each(admin, out, broker_addr, cluster_name, admin.delete_expired_commitlog, "delete expired CommitLog on")


def _write_perm_line(out: Output, verb: str, broker_name: str, counts: dict[str, int]) -> None:
    for addr, count in counts.items():
        out.line(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] OK, {count}")


@admin_group.admin("wipe-write-perm", "wipeWritePerm")
@opt("b", "brokerName", required=True)
@admin_command
async def wipe_write_perm(admin: AdminClient, out: Output, broker_name: str) -> None:
    """Take write permission from a broker's topics on every NameServer (drain it before a stop)."""
    _write_perm_line(out, "wipe", broker_name, await admin.wipe_write_perm(broker_name))


@admin_group.admin("add-write-perm", "addWritePerm")
@opt("b", "brokerName", required=True)
@admin_command
async def add_write_perm(admin: AdminClient, out: Output, broker_name: str) -> None:
    """Give write permission back to a broker's topics on every NameServer."""
    _write_perm_line(out, "add", broker_name, await admin.add_write_perm(broker_name))


@admin_group.admin("get-namesrv-config", "getNamesrvConfig")
@admin_command
async def get_namesrv_config(admin: AdminClient, out: Output) -> None:
    """Each NameServer's settings."""
    for addr, config in (await admin.namesrv_config()).items():
        out.pairs(config, addr, title=f"NameServer {addr}")


@admin_group.admin("update-namesrv-config", "updateNamesrvConfig")
@opt("k", "key", required=True)
@opt("v", "value", required=True)
@admin_command
async def update_namesrv_config(admin: AdminClient, out: Output, key: str, value: str) -> None:
    """Change a setting on every NameServer."""
    addrs = await admin.update_namesrv_config(key, value)
    out.line(f"update name server config success! {addrs}\n{key} : {value}")


@admin_group.admin("update-kv-config", "updateKvConfig")
@opt("s", "namespace", required=True)
@opt("k", "key", required=True)
@opt("v", "value", required=True)
@admin_command
async def update_kv_config(admin: AdminClient, out: Output, namespace: str, key: str, value: str) -> None:
    """Set a key-value pair on every NameServer."""
    await admin.put_kv(namespace, key, value)
    out.line("create or update kv config to namespace success.")


@admin_group.admin("delete-kv-config", "deleteKvConfig")
@opt("s", "namespace", required=True)
@opt("k", "key", required=True)
@admin_command
async def delete_kv_config(admin: AdminClient, out: Output, namespace: str, key: str) -> None:
    """Delete a key-value pair on every NameServer."""
    await admin.delete_kv(namespace, key)
    out.line("delete kv config from namespace success.")


def _export(out: Output, directory: str, name: str, doc: dict[str, Any]) -> None:
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    out.value("path", str(path), "export")
    out.line(f"export {path} success")


@admin_group.admin("export-metadata", "exportMetadata")
@opt("c", "clusterName", help="Every master of this cluster.")
@opt("b", "brokerAddr", help="This broker.")
@opt("f", "filePath", default=EXPORT_DIR, show_default=True, help="Directory to write into.")
@opt("t", "topic", is_flag=True, help="Only topics (topic.json).")
@opt("g", "subscriptionGroup", is_flag=True, help="Only subscription groups (subscriptionGroup.json).")
@opt("s", "specialTopic", is_flag=True, help="Include retry and DLQ topics.")
@admin_command
async def export_metadata(admin: AdminClient, out: Output, cluster_name: str | None, broker_addr: str | None,
                          file_path: str, topic: bool, subscription_group: bool, special_topic: bool) -> None:
    """Write the user topics' and groups' configs to a JSON file."""
    if not broker_addr and not cluster_name:
        raise click.UsageError("give --cluster-name (-c) or --broker-addr (-b)")
    doc = await admin.export_metadata(cluster_name, broker_addr, special_topic)
    if topic:
        _export(out, file_path, "topic.json", {"topicConfigTable": doc["topicConfigTable"]})
    elif subscription_group:
        _export(out, file_path, "subscriptionGroup.json", {"subscriptionGroupTable": doc["subscriptionGroupTable"]})
    else:
        _export(out, file_path, "metadata.json", doc)


@admin_group.admin("export-configs", "exportConfigs")
@opt("c", "clusterName", required=True)
@opt("f", "filePath", default=EXPORT_DIR, show_default=True)
@admin_command
async def export_configs(admin: AdminClient, out: Output, cluster_name: str, file_path: str) -> None:
    """Write the masters' main settings and the cluster's scale to configs.json."""
    _export(out, file_path, "configs.json", await admin.export_configs(cluster_name))


@admin_group.admin("export-metrics", "exportMetrics")
@opt("c", "clusterName", required=True)
@opt("f", "filePath", default=EXPORT_DIR, show_default=True)
@admin_command
async def export_metrics(admin: AdminClient, out: Output, cluster_name: str, file_path: str) -> None:
    """Write each master's disk ratios, TPS, today's counts, topic/group counts and client versions to metrics.json."""
    _export(out, file_path, "metrics.json", await admin.export_metrics(cluster_name))


@admin_group.admin("start-monitoring", "startMonitoring")
def start_monitoring() -> None:
    """Not provided: Apogee monitors through Prometheus instead (see docs/operations.md)."""
    click.echo(
        "start-monitoring is not provided: mqadmin's MonitorService polls consumer progress and running info "
        "forever. Apogee's brokers and NameServers serve Prometheus /metrics (consumer lag in messages and "
        "seconds, TPS, disk) for Grafana and alerting; `apogee admin consumer-progress` and `stats-all` give "
        "the same figures once.", err=True,
    )
    raise SystemExit(ExitStatus.USAGE)
