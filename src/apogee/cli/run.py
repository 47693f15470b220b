"""``apogee run MODULE:APP``: import an application (``apogee.client.app.App``) and run it.

As uvicorn runs ``module:attr``: ``--app-dir`` (default: the current directory) goes first on
``sys.path``, ``MODULE`` is imported and ``APP`` (a dotted attribute path) must be an ``App``.
``--config`` and ``--namesrv`` override what the application and the environment say.  One
line on stdout when it is ready; SIGINT/SIGTERM stop it cleanly (listeners drained, offsets
committed); a start that fails prints one line on stderr and exits non-zero.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apogee.cli.serve import setup_logging
from apogee.cli.status import ExitStatus
from apogee.errors import ApogeeError, ConfigError, NameServerUnreachableError, TopicMissingError

if TYPE_CHECKING:  # imported when the command runs: every other `apogee` command starts faster
    from apogee.client.app import App


class AppLoadError(Exception):
    """``MODULE:APP`` does not name an importable ``App``; the message says which part failed."""


def split_target(target: str) -> tuple[str, list[str]]:
    """``"pkg.mod:app.inner"`` -> ``("pkg.mod", ["app", "inner"])``."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr or not all(attr.split(".")):
        raise AppLoadError(f"{target!r} is not MODULE:APP (for example myservice:app)")
    return module, attr.split(".")


def load_app(target: str, app_dir: str | Path = ".") -> App:
    from apogee.client.app import App

    module_name, attrs = split_target(target)
    path = str(Path(app_dir).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name and not module_name.startswith(f"{exc.name}."):
            raise  # the module exists; something it imports does not: show the traceback
        raise AppLoadError(f"no module {module_name!r} in {path} (or on sys.path); give --app-dir") from None
    for name in attrs:
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise AppLoadError(f"module {module_name!r} has no attribute {'.'.join(attrs)!r}") from None
    if not isinstance(obj, App):
        raise AppLoadError(f"{target} is a {type(obj).__name__}, not an apogee.client.app.App")
    return obj


def ready_line(target: str, app: App) -> str:
    producer = app.producer
    listeners = "; ".join(spec.describe() for spec in app.listeners.values()) or "none"
    namesrv = producer.config.namesrv_addr if producer is not None else "?"
    group = producer.group if producer is not None else "?"
    return f"apogee run {target} ready (NameServer {namesrv}; producer {group}; listeners: {listeners})"


@click.command("run")
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "--config",
    "-c",
    "config_file",
    type=click.Path(dir_okay=False),
    help="Client properties file (namesrvAddr, producerGroup...).",
)
@click.option("--namesrv", "-n", metavar="ADDRS", help="NameServer addresses (overrides NAMESRV_ADDR and the file).")
@click.option("--app-dir", default=".", show_default=True, type=click.Path(file_okay=False), help="Where MODULE is.")
@click.option("--log-level", default="INFO", show_default=True)
def run_command(target: str, config_file: str | None, namesrv: str | None, app_dir: str, log_level: str) -> None:
    """Run an application's producer and listeners until SIGINT/SIGTERM."""
    setup_logging(log_level)
    try:
        app = load_app(target, app_dir)
    except AppLoadError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.USAGE)
    options = {"namesrv_addr": namesrv} if namesrv else {}
    app.configure(config_file=config_file, **options)
    try:
        app.run(on_ready=lambda a: print(ready_line(target, a), flush=True))
    except (ConfigError, TopicMissingError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.CONFIG)
    except NameServerUnreachableError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.UNAVAILABLE)
    except ApogeeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.ERROR)
