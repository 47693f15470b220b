"""``apogee broker-container``: several brokers on one machine, one process (and core) each.

RocketMQ 5's ``mqbrokercontainer -c container.conf`` (``brokerConfigPaths``) or
``-b a.conf:b.conf``; and Apogee's ``--brokers N``, which derives N brokers from one
broker.conf (``apogee.container.plan.derive``).  Every file is checked, and the brokers'
names, ports and stores compared, before any broker starts.  docs/multicore.md.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from apogee.broker.config import BrokerConfig
from apogee.cli.broker import load_broker_conf
from apogee.cli.serve import setup_logging
from apogee.cli.status import ExitStatus
from apogee.common.config import apply, known_keys, load_file, unknown_keys_error
from apogee.common.metrics_http import metrics_address
from apogee.container.config import MAX_BROKERS, ContainerConfig, load_container_config
from apogee.container.plan import BaseBroker, BrokerSpec, conflicts, derive
from apogee.container.supervisor import Supervisor, run_container, write_derived_configs
from apogee.errors import ConfigError
from apogee.remoting.config import RemotingConfig, parse_listen
from apogee.store.config import StoreConfig

log = logging.getLogger("apogee.cli.container")


def derived_brokers(
    config: ContainerConfig, base_values: dict[str, str], source: str,
    listen: str | None, store_dir: str | None, broker_ip: str | None,
) -> list[BrokerSpec]:
    """The brokers of ``--brokers N``: the base broker.conf's values, the command line's
    --listen, --store-dir, --broker-ip and -n over them, checked as `apogee broker` checks
    its file, then derived into N."""
    values = dict(base_values)
    if listen:
        host, port = parse_listen(listen, 10911)
        values.update(listenHost=host, listenPort=str(port))
    if store_dir:
        values["storePathRootDir"] = str(Path(store_dir).resolve())
    if broker_ip:
        values["brokerIP1"] = broker_ip
    if config.namesrv_addr:
        values["namesrvAddr"] = config.namesrv_addr
    broker, store, remoting = BrokerConfig(), StoreConfig(), RemotingConfig()
    unknown = set(values)
    for part in (broker, store, remoting):
        unknown &= set(apply(part, values, strict=False))
    if unknown:
        raise unknown_keys_error(source, unknown, known_keys(broker, store, remoting, config))
    broker.validate_role()
    store.validate()
    if not broker.namesrv_list():
        log.warning("no NameServer given (-n or namesrvAddr): clients will not find these brokers")
    root = str(store.root.resolve())
    values["storePathRootDir"] = root
    base = BaseBroker(
        name=broker.broker_name, listen_host=broker.listen_host, listen_port=broker.listen_port,
        ha_port=store.ha_listen_port, metrics=metrics_address(broker.metrics_listen, broker.listen_host),
        store_root=root, commitlog_dir=store.store_path_commit_log,
    )
    return derive(values, base, config.broker_count, config.broker_port_step, root, source)


def listed_brokers(config: ContainerConfig) -> list[BrokerSpec]:
    """The brokers of ``brokerConfigPaths``: each file loaded and checked as `apogee broker -c`
    loads it (an unknown key or a bad value stops the container, naming the file)."""
    specs = []
    for path in config.config_paths():
        broker, store, remoting, unknown = load_broker_conf(path)
        if unknown:
            raise unknown_keys_error(path, unknown, known_keys(broker, store, remoting))
        broker.validate_role()
        store.validate()
        if not config.namesrv_addr and not broker.namesrv_list():
            log.warning("no NameServer given for %s (-n, or namesrvAddr in either file): clients will not find it",
                        path)
        metrics = metrics_address(broker.metrics_listen, broker.listen_host)
        specs.append(BrokerSpec(
            name=broker.broker_name, broker_id=broker.broker_id, config_path=str(Path(path).resolve()),
            listen_port=broker.listen_port, ha_port=store.ha_listen_port, metrics_port=metrics[1] if metrics else 0,
            store_root=str(store.root.resolve()), commitlog_dir=store.store_path_commit_log,
        ))
    return specs


def _print_plan(specs: list[BrokerSpec]) -> None:
    for spec in specs:
        click.echo(f"# {spec.label}: {spec.config_path}, store {spec.store_root}, ports {spec.ports() or 'free'}")
        if spec.config_text is not None:
            click.echo(spec.config_text)


@click.command("broker-container")
@click.option(
    "--config", "-c", "config_file", type=click.Path(dir_okay=False),
    help="Container config (RocketMQ's: namesrvAddr, brokerConfigPaths); with --brokers, the broker.conf "
    "the brokers are derived from.",
)
@click.option(
    "--broker-config-files", "-b", "broker_config_paths", metavar="PATHS",
    help="Broker config files separated by ':' (brokerConfigPaths): one broker each.",
)
@click.option(
    "--brokers", type=click.IntRange(1, MAX_BROKERS), default=None, metavar="N",
    help="Derive N brokers from one broker.conf (brokerCount): brokerName <name>-<i>, listen, HA and metrics "
    "ports + i*brokerPortStep (10), store <storePathRootDir>/<name>-<i>.",
)
@click.option("--namesrv", "-n", "namesrv", metavar="ADDRS", help="NameServer addresses for every broker.")
@click.option("--listen", "-l", default=None, metavar="HOST:PORT", help="With --brokers: the first broker's address.")
@click.option("--store-dir", type=click.Path(file_okay=False), help="With --brokers: the stores' parent directory.")
@click.option("--broker-ip", help="brokerIP1 of every broker (the address clients use).")
@click.option("--print-config", "-p", is_flag=True, help="Print each broker's file, ports and store, and exit.")
@click.option("--log-level", default="INFO", show_default=True)
def container_command(
    config_file: str | None,
    broker_config_paths: str | None,
    brokers: int | None,
    namesrv: str | None,
    listen: str | None,
    store_dir: str | None,
    broker_ip: str | None,
    print_config: bool,
    log_level: str,
) -> None:
    """Run several brokers on this machine, each a process of its own (RocketMQ's mqbrokercontainer)."""
    setup_logging(log_level)
    overrides = {key: value for key, value in (
        ("brokerCount", str(brokers) if brokers else None), ("brokerConfigPaths", broker_config_paths),
        ("namesrvAddr", namesrv),
    ) if value}
    source = str(config_file) if config_file else "the command line"
    try:
        values = load_file(config_file) if config_file else {}
        config, base_values = load_container_config(values, overrides, source)
        if config.derived:
            specs = derived_brokers(config, base_values, source, listen, store_dir, broker_ip)
        elif listen or store_dir:
            raise ConfigError("--listen and --store-dir are for --brokers; a listed broker's file gives its own")
        else:
            if "listenPort" in values:
                log.info("listenPort=%s is RocketMQ's container's own port: Apogee's container serves none "
                         "(each broker serves its own listenPort)", values["listenPort"])
            specs = listed_brokers(config)
        problems = conflicts(specs)
        if problems:
            raise ConfigError("brokers of one container must not share: " + "; ".join(problems))
    except (ConfigError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitStatus.CONFIG)
    if print_config:
        _print_plan(specs)
        return
    write_derived_configs(specs)
    supervisor = Supervisor(
        specs, namesrv="" if config.derived else config.namesrv_addr,
        broker_ip="" if config.derived else broker_ip or "", log_level=log_level,
    )
    sys.exit(run_container(supervisor, lambda line: print(line, flush=True)))
