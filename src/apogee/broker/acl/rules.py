"""The ACL a broker enforces (RocketMQ's ``PlainPermissionManager``): accounts, whitelists, and
the check every request passes, in RocketMQ 4.9's order.

``AclRules.refusal(ip, code, ext, body)`` answers None (let it through) or the reason, which
the broker sends back as the remark of a SYSTEM_ERROR answer, as RocketMQ does:

1. the peer's IP matches a ``globalWhiteRemoteAddresses`` pattern: through, nothing else checked;
2. the request has an ``AccessKey`` ("No accessKey is configured") that an account has
   ("No acl config for KEY");
3. the peer's IP matches that account's ``whiteRemoteAddress``: through;
4. the ``Signature`` is the HMAC of the request's content (``remoting/signing.py``) with the
   account's secret ("Check signature failed for accessKey=KEY");
5. a send of a trace (PUB on RMQ_SYS_TRACE_TOPIC): through;
6. an admin-only code needs ``admin: true`` ("Need admin permission for request code=C, but
   accessKey=KEY is not");
7. every resource the request touches (``permission.needed``) needs its perm: the account's
   own for that topic or group, else its default for topics or groups ("No default permission
   for topic:T (needs PUB)"), except an admin account that names no resource, which may do all.

Built from the plain_acl.yml documents (``from_documents``) and never changed afterwards: a
reload builds a new one, so a request is judged by one consistent set of rules.  Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apogee.broker.acl import permission as perm
from apogee.broker.acl.addresses import AddressPattern, AddressPatternError, parse_pattern
from apogee.errors import HeaderError
from apogee.remoting.bodies.route import DataVersion
from apogee.remoting.command import Body
from apogee.remoting.signing import (
    ACCESS_KEY,
    ALGORITHMS,
    HMAC_SHA1,
    SERVER_UNSIGNED,
    SIGNATURE,
    SIGNATURE_METHOD,
    UNIQUE_KEY_QUERY,
    Keyed,
    content_head,
    feed,
    matches,
)

# plain_acl.yml keys (RocketMQ's AclConstants).
GLOBAL_WHITE = "globalWhiteRemoteAddresses"
ACCOUNTS = "accounts"
DATA_VERSION = "dataVersion"
KEY_MIN_LENGTH = 6  # accessKey and secretKey must be longer than this (RocketMQ: > 6)
ACCOUNT_KEYS = (
    "accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
    "topicPerms", "groupPerms",
)

# Every refusal's remark starts as RocketMQ's does (the exception's class and message).
REMARK_PREFIX = "org.apache.rocketmq.acl.common.AclException: "
_WHITE_CACHE_LIMIT = 4096


class AclConfigError(ValueError):
    """A plain_acl.yml document (or an edit) RocketMQ would refuse; the message says why,
    never showing a secret."""


def check_keys(access_key: object, secret_key: object) -> None:
    """RocketMQ's ``checkPlainAccessConfig``: both present and longer than 6 characters."""
    if (
        access_key is None or secret_key is None
        or len(str(access_key)) <= KEY_MIN_LENGTH or len(str(secret_key)) <= KEY_MIN_LENGTH
    ):
        raise AclConfigError(
            f"The accessKey={access_key} and its secretKey cannot be null and their length should be longer than "
            f"{KEY_MIN_LENGTH}"
        )


def _flag(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]  # topic, or %RETRY%group -> perm
    path: str  # the file it comes from
    keyed: Keyed = field(repr=False, compare=False)

    @classmethod
    def from_yaml(cls, entry: object, path: str) -> Account:
        """One ``accounts`` entry (RocketMQ's ``buildPlainAccessResource``)."""
        if not isinstance(entry, dict):
            raise AclConfigError(f"{path}: an accounts entry is not a map: {type(entry).__name__}")
        unknown = sorted(set(map(str, entry)) - set(ACCOUNT_KEYS))
        if unknown:
            raise AclConfigError(
                f"{path}: unknown account key(s) {', '.join(unknown)} (known: {', '.join(ACCOUNT_KEYS)})"
            )
        access_key, secret_key = entry.get("accessKey"), entry.get("secretKey")
        check_keys(access_key, secret_key)
        white_text = entry.get("whiteRemoteAddress")
        try:
            white = parse_pattern(None if white_text is None else str(white_text))
            perms = perm.resource_perms(entry.get("groupPerms"), groups=True)
            perms.update(perm.resource_perms(entry.get("topicPerms"), groups=False))
        except (AddressPatternError, perm.PermSyntaxError) as exc:
            raise AclConfigError(f"{path}: accessKey={access_key}: {exc}") from None
        return cls(
            access_key=str(access_key),
            secret_key=str(secret_key),
            white=white,
            admin=_flag(entry.get("admin", False)),
            default_topic_perm=perm.parse_perm(entry.get("defaultTopicPerm")),
            default_group_perm=perm.parse_perm(entry.get("defaultGroupPerm")),
            perms=perms,
            path=path,
            keyed=Keyed(str(secret_key)),
        )

    def lacking(self, needed: Mapping[str, int]) -> str | None:
        """RocketMQ's ``checkPerm`` for the resources: the first one this account may not
        touch, as the refusal's text; None when it may touch them all."""
        if not needed or (self.admin and not self.perms):
            return None
        for resource, wanted in needed.items():
            group = perm.is_group(resource)
            owned = self.perms.get(resource)
            if owned is None:
                owned = self.default_group_perm if group else self.default_topic_perm
            if not perm.check_permission(wanted, owned):
                return (
                    f"No default permission for {perm.describe(resource)} "
                    f"(needs {perm.name_of(wanted)}; accessKey={self.access_key} has {perm.name_of(owned)})"
                )
        return None


def _version(doc: Mapping[str, Any], now_ms: int) -> DataVersion:
    raw = doc.get(DATA_VERSION)
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        try:
            return DataVersion(timestamp=int(raw[0].get("timestamp", 0)), counter=int(raw[0].get("counter", 0)))
        except (TypeError, ValueError):
            raise AclConfigError(f"dataVersion is not [{{counter: N, timestamp: MS}}]: {raw!r}") from None
    return DataVersion(timestamp=now_ms, counter=0)


class AclRules:
    """Accounts and whitelists of every ACL file, and the check (see the module)."""

    def __init__(
        self,
        global_white: Iterable[AddressPattern] = (),
        accounts: Mapping[str, Account] | None = None,
        versions: Mapping[str, DataVersion] | None = None,
        global_white_by_file: Mapping[str, list[str]] | None = None,
        warnings: Iterable[str] = (),
    ) -> None:
        self.global_white = tuple(global_white)
        self.accounts = dict(accounts or {})
        self.versions = dict(versions or {})
        self.global_white_by_file = dict(global_white_by_file or {})
        self.warnings = list(warnings)
        # (access key or "", ip) -> whitelisted: a peer's IP is judged once per rules object.
        self._white: dict[tuple[str, str], bool] = {}

    @classmethod
    def from_documents(cls, documents: Iterable[tuple[str, object]], now_ms: int) -> AclRules:
        """The rules of the parsed files, in order (RocketMQ: ``conf/acl/`` first, the default
        file last); an AccessKey defined twice keeps its first account (with a warning)."""
        white: list[AddressPattern] = []
        accounts: dict[str, Account] = {}
        versions: dict[str, DataVersion] = {}
        white_by_file: dict[str, list[str]] = {}
        warnings: list[str] = []
        for path, doc in documents:
            if doc is None or doc == {}:
                versions[path] = DataVersion(timestamp=now_ms, counter=0)
                continue
            if not isinstance(doc, dict):
                raise AclConfigError(f"{path}: not a map of {GLOBAL_WHITE}, {ACCOUNTS} and {DATA_VERSION}")
            patterns = doc.get(GLOBAL_WHITE) or []
            if not isinstance(patterns, list):
                raise AclConfigError(f"{path}: {GLOBAL_WHITE} must be a list")
            try:
                white.extend(parse_pattern(None if p is None else str(p)) for p in patterns)
            except AddressPatternError as exc:
                raise AclConfigError(f"{path}: {GLOBAL_WHITE}: {exc}") from None
            white_by_file[path] = [str(p) for p in patterns if p is not None]
            entries = doc.get(ACCOUNTS) or []
            if not isinstance(entries, list):
                raise AclConfigError(f"{path}: {ACCOUNTS} must be a list")
            for entry in entries:
                account = Account.from_yaml(entry, path)
                if account.access_key in accounts:
                    warnings.append(
                        f"accessKey {account.access_key} of {path} is already defined in "
                        f"{accounts[account.access_key].path}: the first one is used"
                    )
                    continue
                accounts[account.access_key] = account
            versions[path] = _version(doc, now_ms)
        return cls(white, accounts, versions, white_by_file, warnings)

    # --- the check ----------------------------------------------------------------------------

    def _whitelisted(self, key: str, ip: str, pattern: AddressPattern | None) -> bool:
        cache = self._white
        hit = cache.get((key, ip))
        if hit is None:
            if len(cache) >= _WHITE_CACHE_LIMIT:
                cache.clear()
            hit = any(p.match(ip) for p in self.global_white) if pattern is None else pattern.match(ip)
            cache[(key, ip)] = hit
        return hit

    def refusal(self, ip: str, code: int, ext: Mapping[str, str] | None, body: Body) -> str | None:
        """None when the request may pass, else why not (RocketMQ's text; see the module)."""
        account = self.account_to_verify(ip, ext)
        if not isinstance(account, Account):
            return account
        assert ext is not None
        return self.signed_refusal(account, code, ext, body)

    # The check in steps, for a caller that hashes a large body elsewhere (the broker's
    # dispatcher): ``account_to_verify``, then ``signature_start``, the body fed into the HMAC
    # (``signing.feed``), ``signature_refusal`` and ``permission_refusal``.  ``refusal`` is the
    # same steps in one call.

    def account_to_verify(self, ip: str, ext: Mapping[str, str] | None) -> Account | str | None:
        """Steps 1-3: None (the request passes: a whitelisted address), the refusal, or the
        account whose signature and permissions are to be checked."""
        if self.global_white and self._whitelisted("", ip, None):
            return None
        access_key = ext.get(ACCESS_KEY) if ext else None
        if access_key is None:
            return "No accessKey is configured"
        account = self.accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        if account.white.text and self._whitelisted(access_key, ip, account.white):
            return None
        return account

    def signed_refusal(self, account: Account, code: int, ext: Mapping[str, str], body: Body) -> str | None:
        """Steps 4-7 for ``account`` (from ``account_to_verify``), the body hashed here."""
        started = signature_start(account, ext)
        if isinstance(started, str):
            return started
        feed(started[0], body)
        return signature_refusal(account, ext, body, *started) or self.permission_refusal(account, code, ext, body)

    @staticmethod
    def permission_refusal(account: Account, code: int, ext: Mapping[str, str], body: Body) -> str | None:
        """Steps 5-7, once the signature is known to be good."""
        try:
            needed = perm.needed(code, ext, body)
        except HeaderError as exc:
            return str(exc)
        if needed.get(perm.TRACE_TOPIC) == perm.PUB:
            return None
        if code in perm.ADMIN_CODES and not account.admin:
            return f"Need admin permission for request code={code}, but accessKey={account.access_key} is not"
        return account.lacking(needed)


def signature_start(account: Account, ext: Mapping[str, str]) -> tuple[Any, str] | str:
    """The HMAC of the request's content before its body, and the algorithm; or the refusal
    of a ``SignatureMethod`` that is not HmacSHA1/HmacSHA256."""
    method = ext.get(SIGNATURE_METHOD, HMAC_SHA1)
    if method not in ALGORITHMS:
        return (
            f"Check signature failed for accessKey={account.access_key}: SignatureMethod {method} is not "
            f"one of {', '.join(ALGORITHMS)}"
        )
    return account.keyed.begin(content_head(ext, SERVER_UNSIGNED), method), method


def signature_refusal(account: Account, ext: Mapping[str, str], body: Body, mac: Any, method: str) -> str | None:
    """Step 4 once ``mac`` (from ``signature_start``) has been fed the body: None when the
    request's Signature is the HMAC of its content."""
    given = ext.get(SIGNATURE)
    if matches(account.keyed.finish(mac, method), given):
        return None
    # RocketMQ's Java client (4.9.4 on) signs _UNIQUE_KEY_QUERY too, which its broker leaves
    # out: accept that content as well, so its queries by unique key work here.
    if UNIQUE_KEY_QUERY in ext and matches(account.keyed.sign(content_head(ext, (SIGNATURE,)), body, method), given):
        return None
    return f"Check signature failed for accessKey={account.access_key}"
