"""The ``apogee`` command: one entry point, one subcommand per role.

Each subcommand's module is imported only when that subcommand runs (or ``--help`` lists
them): a server process (``apogee namesrv``, ``apogee broker``) then never imports the client,
the admin tools or Spark's helpers, which halves a NameServer's start-up CPU.
"""

from __future__ import annotations

import importlib

import click

from apogee import __version__

# name -> "module:attribute" of its click command, in the order ``--help`` lists them.
COMMANDS = {
    "namesrv": "apogee.cli.namesrv:namesrv_command",
    "broker": "apogee.cli.broker:broker_command",
    "broker-container": "apogee.cli.container:container_command",
    "dev": "apogee.cli.broker:dev_command",
    "demo": "apogee.cli.demo:demo_command",
    "admin": "apogee.cli.admin:admin_group",
    "run": "apogee.cli.run:run_command",
    "dashboard": "apogee.cli.dashboard:dashboard_command",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported by name when used (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="apogee")
def cli() -> None:
    """Apogee: a RocketMQ-compatible message queue in Python."""


def main() -> None:
    cli()
