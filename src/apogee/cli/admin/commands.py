"""The ``apogee admin`` group and what every subcommand shares.

Each command is defined once, under its kebab-case name, and answers to mqadmin's camelCase
name too (``update-topic`` and ``updateTopic``): ``AdminGroup`` keeps the aliases.  Options
take mqadmin's letters and long names (``-b`` / ``--broker-addr`` / ``--brokerAddr``, see
``opt``).  ``-n`` falls back to ``NAMESRV_ADDR`` as RocketMQ's tools do.  Every command prints
tables for people or, with ``--json``, one JSON document for scripts (``Output``), and walks
over many brokers or queues with a progress bar when stderr is a terminal.  A failure is one
line on stderr naming its cause and a non-zero exit (``--debug`` shows the traceback).
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson
import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from apogee.admin.base import Tick
from apogee.admin.client import AdminClient, FoundMessage
from apogee.cli.status import ExitStatus
from apogee.cli.tls import tls_client_options
from apogee.client.config import ACCESS_KEY_ENV, SECRET_KEY_ENV
from apogee.errors import ApogeeError
from apogee.remoting.loop import run
from apogee.remoting.tls_config import TlsClientConfig

BODY_PREVIEW = 200
NAMESRV_ENV = "NAMESRV_ADDR"


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from ms, ISO 8601, or mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S"):
        try:
            return int(dt.datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            pass
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a timestamp (ms since epoch, ISO 8601, or yyyy-MM-dd#HH:mm:ss:SSS)"
        ) from None


def _fmt_ms(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds") if ms > 0 else "-"


def _kebab(camel: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", camel).lower()


def opt(short: str | None, camel: str, *decls: str, dest: str | None = None, **kwargs: Any) -> Callable[[Any], Any]:
    """A click option under mqadmin's letter (``-b``), its long name in kebab case
    (``--broker-addr``) and, when different, mqadmin's camelCase (``--brokerAddr``); the
    parameter is the snake-case name (or ``dest``).  ``decls`` adds more names."""
    kebab = _kebab(camel)
    names = [f"-{short}"] if short else []
    names.append(f"--{kebab}")
    if camel != kebab:
        names.append(f"--{camel}")
    names.extend(decls)
    return click.option(*names, dest or kebab.replace("-", "_"), **kwargs)


BOOL = click.BOOL  # mqadmin's true|false option values


class Output:
    """Where a command's results go: rich tables and lines for people, or (``--json``) one
    JSON object for scripts: each table under its name as a list of objects keyed by the
    column names, ``values`` for single figures, ``lines`` for the lines."""

    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode
        self.console = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200)
        self.doc: dict[str, Any] = {}

    def table(self, columns: list[str], rows: list[list[Any]], name: str = "rows", title: str | None = None) -> None:
        if self.json_mode:
            self.doc.setdefault(name, []).extend(dict(zip(columns, row, strict=True)) for row in rows)
            return
        table = Table(*columns, title=title)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        self.console.print(table)

    def pairs(self, items: dict[str, Any], name: str, title: str | None = None) -> None:
        """A key/value table (a message, a config, runtime info)."""
        if self.json_mode:
            self.doc[name] = items
            return
        table = Table("key", "value", title=title)
        for k, v in items.items():
            table.add_row(str(k), "" if v is None else str(v))
        self.console.print(table)

    def line(self, text: str) -> None:
        if self.json_mode:
            self.doc.setdefault("lines", []).append(text)
        else:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def items(self, name: str, values: list[str]) -> None:
        """A plain list: one per line for people, a JSON array under ``name``."""
        if self.json_mode:
            self.doc[name] = values
        else:
            for v in values:
                self.line(v)

    def value(self, key: str, value: Any, label: str | None = None) -> None:
        if self.json_mode:
            self.doc.setdefault("values", {})[key] = value
        else:
            self.line(f"{label or key}: {value}")

    def data(self, key: str, value: Any) -> None:
        """Structured data printed as JSON in both modes (answers that are JSON by nature)."""
        if self.json_mode:
            self.doc[key] = value
        else:
            self.console.print_json(orjson.dumps(value, default=str).decode())

    @contextmanager
    def progress(self, what: str) -> Iterator[Tick | None]:
        """A progress bar on stderr while a walk runs, only when stderr is a terminal."""
        if self.json_mode or not sys.stderr.isatty():
            yield None
            return
        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(what, total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            yield tick

    def finish(self) -> None:
        if self.json_mode:
            click.echo(orjson.dumps(self.doc, default=str, option=orjson.OPT_INDENT_2).decode())


class AdminGroup(click.Group):
    """A group whose commands also answer to mqadmin's names (``updateTopic``), case-insensitively."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases: dict[str, str] = {}  # lower-cased mqadmin name -> command name

    def admin(self, name: str, mqadmin: str | None = None, **kwargs: Any) -> Callable[[Any], click.Command]:
        """``@admin_group.admin("update-topic", "updateTopic")``: register under both names."""

        def decorator(fn: Any) -> click.Command:
            if mqadmin:
                self.aliases[mqadmin.lower()] = name
                doc = (fn.__doc__ or "").strip()
                first, _, rest = doc.partition("\n")
                fn.__doc__ = f"{first} (mqadmin {mqadmin})\n{rest}"
            cmd: click.Command = self.command(name, **kwargs)(fn)
            return cmd

        return decorator

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None:
            alias = self.aliases.get(cmd_name.lower())
            if alias is not None:
                cmd = super().get_command(ctx, alias)
        return cmd

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        return (cmd.name if cmd is not None else name), cmd, rest


@click.group("admin", cls=AdminGroup)
def admin_group() -> None:
    """Administer a cluster: every mqadmin 4.9 command, under its kebab-case or mqadmin name.

    -n (or NAMESRV_ADDR) names the NameServer(s), separated by ';'.  --json prints one JSON
    document instead of tables.  Against brokers with ACL on, --acl-access-key and
    --acl-secret-key (or APOGEE_ACCESS_KEY and APOGEE_SECRET_KEY, or mqadmin's
    $ROCKETMQ_HOME/conf/tools.yml) sign every request.
    """


assert isinstance(admin_group, AdminGroup)


# --- ACL: the account every request is signed with (docs/security.md) ----------------------

TOOLS_YML = Path("conf") / "tools.yml"  # mqadmin's: ${ROCKETMQ_HOME}/conf/tools.yml
F = TypeVar("F", bound=Callable[..., Any])


def acl_options(fn: F) -> F:
    """``--acl-access-key`` / ``--acl-secret-key``: the account a command signs with."""
    fn = click.option(
        "--acl-secret-key", envvar=SECRET_KEY_ENV, metavar="SK", help=f"Its SecretKey (default: ${SECRET_KEY_ENV})."
    )(fn)
    return click.option(
        "--acl-access-key", envvar=ACCESS_KEY_ENV, metavar="AK",
        help=f"Sign every request with this ACL AccessKey (default: ${ACCESS_KEY_ENV}, else accessKey of "
        "$ROCKETMQ_HOME/conf/tools.yml as mqadmin reads it).",
    )(fn)


def signing_credentials(access_key: str | None, secret_key: str | None) -> tuple[str | None, str | None]:
    """The options' (or environment's) credentials, else mqadmin's ``conf/tools.yml`` under
    ``$ROCKETMQ_HOME``, else none (requests go unsigned)."""
    if access_key:
        if not secret_key:
            raise click.UsageError(f"--acl-access-key needs --acl-secret-key (or ${SECRET_KEY_ENV})")
        return access_key, secret_key
    home = os.environ.get("ROCKETMQ_HOME")
    tools = Path(home) / TOOLS_YML if home else None
    if tools is None or not tools.is_file():
        return None, None
    try:
        doc = yaml.safe_load(tools.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise click.UsageError(f"cannot read {tools}: {exc}") from None
    if isinstance(doc, dict) and doc.get("accessKey") and doc.get("secretKey"):
        return str(doc["accessKey"]), str(doc["secretKey"])
    return None, None


def admin_command(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run ``fn(admin, out, **options)`` with an AdminClient on ``-n``; errors become one line
    on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(
        namesrv: str | None, debug: bool, json_mode: bool, tls: TlsClientConfig | None,
        acl_access_key: str | None, acl_secret_key: str | None, **kwargs: Any,
    ) -> None:
        if not namesrv:
            raise click.UsageError(f"no NameServer address: give -n HOST:PORT or set {NAMESRV_ENV}")
        out = Output(json_mode)
        access_key, secret_key = signing_credentials(acl_access_key, acl_secret_key)

        async def body() -> None:
            async with AdminClient(namesrv, tls=tls, access_key=access_key, secret_key=secret_key) as admin:
                await fn(admin, out, **kwargs)

        try:
            run(body())
        except ApogeeError as exc:
            if debug:
                raise
            out.finish()
            click.echo(f"error: {exc}", err=True)
            sys.exit(ExitStatus.ERROR)
        out.finish()

    command: Callable[..., None] = tls_client_options(acl_options(wrapper))
    command = click.option("--debug", is_flag=True, help="Show tracebacks.")(command)
    command = click.option("--json", "json_mode", is_flag=True, help="Print one JSON document (for scripts).")(command)
    command = click.option(
        "--namesrv", "-n", "--namesrvAddr", "namesrv", envvar=NAMESRV_ENV, metavar="ADDRS",
        help=f"NameServer addresses, ';'-separated (default: ${NAMESRV_ENV}).",
    )(command)
    return command


def message_record(item: FoundMessage) -> dict[str, Any]:
    """A found message as mqadmin's queryMsg* commands show it."""
    m = item.message
    body = m.body[:BODY_PREVIEW]
    try:
        preview = body.decode("utf-8")
    except UnicodeDecodeError:
        preview = body.hex()
    return {
        "Topic": m.topic,
        "Tags": m.tags or "",
        "Keys": " ".join(m.keys),
        "Msg id": m.msg_id,
        "Offset msg id": m.offset_msg_id,
        "Queue": f"{item.broker_name or m.store_host[0]} / {m.queue_id} @ {m.queue_offset}",
        "CommitLog offset": m.commit_log_offset,
        "Born": f"{_fmt_ms(m.born_timestamp)} from {m.born_host[0]}:{m.born_host[1]}",
        "Stored": f"{_fmt_ms(m.store_timestamp)} on {m.store_host[0]}:{m.store_host[1]}",
        "Reconsume times": m.reconsume_times,
        "Properties": ", ".join(f"{k}={v}" for k, v in sorted(m.properties.items())),
        "Body": f"{preview}{'…' if len(m.body) > BODY_PREVIEW else ''} ({len(m.body)} bytes)",
    }


def print_messages(out: Output, found: list[FoundMessage], name: str = "messagesFound") -> None:
    if not found:
        out.line("no message found")
        if out.json_mode:
            out.doc.setdefault(name, [])
        return
    for item in found:
        record = message_record(item)
        if out.json_mode:
            out.doc.setdefault(name, []).append(record)
        else:
            table = Table(show_header=False, box=None, pad_edge=False)
            table.add_column(style="bold")
            table.add_column()
            for k, v in record.items():
                table.add_row(k, str(v))
            out.console.print(table)
            out.console.print()
