"""``apogee namesrv``: run a NameServer."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from apogee.cli.serve import serve, setup_logging
from apogee.cli.status import ExitStatus
from apogee.cli.tls import tls_server_options
from apogee.common.config import apply, known_keys, load_file, unknown_keys_error
from apogee.common.metrics_http import metrics_address
from apogee.errors import ConfigError
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.server import NameServer
from apogee.remoting.config import RemotingConfig, parse_listen
from apogee.remoting.tls import tls_contexts
from apogee.remoting.tls_config import TlsServerConfig


@click.command("namesrv")
@click.option("--listen", "-l", default=None, metavar="HOST:PORT", help="Address to serve on (default 0.0.0.0:9876).")
@click.option(
    "--config", "-c", "config_file", type=click.Path(dir_okay=False), help="namesrv.conf with RocketMQ property names."
)
@click.option(
    "--home", type=click.Path(file_okay=False), help="Directory of kvConfig.json (default ~/.apogee/namesrv)."
)
@click.option("--expire-ms", type=int, help="Drop brokers silent for this long (default 120000).")
@click.option("--scan-interval-ms", type=int, help="How often to look for silent brokers (default 10000).")
@click.option(
    "--metrics-listen", default=None, metavar="HOST:PORT",
    help="Serve Prometheus /metrics here (metricsListen; ':PORT' = on the listen host). Default: not served.",
)
@click.option("--log-level", default="INFO", show_default=True)
@tls_server_options
def namesrv_command(
    listen: str | None,
    config_file: str | None,
    home: str | None,
    expire_ms: int | None,
    scan_interval_ms: int | None,
    metrics_listen: str | None,
    log_level: str,
    tls_keys: dict[str, str],
) -> None:
    """Run a NameServer: the route registry brokers register with and clients ask."""
    setup_logging(log_level)
    config = NamesrvConfig()
    remoting = RemotingConfig()
    tls_server = TlsServerConfig()
    try:
        if config_file:
            _apply_file(config_file, config, remoting, tls_server)
            config.config_store_path = str(Path(config_file).resolve())
        if home:
            config.rocketmq_home = home
        if not config_file and config.settings_path.is_file():
            # Settings UPDATE_NAMESRV_CONFIG saved when there was no -c (RocketMQ writes them too).
            _apply_file(str(config.settings_path), config, remoting)
        if listen:
            config.listen_host, config.listen_port = parse_listen(listen, 9876)
        if metrics_listen is not None:
            config.metrics_listen = metrics_listen
        metrics_address(config.metrics_listen, config.listen_host)
        apply(tls_server, tls_keys)
        tls = tls_contexts(tls_server)
    except (ConfigError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.CONFIG)
    if expire_ms is not None:
        config.broker_channel_expired_time_ms = expire_ms
    if scan_interval_ms is not None:
        config.scan_not_active_broker_interval_ms = scan_interval_ms
    server = NameServer(config, remoting, tls=tls)

    async def start() -> str:
        host, port = await server.start()
        metrics = f" metrics {server.metrics.url}" if server.metrics is not None else ""
        return f"apogee namesrv ready on {host}:{port}{metrics}"

    sys.exit(serve(start, server.stop, server.reload_tls))


def _apply_file(path: str, *configs: object) -> None:
    """Apply a namesrv.conf; a key no config reads stops the NameServer, naming the
    closest known key."""
    values = load_file(path)
    unknown = set(values)
    for config in configs:
        unknown &= set(apply(config, {k: values[k] for k in unknown}, strict=False))
    if unknown:
        raise unknown_keys_error(path, unknown, known_keys(*configs))
