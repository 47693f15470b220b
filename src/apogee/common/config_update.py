"""Changing a running server's settings: UPDATE_BROKER_CONFIG (25) and UPDATE_NAMESRV_CONFIG (318).

RocketMQ's ``Configuration.update`` sets every key it is sent on the config objects and
rewrites the configuration file; a key the running code copied at start silently keeps its
old effect until a restart, and an unknown key is silently dropped.  Apogee applies only the
keys whose readers look at the config object on every use (``live``), and refuses the whole
request otherwise, naming each key and why: unknown (with the closest known key), an invalid
value, read only at start, or never changeable by a request (``never``: where the
configuration itself lives).  A refused request changes nothing.

What was changed is persisted as RocketMQ persists it -- into the file given with ``-c``, or
the default path when there was none -- so a restart keeps it.  Apogee rewrites only the
changed keys' lines of that file (RocketMQ writes every setting and loses the comments).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from apogee.common.atomic_file import write_atomic
from apogee.common.config import apply, did_you_mean, known_keys, properties_text, property_line
from apogee.errors import ConfigError

_CHANGED, _SAME, _RESTART, _BAD = "changed", "same", "restart", "bad"


@dataclass
class ConfigUpdate:
    """What a request asks: the keys to change (RocketMQ name -> value text) and the
    reasons it is refused (empty when it may be applied)."""

    changes: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # Every problem is a key that only a restart (or the file) can change: the caller answers
    # NO_PERMISSION as RocketMQ answers its black list, else SYSTEM_ERROR (a bad request).
    restart_only: bool = False


class LiveConfig:
    """The settings of one server that requests may read and change, and where they persist.

    ``configs`` are the dataclasses the server's components read (BrokerConfig,
    StoreConfig ...), shared by reference, so a change is seen by the next read.  The data
    version (GET_BROKER_CONFIG's ``version`` header) counts the changes, as RocketMQ's.
    """

    def __init__(
        self,
        configs: Sequence[object],
        path: Path,
        *,
        live: Iterable[str],
        never: Iterable[str] = (),
        now_ms: int,
    ) -> None:
        self.configs = tuple(configs)
        self.path = path
        self.live = frozenset(live)
        self.never = frozenset(never)
        self.known = known_keys(*self.configs)
        self.counter = 0
        self.timestamp = now_ms

    def text(self) -> str:
        """Every setting as ``key=value`` lines (GET_BROKER_CONFIG / GET_NAMESRV_CONFIG)."""
        return properties_text(*self.configs)

    def version(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    def plan(self, values: Mapping[str, str]) -> ConfigUpdate:
        """Check ``values`` against the known keys, their types and ``live``; change nothing."""
        update = ConfigUpdate()
        kinds = set()
        for key, value in values.items():
            problem, kind = self._check(key, value)
            if problem is not None:
                update.problems.append(problem)
                kinds.add(kind)
            elif kind == _CHANGED:
                update.changes[key] = value.strip()
        update.restart_only = kinds == {_RESTART}
        return update

    def _check(self, key: str, value: str) -> tuple[str | None, str]:
        """(the reason ``key=value`` is refused or None, what kind of answer it is)."""
        if key in self.never:
            return f"{key} cannot be changed by a request: it says where the configuration lives", _RESTART
        if key not in self.known:
            return f"unknown key {key}{did_you_mean(key, self.known)}", _BAD
        changed = False
        for config in self.configs:
            probe = copy.copy(config)
            try:
                apply(probe, {key: value}, strict=False)
            except ConfigError as exc:
                return str(exc), _BAD
            changed |= probe != config
        if not changed:
            return None, _SAME
        if key not in self.live:
            return (
                f"{key} is read only at start: change it in {self.path} and restart "
                f"(keys changeable at runtime: {', '.join(sorted(self.live))})"
            ), _RESTART
        return None, _CHANGED

    def apply(self, update: ConfigUpdate, now_ms: int) -> None:
        """Set the planned changes on the config objects and count a new data version."""
        for config in self.configs:
            apply(config, update.changes, strict=False)
        self.counter += 1
        self.timestamp = now_ms

    def persist(self, changes: Mapping[str, str]) -> None:
        """Write ``changes`` into the configuration file (blocking: call it off the event loop)."""
        try:
            old = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            old = ""
        write_atomic(self.path, rewrite_properties(old, changes).encode("utf-8"))


def rewrite_properties(text: str, changes: Mapping[str, str]) -> str:
    """``text`` with the lines of the changed keys replaced and the keys it lacked appended;
    every other line (comments included) kept as it was."""
    out: list[str] = []
    written: set[str] = set()
    for raw in text.splitlines():
        parsed = property_line(raw)
        if parsed is not None and parsed[0] in changes:
            key = parsed[0]
            out.append(f"{key}={changes[key]}")
            written.add(key)
        else:
            out.append(raw)
    missing = [key for key in changes if key not in written]
    if missing and _RUNTIME_HEADER not in out:
        if out and out[-1].strip():
            out.append("")
        out.append(_RUNTIME_HEADER)
    if missing:
        out.extend(f"{key}={changes[key]}" for key in missing)
    return "\n".join(out) + "\n"


_RUNTIME_HEADER = "# changed at runtime (UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG)"
