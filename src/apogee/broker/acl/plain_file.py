"""plain_acl.yml: where the ACL files are, reading them, and the edits of codes 50, 51 and 53.

Where (RocketMQ's ``PlainPermissionManager``): the default file ``<home>/conf/plain_acl.yml``
(``aclPlainFile`` changes it: absolute, or relative to the home, as RocketMQ's
``-Drocketmq.acl.plain.file``) and every ``*.yml``/``*.yaml`` under ``<home>/conf/acl/``
(sub-directories too, ``tools.yml`` not), those first, the default file last.  The home is
``rocketmqHome`` (default ``$ROCKETMQ_HOME``, RocketMQ's); without one, the directory of the
broker.conf given with ``-c`` plays ``<home>/conf`` (RocketMQ keeps both files there); without
that, ``<storePathRootDir>/conf``.

The edits rewrite one file as RocketMQ does (read the YAML, change it, bump its
``dataVersion``, write it back): a new account goes to the default file, a changed or deleted
one to the file that defines it.  Files are replaced atomically (temp file, fsync, rename), so a
reader never sees half a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from apogee.broker.acl import permission as perm
from apogee.broker.acl.addresses import AddressPatternError, parse_pattern
from apogee.broker.acl.rules import ACCOUNTS, DATA_VERSION, GLOBAL_WHITE, AclConfigError, AclRules, check_keys
from apogee.common.atomic_file import write_atomic
from apogee.remoting.headers.acl import CreateAccessConfigRequestHeader

DEFAULT_FILE = "plain_acl.yml"  # in <home>/conf
ACL_DIR = "acl"  # <home>/conf/acl
TOOLS_FILE = "tools.yml"  # mqadmin's credentials, never an ACL file
SUFFIXES = (".yml", ".yaml")

Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class AclFiles:
    """The ACL files of one broker: ``conf`` (``<home>/conf``), the default file and the
    directory merged with it."""

    conf: Path
    default_file: Path
    directory: Path

    @classmethod
    def locate(
        cls, rocketmq_home: str, acl_plain_file: str, config_file: Path | None, store_root: str | Path
    ) -> AclFiles:
        """See the module: ``rocketmqHome``, else the ``-c`` file's directory, else the store's."""
        if rocketmq_home:
            home = Path(rocketmq_home).expanduser().resolve()
            conf = home / "conf"
        elif config_file is not None:
            home = config_file.resolve().parent.parent
            conf = config_file.resolve().parent
        else:
            home = Path(store_root).expanduser().resolve()
            conf = home / "conf"
        if acl_plain_file:
            named = Path(acl_plain_file).expanduser()
            default = named if named.is_absolute() else home / named
        else:
            default = conf / DEFAULT_FILE
        return cls(conf, default.resolve(), conf / ACL_DIR)

    def paths(self) -> list[Path]:
        """Every ACL file, in the order they are merged (see the module)."""
        found = sorted(_yaml_files(self.directory)) if self.directory.is_dir() else []
        if self.default_file.is_file() and self.default_file not in found:
            found.append(self.default_file)
        return found

    def stamp(self) -> Stamp:
        """What changes when a file is added, removed or written (polled by the watcher)."""
        out = []
        for path in self.paths():
            try:
                st = path.stat()
            except OSError:
                continue
            out.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(out)

    def ensure_default(self) -> bool:
        """Create an empty default file when there is none (RocketMQ does); True if created."""
        if self.default_file.exists():
            return False
        self.default_file.parent.mkdir(parents=True, exist_ok=True)
        self.default_file.touch()
        return True

    def load(self, now_ms: int) -> AclRules:
        """The rules of every file; ``AclConfigError`` names the file and what is wrong."""
        return AclRules.from_documents(((str(p), read_yaml(p)) for p in self.paths()), now_ms)

    def owns(self, path: Path) -> bool:
        """Whether ``path`` is an ACL file this broker reads (code 53 may only write those)."""
        return path.resolve() in self.paths()


def java_split(text: str | None) -> list[str] | None:
    """RocketMQ's ``UtilAll.split(text, ",")``: Java's ``String.split``, which drops trailing
    empty strings (but keeps the one of an empty text)."""
    if text is None:
        return None
    parts = text.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _yaml_files(directory: Path) -> Iterator[Path]:
    for entry in directory.iterdir():
        if entry.is_dir():
            yield from _yaml_files(entry)
        elif entry.name.endswith(SUFFIXES) and entry.name != TOOLS_FILE:
            yield entry.resolve()


def read_yaml(path: Path) -> object:
    """The parsed file (None when empty or gone); ``AclConfigError`` for YAML it cannot read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: not valid YAML: {exc}") from None


def _document(path: Path) -> dict[str, Any]:
    doc = read_yaml(path)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise AclConfigError(f"{path}: not a map of {GLOBAL_WHITE}, {ACCOUNTS} and {DATA_VERSION}")
    return doc


def _write(path: Path, doc: dict[str, Any], now_ms: int) -> None:
    """Bump the file's dataVersion (RocketMQ's ``updateAclConfigFileVersion``) and replace it."""
    counter = 0
    raw = doc.get(DATA_VERSION)
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        try:
            counter = int(raw[0].get("counter", 0))
        except (TypeError, ValueError):
            counter = 0
    doc[DATA_VERSION] = [{"counter": counter + 1, "timestamp": now_ms}]
    text = yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, allow_unicode=True)
    write_atomic(path, text.encode("utf-8"), keep_backup=False)


def check_edit(h: CreateAccessConfigRequestHeader) -> None:
    """RocketMQ's checks of an UPDATE_AND_CREATE_ACL_CONFIG before writing (key lengths,
    ``Res=Perm`` entries), plus the address pattern and the default perm names, so that a bad
    edit never reaches the file."""
    check_keys(h.access_key or None, h.secret_key)
    try:
        perm.resource_perms(java_split(h.topic_perms), groups=False)
        perm.resource_perms(java_split(h.group_perms), groups=True)
        parse_pattern(h.white_remote_address)
    except (perm.PermSyntaxError, AddressPatternError) as exc:
        raise AclConfigError(str(exc)) from None
    for name in (h.default_topic_perm, h.default_group_perm):
        if name and name.strip() not in perm.PERM_NAMES:
            raise AclConfigError(f"default permission {name!r} is not one of {', '.join(perm.PERM_NAMES)}")


def merged(existing: Mapping[str, Any] | None, h: CreateAccessConfigRequestHeader) -> dict[str, Any]:
    """RocketMQ's ``createAclAccessConfigMap``: the account's map with the edit applied (fields
    the edit leaves out stay; ``admin`` is always written)."""
    out = dict(existing or {})
    out["accessKey"] = h.access_key
    if h.secret_key:
        out["secretKey"] = h.secret_key
    if h.white_remote_address is not None:
        out["whiteRemoteAddress"] = h.white_remote_address
    out["admin"] = h.admin
    if h.default_topic_perm:
        out["defaultTopicPerm"] = h.default_topic_perm
    if h.default_group_perm:
        out["defaultGroupPerm"] = h.default_group_perm
    for key, value in (("topicPerms", h.topic_perms), ("groupPerms", h.group_perms)):
        if value is not None:
            out[key] = java_split(value)
    return out


def update_account(files: AclFiles, rules: AclRules, edit: CreateAccessConfigRequestHeader, now_ms: int) -> Path:
    """Code 50: change the account where it is defined, else add it to the default file;
    the file written."""
    check_edit(edit)
    known = rules.accounts.get(edit.access_key)
    path = Path(known.path) if known is not None else files.default_file
    doc = _document(path)
    accounts = doc.get(ACCOUNTS)
    if not isinstance(accounts, list):
        accounts = []
    existing = None
    for i, entry in enumerate(accounts):
        if isinstance(entry, dict) and str(entry.get("accessKey")) == edit.access_key:
            existing = accounts.pop(i)
            break
    accounts.append(merged(existing, edit))
    doc[ACCOUNTS] = accounts
    _write(path, doc, now_ms)
    return path


def delete_account(files: AclFiles, rules: AclRules, access_key: str, now_ms: int) -> Path | None:
    """Code 51: remove the account from its file; None when no file defines it."""
    known = rules.accounts.get(access_key) if access_key else None
    if known is None:
        return None
    path = Path(known.path)
    doc = _document(path)
    accounts = doc.get(ACCOUNTS)
    if not isinstance(accounts, list):
        return None
    kept = [e for e in accounts if not (isinstance(e, dict) and str(e.get("accessKey")) == access_key)]
    if len(kept) == len(accounts):
        return None
    doc[ACCOUNTS] = kept
    _write(path, doc, now_ms)
    return path


def update_global_white(files: AclFiles, addresses: list[str], file_name: str | None, now_ms: int) -> Path:
    """Code 53: replace ``globalWhiteRemoteAddresses`` of ``file_name`` (absent: the default
    file), which must be one of this broker's ACL files; every pattern is checked first."""
    path = Path(file_name).resolve() if file_name else files.default_file
    if file_name and not files.owns(path):
        raise AclConfigError(
            f"{file_name} is not one of this broker's ACL files ({files.default_file} and the .yml files "
            f"under {files.directory})"
        )
    try:
        for address in addresses:
            parse_pattern(address)
    except AddressPatternError as exc:
        raise AclConfigError(str(exc)) from None
    doc = _document(path)
    doc[GLOBAL_WHITE] = list(addresses)
    _write(path, doc, now_ms)
    return path


def describe_location(files: AclFiles) -> str:
    extra = f" and {files.directory}{os.sep}*.yml" if files.directory.is_dir() else ""
    return f"{files.default_file}{extra}"
