"""``apogee dashboard``: the web dashboard over a cluster's NameServer (docs/dashboard.md)."""

from __future__ import annotations

import os
import sys

import click

from apogee.cli.admin.commands import acl_options, signing_credentials
from apogee.cli.serve import serve, setup_logging
from apogee.cli.status import ExitStatus
from apogee.cli.tls import tls_client_options
from apogee.errors import ConfigError
from apogee.remoting.tls_config import TlsClientConfig


@click.command("dashboard")
@click.option("--namesrv", "-n", metavar="ADDRS", help="NameServer addresses, ';'-separated (else NAMESRV_ADDR).")
@click.option("--listen", metavar="HOST:PORT", help="Where to serve HTTP  [default: 127.0.0.1:8080]")
@click.option("--config", "-c", "config_file", type=click.Path(dir_okay=False),
              help="Properties file: namesrvAddr, listen, username, password, cacheTtlSeconds.")
@click.option("--username", help="Login name when a password is set  [default: admin]")
@click.option("--password", envvar="APOGEE_DASHBOARD_PASSWORD", show_envvar=True,
              help="Require HTTP basic login with this password (off when empty).")
@click.option("--sample-interval", type=click.FloatRange(min=0.1),
              help="Seconds between samples of the live charts and the group list  [default: 5]")
@click.option("--log-level", default="INFO", show_default=True)
@tls_client_options
@acl_options
def dashboard_command(
    namesrv: str | None, listen: str | None, config_file: str | None, username: str | None, password: str | None,
    sample_interval: float | None, log_level: str, tls: TlsClientConfig | None,
    acl_access_key: str | None, acl_secret_key: str | None,
) -> None:
    """Serve the web dashboard: clusters, topics, groups, producers, messages, live charts."""
    setup_logging(log_level)
    from apogee.dashboard.server import DashboardServer
    from apogee.dashboard.settings import load_settings

    try:
        settings = load_settings(config_file, namesrv_addr=namesrv, listen=listen, username=username,
                                 password=password, sample_interval_seconds=sample_interval)
        if not settings.namesrv_addr:
            settings.namesrv_addr = os.environ.get("NAMESRV_ADDR", "")
        if tls is not None:
            settings.admin_options["tls"] = tls
        access_key, secret_key = signing_credentials(acl_access_key, acl_secret_key)
        if access_key is not None:
            settings.admin_options.update(access_key=access_key, secret_key=secret_key)
        if not settings.namesrv_addr:
            raise ConfigError("no NameServer given: -n HOST:PORT (or namesrvAddr in --config, or NAMESRV_ADDR)")
        settings.host_port  # noqa: B018 - a bad --listen is refused here, before anything starts
    except (ConfigError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.CONFIG)
    server = DashboardServer(settings)

    async def start() -> str:
        host, port = await server.start()
        login = "login required" if settings.login_required else "no login"
        return f"apogee dashboard ready on {host}:{port} ({server.url}, NameServer {settings.namesrv_addr}, {login})"

    sys.exit(serve(start, server.stop))
