"""The brokers of a container: their configs, their ports and each child's command (pure).

A container runs each broker as ``python -m apogee broker -c FILE``, the command an operator
would type, so a broker in a container behaves as one started alone.  With
``brokerConfigPaths`` the files are the operator's; with ``brokerCount`` (``--brokers N``)
``derive`` writes N files from one base broker.conf: brokerName ``<name>-<i>``, listen, HA
and metrics ports moved by ``i * brokerPortStep``, store ``<storePathRootDir>/<name>-<i>``.
``conflicts`` refuses, before anything starts, two brokers that would share a name, a port
or a store (the second one would fail later, or worse, in a less clear way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class BaseBroker:
    """The resolved settings of the broker.conf brokers are derived from (its defaults
    applied: brokerName is the host's name unless set, the store root ~/store)."""

    name: str
    listen_host: str
    listen_port: int
    ha_port: int  # 0: listenPort + 1
    metrics: tuple[str, int] | None  # (host, port) of metricsListen; None: not served
    store_root: str
    commitlog_dir: str  # storePathCommitLog; "" = <store root>/commitlog


@dataclass(frozen=True)
class BrokerSpec:
    """One broker of a container, as the supervisor starts it."""

    name: str
    broker_id: int
    config_path: str  # the broker.conf the child reads (-c)
    listen_port: int  # 0: a free port, kept across the child's restarts once bound
    ha_port: int  # 0: listenPort + 1 (or a free port when listenPort is 0)
    metrics_port: int  # 0: not served, or a free port
    store_root: str
    commitlog_dir: str
    # Derived brokers: the text ``config_path`` is written with at each start of the container.
    config_text: str | None = None

    @property
    def label(self) -> str:
        """brokerName, with the id for a slave (``broker-a/1``): unique within a container."""
        return self.name if self.broker_id == 0 else f"{self.name}/{self.broker_id}"

    def ports(self) -> list[int]:
        """The fixed ports this broker binds (free ones, port 0, cannot collide)."""
        ha = self.ha_port or (self.listen_port + 1 if self.listen_port else 0)
        return [p for p in (self.listen_port, ha, self.metrics_port) if p]


DERIVED_HEADER = (
    "# Written by `apogee broker-container` from {source} at each start of the container:\n"
    "# change {source} (a runtime change made here lasts until the container restarts).\n"
)


def derive(
    base_values: Mapping[str, str], base: BaseBroker, count: int, step: int, conf_dir: str, source: str
) -> list[BrokerSpec]:
    """``count`` brokers from one broker.conf: ``base_values`` (its lines, RocketMQ names)
    with each broker's own name, ports and store; each written to ``<conf_dir>/<name>-<i>.conf``."""
    specs = []
    for i in range(count):
        name = f"{base.name}-{i}"
        shift = i * step
        own = {
            "brokerName": name,
            "listenHost": base.listen_host,
            "listenPort": str(base.listen_port + shift if base.listen_port else 0),
            "storePathRootDir": str(PurePath(base.store_root) / name),
        }
        if base.ha_port:
            own["haListenPort"] = str(base.ha_port + shift)
        if base.commitlog_dir:
            own["storePathCommitLog"] = str(PurePath(base.commitlog_dir) / name)
        metrics_port = 0
        if base.metrics is not None:
            metrics_port = base.metrics[1] + shift if base.metrics[1] else 0
            own["metricsListen"] = f"{base.metrics[0]}:{metrics_port}"
        values = {**{k: v for k, v in base_values.items() if k not in own}, **own}
        text = DERIVED_HEADER.format(source=source) + "".join(f"{k}={v}\n" for k, v in values.items())
        specs.append(BrokerSpec(
            name=name, broker_id=int(values.get("brokerId", "0") or 0),
            config_path=str(PurePath(conf_dir) / f"{name}.conf"),
            listen_port=int(own["listenPort"]), ha_port=base.ha_port + shift if base.ha_port else 0,
            metrics_port=metrics_port, store_root=own["storePathRootDir"],
            commitlog_dir=own.get("storePathCommitLog", ""), config_text=text,
        ))
    return specs


def conflicts(specs: Sequence[BrokerSpec]) -> list[str]:
    """What two brokers of one container would share: a brokerName and brokerId, a port, a
    store root or a CommitLog directory (each problem once, naming both brokers)."""
    problems: list[str] = []
    seen: dict[tuple[str, object], int] = {}

    def claim(kind: str, value: object, i: int) -> None:
        other = seen.setdefault((kind, value), i)
        if other != i:
            problems.append(f"{specs[other].label} and {specs[i].label} both use {kind} {value}")

    for i, spec in enumerate(specs):
        claim("brokerName/brokerId", f"{spec.name}/{spec.broker_id}", i)
        for port in spec.ports():
            claim("port", port, i)
        claim("store", spec.store_root, i)
        claim("CommitLog directory", spec.commitlog_dir or str(PurePath(spec.store_root) / "commitlog"), i)
    return problems


def child_args(
    spec: BrokerSpec, *, listen: str | None, namesrv: str, broker_ip: str, log_level: str
) -> list[str]:
    """The ``apogee`` arguments of one broker: its file, and the container's -n and
    --broker-ip when given (they win over the file, as on `apogee broker`'s command line).
    ``listen``: HOST:PORT to bind instead of the file's (a restart keeps a free port it got)."""
    args = ["broker", "-c", spec.config_path, "--log-level", log_level]
    if namesrv:
        args += ["-n", namesrv]
    if broker_ip:
        args += ["--broker-ip", broker_ip]
    if listen:
        args += ["--listen", listen]
    return args
