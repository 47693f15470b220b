"""ACL commands (mqadmin's updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr), with mqadmin's option letters.

``-b ADDR`` acts on that broker; ``-c CLUSTER`` on every broker of the cluster, slaves included,
as mqadmin does (each broker keeps its own plain_acl.yml); with neither, on every broker the
NameServer knows.  The secret key given is never printed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from apogee.admin.client import AdminClient
from apogee.cli.admin.commands import BOOL, Output, admin_command, admin_group, opt


def _broker_or_cluster(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = opt("c", "clusterName", "--cluster", help="Every broker of this cluster, slaves included.")(fn)
    wrapped: Callable[..., Any] = opt("b", "brokerAddr", help="This broker (host:port).")(fn)
    return wrapped


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [p for p in text.strip().split(",") if p]


@admin_group.admin("update-acl-config", "updateAclConfig")
@_broker_or_cluster
@opt("a", "accessKey", required=True, help="The account's AccessKey (longer than 6 characters).")
@opt("s", "secretKey", required=True, help="Its SecretKey (longer than 6 characters).")
@opt("w", "whiteRemoteAddress", help="Addresses that pass without a signature, e.g. 192.168.1.*.")
@opt("i", "defaultTopicPerm", help="DENY, PUB, SUB or PUB|SUB for topics not listed.")
@opt("u", "defaultGroupPerm", help="DENY, PUB, SUB or PUB|SUB for groups not listed.")
@opt("t", "topicPerms", help="topicA=DENY,topicB=PUB|SUB")
@opt("g", "groupPerms", help="groupA=DENY,groupB=SUB")
@opt("m", "admin", dest="is_admin", type=BOOL, default=False, help="true: the account may use the admin-only codes.")
@admin_command
async def update_acl_config(
    admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None, access_key: str,
    secret_key: str, white_remote_address: str | None, default_topic_perm: str | None,
    default_group_perm: str | None, topic_perms: str | None, group_perms: str | None, is_admin: bool,
) -> None:
    """Add an ACL account to plain_acl.yml, or change the one with this AccessKey."""
    for addr in await admin.acl_targets(broker_addr, cluster_name):
        await admin.update_acl_config(
            addr, access_key.strip(), secret_key.strip(), white_remote_address=white_remote_address,
            admin=is_admin, default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
            topic_perms=_list(topic_perms), group_perms=_list(group_perms),
        )
        out.line(f"create or update plain access config to {addr} success.")
    out.value("accessKey", access_key, "account's accesskey")


@admin_group.admin("delete-acl-config", "deleteAclConfig")
@_broker_or_cluster
@opt("a", "accessKey", required=True, help="The AccessKey of the account to delete.")
@admin_command
async def delete_acl_config(
    admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None, access_key: str
) -> None:
    """Delete an ACL account from the broker's ACL files."""
    for addr in await admin.acl_targets(broker_addr, cluster_name):
        await admin.delete_acl_config(addr, access_key.strip())
        out.line(f"delete plain access config account from {addr} success.")
    out.value("accessKey", access_key, "account's accesskey")


admin_group.aliases["deleteaccessconfig"] = "delete-acl-config"  # mqadmin's other name for it


@admin_group.admin("update-global-white-addr", "updateGlobalWhiteAddr")
@_broker_or_cluster
@opt("g", "globalWhiteRemoteAddresses", required=True, help="Patterns, e.g. 10.10.103.*,192.168.0.*")
@opt("p", "aclFileFullPath", help="The ACL file to change (default: the broker's plain_acl.yml).")
@admin_command
async def update_global_white_addr(
    admin: AdminClient, out: Output, broker_addr: str | None, cluster_name: str | None,
    global_white_remote_addresses: str, acl_file_full_path: str | None,
) -> None:
    """Replace the addresses that pass every ACL check (globalWhiteRemoteAddresses)."""
    addresses = _list(global_white_remote_addresses) or []
    for addr in await admin.acl_targets(broker_addr, cluster_name):
        await admin.update_global_white_addrs(addr, addresses, acl_file_full_path)
        out.line(f"update global white remote addresses to {addr} success.")


@admin_group.admin("cluster-acl-config-version", "clusterAclConfigVersion")
@opt("c", "clusterName", "--cluster", help="Every master of this cluster.")
@opt("b", "brokerAddr", help="This broker (host:port).")
@admin_command
async def cluster_acl_config_version(
    admin: AdminClient, out: Output, cluster_name: str | None, broker_addr: str | None
) -> None:
    """Each broker's ACL files, with their version counter and last update time."""
    rows = []
    for addr in await admin.targets(broker_addr, cluster_name):
        info = await admin.acl_versions(addr)
        for path, version in sorted(info.files.items()):
            when = dt.datetime.fromtimestamp(version.timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S")
            rows.append([info.cluster, info.broker_name, info.broker_addr, path, version.counter, when])
    out.table(["cluster", "broker", "addr", "acl file", "version", "last update"], rows, name="aclConfigVersions")
