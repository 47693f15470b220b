"""The container's settings, under RocketMQ 5's BrokerContainerConfig names (pure).

RocketMQ's ``mqbrokercontainer -c container.conf`` reads ``namesrvAddr`` and
``brokerConfigPaths`` (broker config files separated by ``:``, each a normal broker.conf
with its own brokerName, listenPort and storePathRootDir), and starts one broker per file.
Apogee reads the same file, and adds one convenience of its own: ``brokerCount`` (``--brokers
N``) derives N brokers from one broker.conf (``plan.derive``), so the container file is
then that broker.conf with the container's keys beside the broker's.

RocketMQ's container also serves a port of its own (``listenPort``, 10811, for admin
requests addressed to the container) and can fetch the NameServer list from an address
server.  Apogee's container serves no port (each broker serves its own) and fetches nothing:
``listenPort`` is read so RocketMQ's container files load unchanged and otherwise unused;
``fetchNamesrvAddrByAddressServer=true`` is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apogee.common.config import apply, known_keys, rmq_key, unknown_keys_error
from apogee.errors import ConfigError

# Keys only the container reads; in a derived container's file every other key is the base
# broker's (namesrvAddr is both: the container passes it to every broker).
CONTAINER_ONLY_KEYS = frozenset({
    "brokerConfigPaths", "brokerCount", "brokerPortStep", "fetchNamesrvAddrByAddressServer",
})
# A derived broker's listen port, HA port and metrics port are the base's plus i * step:
# a step below 2 would give one broker's HA port (listen + 1) to the next broker.
MIN_PORT_STEP = 2
MAX_BROKERS = 256


@dataclass
class ContainerConfig:
    # NameServer addresses, ';'-separated; when set, every broker registers there (RocketMQ's
    # container registers its brokers through its own NameServer client).
    namesrv_addr: str = ""
    # Broker config files, separated by ':' (RocketMQ's; also ``-b`` on the command line).
    broker_config_paths: str = ""
    # Apogee's: derive this many brokers from the file's broker settings (0: use brokerConfigPaths).
    broker_count: int = 0
    # Apogee's: derived broker i listens on listenPort + i * brokerPortStep (and its HA and
    # metrics ports move by as much).
    broker_port_step: int = 10
    # RocketMQ's container's own port; Apogee's container serves none (read, not used).
    listen_port: int = field(default=10811, metadata=rmq_key("listenPort"))
    fetch_namesrv_addr_by_address_server: bool = False

    @property
    def derived(self) -> bool:
        """True when the brokers are derived from one config (brokerCount), not listed."""
        return self.broker_count > 0

    def config_paths(self) -> list[str]:
        return [p.strip() for p in self.broker_config_paths.split(":") if p.strip()]

    def validate(self) -> None:
        """The settings a container cannot start with, named."""
        if self.fetch_namesrv_addr_by_address_server:
            raise ConfigError(
                "fetchNamesrvAddrByAddressServer=true: Apogee's brokers do not fetch NameServer addresses "
                "from an address server; set namesrvAddr (or -n)"
            )
        if not 0 <= self.broker_count <= MAX_BROKERS:
            raise ConfigError(f"brokerCount={self.broker_count}: expected 1 to {MAX_BROKERS}")
        if self.derived and self.config_paths():
            raise ConfigError("give brokerCount (--brokers) or brokerConfigPaths (-b), not both")
        if not self.derived and not self.config_paths():
            raise ConfigError("no brokers to run: give --brokers N (brokerCount) or brokerConfigPaths (-b)")
        if self.broker_port_step < MIN_PORT_STEP:
            raise ConfigError(
                f"brokerPortStep={self.broker_port_step}: expected at least {MIN_PORT_STEP} "
                "(each broker uses listenPort and listenPort + 1)"
            )


def load_container_config(
    values: Mapping[str, str], overrides: Mapping[str, str], source: str
) -> tuple[ContainerConfig, dict[str, str]]:
    """The container's settings and the base broker's values, from the container file's
    ``values`` and the command line's ``overrides`` (container keys, RocketMQ names; they win).

    Listing brokers (brokerConfigPaths), every key of the file is the container's.  Deriving
    them (brokerCount), the file is also the base broker.conf: the container takes its own
    keys and namesrvAddr, the base broker every key but the container's own.  A key the
    container does not know is a ConfigError naming it and the closest known key."""
    config = ContainerConfig()
    apply(config, {k: v for k, v in {**values, **overrides}.items() if k == "brokerCount"})
    if config.derived:
        own = {k: v for k, v in values.items() if k in CONTAINER_ONLY_KEYS or k == "namesrvAddr"}
        base = {k: v for k, v in values.items() if k not in CONTAINER_ONLY_KEYS}
    else:
        own, base = dict(values), {}
    unknown = apply(config, {**own, **overrides}, strict=False)
    if unknown:
        raise unknown_keys_error(source, unknown, known_keys(config))
    config.validate()
    return config, base
