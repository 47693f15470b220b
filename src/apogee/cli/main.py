"""The ``apogee`` command: one entry point, one subcommand per role."""

from __future__ import annotations

import click

from apogee import __version__
from apogee.cli.admin import admin_group
from apogee.cli.broker import broker_command, dev_command
from apogee.cli.container import container_command
from apogee.cli.dashboard import dashboard_command
from apogee.cli.demo import demo_command
from apogee.cli.namesrv import namesrv_command
from apogee.cli.run import run_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="apogee")
def cli() -> None:
    """Apogee: a RocketMQ-compatible message queue in Python."""


cli.add_command(namesrv_command)
cli.add_command(broker_command)
cli.add_command(container_command)
cli.add_command(dev_command)
cli.add_command(demo_command)
cli.add_command(admin_group)
cli.add_command(run_command)
cli.add_command(dashboard_command)


def main() -> None:
    cli()
