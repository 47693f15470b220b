"""Where an application's client settings come from: arguments > environment > file > defaults.

PURE (reads the file it is given; no sockets, no event loop).

**Keys** are RocketMQ's client property names -- ``namesrvAddr``, ``producerGroup``,
``sendMsgTimeout``, ``consumeThreadMax``, ``maxReconsumeTimes``, ``consumeFromWhere``... --
the same names ``ProducerConfig`` and ``ConsumerConfig`` map their fields to (camel-cased
field names, see ``apogee.common.config``).  A key of the client settings goes to both
configurations; a producer's or consumer's key to that one.  ``consumerGroup`` is not a key:
each listener names its group.

**The file** is a Java ``.properties`` file, as a broker.conf and Spring's
``application.properties`` are, read by the loader every Apogee role uses.  Properties rather
than TOML because the names are RocketMQ's and operators already write them that way: a line
of a Java client's configuration, or of mqadmin's, goes into the file unchanged, and one
loader (with its checks: an unknown key is an error, a bad value names its key) serves every
role.  ``APOGEE_CONFIG`` names the file when the application does not.

**The environment**: ``NAMESRV_ADDR`` as RocketMQ's tools and clients read it, and
``APOGEE_<KEY>`` for every key, the property name in upper snake case
(``APOGEE_NAMESRV_ADDR``, ``APOGEE_PRODUCER_GROUP``, ``APOGEE_SEND_MSG_TIMEOUT``);
``APOGEE_NAMESRV_ADDR`` wins over ``NAMESRV_ADDR``.  Other ``APOGEE_*`` variables belong to
other parts of Apogee and are left alone.

**Arguments** are snake_case field names (``namesrv_addr=``, ``send_timeout_ms=``,
``consume_thread_max=``, ``producer_group=``) and may also set what a file cannot
(``allocate_strategy``, ``latency_max_ms``).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_type_hints

from apogee.client.config import ConsumerConfig, ProducerConfig
from apogee.common.config import apply, key_map, load_file
from apogee.errors import ConfigError

CONFIG_FILE_ENV = "APOGEE_CONFIG"
NAMESRV_ENV = "NAMESRV_ADDR"
ENV_PREFIX = "APOGEE_"
_PER_LISTENER = {"consumerGroup"}


@dataclasses.dataclass
class ClientSettings:
    """The resolved configuration: the producer's, and the one every listener starts from."""

    producer: ProducerConfig
    consumer: ConsumerConfig


def env_name(key: str) -> str:
    """``sendMsgTimeout`` -> ``APOGEE_SEND_MSG_TIMEOUT`` (``clientIP`` -> ``APOGEE_CLIENT_IP``)."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", key)
    return ENV_PREFIX + snake.upper()


def _file_keys(cls: type) -> set[str]:
    """The keys of ``cls`` a file can set: fields of plain types (text, numbers, flags, enums)."""
    hints = get_type_hints(cls)
    keys = set()
    for key, f in key_map(cls).items():
        typ = hints[f.name]
        if typ in (str, int, float, bool) or (isinstance(typ, type) and issubclass(typ, enum.Enum)):
            keys.add(key)
    return keys - _PER_LISTENER


PRODUCER_KEYS = frozenset(_file_keys(ProducerConfig))
CONSUMER_KEYS = frozenset(_file_keys(ConsumerConfig))
KEYS = PRODUCER_KEYS | CONSUMER_KEYS


def resolve(
    *,
    environ: Mapping[str, str],
    config_file: str | Path | None = None,
    explicit: Mapping[str, Any] | None = None,
) -> ClientSettings:
    """Build and validate both configurations from the four layers, highest last applied."""
    producer, consumer = ProducerConfig(), ConsumerConfig()
    path = config_file if config_file is not None else environ.get(CONFIG_FILE_ENV) or None
    if path is not None:
        values = load_file(path)
        unknown = sorted(set(values) - KEYS)
        if unknown:
            raise ConfigError(
                f"{path}: unknown keys {', '.join(unknown)} (client keys are RocketMQ's, e.g. namesrvAddr)"
            )
        _apply(producer, consumer, {key: (value, f"{path}: {key}") for key, value in values.items()})
    env_values = {key: (environ[env_name(key)], env_name(key)) for key in KEYS if env_name(key) in environ}
    if "namesrvAddr" not in env_values and environ.get(NAMESRV_ENV):
        env_values["namesrvAddr"] = (environ[NAMESRV_ENV], NAMESRV_ENV)
    _apply(producer, consumer, env_values)
    for name, value in (explicit or {}).items():
        _set_field(producer, consumer, name, value)
    if not producer.namesrv_list():
        raise ConfigError(
            f"no NameServer configured: set {NAMESRV_ENV}, namesrvAddr in the config file, or App(namesrv_addr=...)"
        )
    producer.validate()
    consumer.validate()
    return ClientSettings(producer, consumer)


def _apply(producer: ProducerConfig, consumer: ConsumerConfig, values: Mapping[str, tuple[str, str]]) -> None:
    """Set each key (value, where it came from) on the configurations that have it."""
    for key, (value, where) in values.items():
        for config, keys in ((producer, PRODUCER_KEYS), (consumer, CONSUMER_KEYS)):
            if key in keys:
                try:
                    apply(config, {key: value})
                except ConfigError as exc:
                    raise ConfigError(f"{where}={value!r}: {str(exc).partition(': ')[2] or exc}") from None


def _set_field(producer: ProducerConfig, consumer: ConsumerConfig, name: str, value: Any) -> None:
    if name == "producer_group":
        producer.group = value
        return
    if name == "group":
        raise ConfigError("group is ambiguous here: pass producer_group=..., and each listener its group")
    found = False
    for config in (producer, consumer):
        if name in {f.name for f in dataclasses.fields(config)}:
            setattr(config, name, value)
            found = True
    if not found:
        raise ConfigError(f"unknown client option {name!r} (options are ProducerConfig and ConsumerConfig fields)")


def consumer_config(base: ConsumerConfig, group: str, options: Mapping[str, Any]) -> ConsumerConfig:
    """A listener's configuration: the application's, its group, its own options on top."""
    config = dataclasses.replace(base, group=group)
    fields = {f.name for f in dataclasses.fields(config)}
    for name, value in options.items():
        if name not in fields or name == "group":
            raise ConfigError(f"unknown consumer option {name!r} for group {group!r}")
        setattr(config, name, value)
    config.validate()
    return config
