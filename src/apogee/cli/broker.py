"""``apogee broker``: run a Broker; ``apogee dev``: NameServer + Broker in one process."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from apogee.broker.config import BrokerConfig, BrokerRole
from apogee.broker.config_update import default_config_path
from apogee.cli.serve import serve, setup_logging
from apogee.cli.status import ExitStatus
from apogee.cli.tls import tls_server_options
from apogee.common.config import apply, describe, known_keys, load_file, unknown_keys_error
from apogee.common.metrics_http import metrics_address
from apogee.errors import ConfigError
from apogee.remoting.config import RemotingConfig, parse_listen
from apogee.remoting.tls import TlsContexts, tls_contexts
from apogee.remoting.tls_config import TlsClientConfig, TlsServerConfig, secret_keys
from apogee.store.config import StoreConfig

log = logging.getLogger("apogee.cli.broker")


def load_broker_conf(
    path: str | None, *extra: object
) -> tuple[BrokerConfig, StoreConfig, RemotingConfig, list[str]]:
    """Spread one broker.conf over the three config objects (and ``extra`` ones: the TLS
    settings); return the keys none knows (``apogee broker`` stops on them:
    ``unknown_keys_error``)."""
    broker, store, remoting = BrokerConfig(), StoreConfig(), RemotingConfig()
    unknown = _apply_file(path, broker, store, remoting, *extra) if path else []
    return broker, store, remoting, unknown


def _apply_file(path: str | Path, *configs: object) -> list[str]:
    values = load_file(path)
    unknown = set(values)
    for config in configs:
        unknown &= set(apply(config, values, strict=False))
    return sorted(unknown)


def apply_runtime_changes(broker: BrokerConfig, store: StoreConfig, remoting: RemotingConfig) -> Path | None:
    """Without ``-c``: the changes UPDATE_BROKER_CONFIG persisted under the store root
    (``config/broker.properties``), applied over the defaults; returns that file if it exists."""
    path = default_config_path(store.store_path_root_dir)
    if not path.is_file():
        return None
    unknown = _apply_file(path, broker, store, remoting)
    if unknown:
        raise unknown_keys_error(str(path), unknown, known_keys(broker, store, remoting))
    return path


def _print_config(*configs: object) -> None:
    hidden = secret_keys(*configs)
    for config in configs:
        for key, value in describe(config):
            click.echo(f"{key}={'***' if key in hidden and value else value}")


@click.command("broker")
@click.option(
    "--namesrv", "-n", "namesrv", metavar="ADDRS",
    help="NameServer addresses, 'host:port;host:port' (overrides namesrvAddr).",
)
@click.option(
    "--config", "-c", "config_file", type=click.Path(dir_okay=False), help="broker.conf with RocketMQ property names."
)
@click.option("--listen", "-l", default=None, metavar="HOST:PORT", help="Address to serve on (default 0.0.0.0:10911).")
@click.option("--store-dir", type=click.Path(file_okay=False), help="Store root directory (storePathRootDir).")
@click.option(
    "--broker-ip",
    help="IP clients use to reach this broker (brokerIP1); default: the --listen host when it is one address, "
    "else the first non-loopback IPv4 of this machine.",
)
@click.option("--broker-id", type=int, default=None, help="brokerId: 0 for a master, > 0 for a slave.")
@click.option(
    "--role", type=click.Choice([r.value for r in BrokerRole]), default=None,
    help="brokerRole (default ASYNC_MASTER).",
)
@click.option(
    "--ha-port", type=int, default=None, help="haListenPort, the master's replication port (default listen port + 1)."
)
@click.option(
    "--ha-master", default=None, metavar="HOST:PORT",
    help="haMasterAddress: a slave's master HA address (default: from the NameServer).",
)
@click.option(
    "--metrics-listen", default=None, metavar="HOST:PORT",
    help="Serve Prometheus /metrics here (metricsListen; ':PORT' = on the listen host). Default: not served.",
)
@click.option(
    "--busy-poll-us", type=click.IntRange(min=0), default=None, metavar="MICROSECONDS",
    help="busyPollUs: keep polling this long after traffic instead of sleeping; lower latency "
    "for more CPU (default 0, off; docs/performance.md, Busy polling).",
)
@click.option("--print-config", "-p", is_flag=True, help="Print the effective configuration and exit.")
@click.option("--log-level", default="INFO", show_default=True)
@tls_server_options
def broker_command(
    namesrv: str | None,
    config_file: str | None,
    listen: str | None,
    store_dir: str | None,
    broker_ip: str | None,
    broker_id: int | None,
    role: str | None,
    ha_port: int | None,
    ha_master: str | None,
    metrics_listen: str | None,
    busy_poll_us: int | None,
    print_config: bool,
    log_level: str,
    tls_keys: dict[str, str],
) -> None:
    """Run a Broker: stores messages and serves producers and consumers."""
    setup_logging(log_level)
    tls_server, tls_client = TlsServerConfig(), TlsClientConfig()
    try:
        broker, store, remoting, unknown = load_broker_conf(config_file, tls_server, tls_client)
        if unknown:
            raise unknown_keys_error(
                str(config_file), unknown, known_keys(broker, store, remoting, tls_server, tls_client)
            )
        apply(tls_server, tls_keys)
        if listen:
            broker.listen_host, broker.listen_port = parse_listen(listen, 10911)
        if broker_id is not None:
            broker.broker_id = broker_id
        if role is not None:
            broker.broker_role = BrokerRole(role)
        if ha_port is not None:
            store.ha_listen_port = ha_port
        if ha_master is not None:
            store.ha_master_address = ha_master
        if namesrv:
            broker.namesrv_addr = namesrv
        if store_dir:
            store.store_path_root_dir = str(Path(store_dir).resolve())
        if broker_ip:
            broker.broker_ip1 = broker_ip
        saved = None if config_file else apply_runtime_changes(broker, store, remoting)
        if metrics_listen is not None:
            broker.metrics_listen = metrics_listen
        if busy_poll_us is not None:
            remoting.busy_poll_us = busy_poll_us
        metrics_address(broker.metrics_listen, broker.listen_host)  # refused here, not after the store opened
        broker.validate_role()
        store.validate()
        if print_config:
            _print_config(broker, store, remoting, tls_server, tls_client)
            return
        tls = tls_contexts(tls_server, tls_client)
    except (ConfigError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.CONFIG)
    if saved is not None:
        log.info("applied the settings changed at runtime and saved in %s", saved)
    if not broker.namesrv_list():
        log.warning("no NameServer given (-n or namesrvAddr): clients will not find this broker")
    sys.exit(run_broker(broker, store, remoting, Path(config_file).resolve() if config_file else None, tls))


def run_broker(
    broker: BrokerConfig, store: StoreConfig, remoting: RemotingConfig, config_file: Path | None = None,
    tls: TlsContexts | None = None,
) -> ExitStatus:
    from apogee.broker.controller import BrokerController

    try:
        controller = BrokerController(broker, store, remoting, config_file=config_file, tls=tls)
    except ConfigError as exc:  # the ACL files (aclEnable=true) are read here
        click.echo(f"error: {exc}", err=True)
        return ExitStatus.CONFIG

    async def start() -> str:
        host, port = await controller.start()
        metrics = f", metrics {controller.metrics.url}" if controller.metrics is not None else ""
        return (
            f"apogee broker ready on {host}:{port} "
            f"({broker.broker_name}, cluster {broker.broker_cluster_name}, address {controller.broker_addr}{metrics})"
        )

    return serve(start, controller.stop, controller.reload_tls)


@click.command("dev")
@click.option(
    "--dir", "directory", default="./apogee-dev", show_default=True, type=click.Path(file_okay=False),
    help="Where the store and NameServer state live.",
)
@click.option("--namesrv-listen", default="127.0.0.1:9876", show_default=True, metavar="HOST:PORT")
@click.option("--broker-listen", default="127.0.0.1:10911", show_default=True, metavar="HOST:PORT")
@click.option("--flush", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]), default="ASYNC_FLUSH", show_default=True)
@click.option(
    "--metrics-listen", default="127.0.0.1:5557", show_default=True, metavar="HOST:PORT",
    help="The broker's Prometheus /metrics; the NameServer's is on the next port. Empty: not served.",
)
@click.option(
    "--dashboard-listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
    help="The web dashboard (`apogee dashboard`, no login). Empty: not served.",
)
@click.option("--log-level", default="INFO", show_default=True)
def dev_command(
    directory: str, namesrv_listen: str, broker_listen: str, flush: str, metrics_listen: str, dashboard_listen: str,
    log_level: str,
) -> None:
    """Run a NameServer and a Broker together in one process, for first use and development."""
    setup_logging(log_level)
    from apogee.dev import DevCluster

    try:
        cluster = DevCluster.from_options(
            Path(directory), namesrv_listen, broker_listen, flush, metrics_listen, dashboard_listen
        )
    except (ConfigError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.CONFIG)

    async def start() -> str:
        ns, br = await cluster.start()
        return (
            f"apogee dev ready on {ns} broker {br} store {cluster.root}{cluster.metrics_note()}"
            f"{cluster.dashboard_note()}"
        )

    sys.exit(serve(start, cluster.stop))
