"""ACL administration (mqadmin updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr) on RocketMQ's wire: codes 50, 51, 52 and 53 to brokers.

Each broker keeps its own plain_acl.yml, so a cluster-wide change goes to every broker of the
cluster, slaves included, as mqadmin does (``acl_targets``); the version listing asks masters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apogee.admin.base import AdminBase, load_object
from apogee.remoting.bodies.route import DataVersion
from apogee.remoting.codes import RequestCode
from apogee.remoting.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)


@dataclass
class AclVersions:
    """GET_BROKER_CLUSTER_ACL_INFO: a broker's ACL files and each one's data version."""

    cluster: str
    broker_name: str
    broker_addr: str
    version: DataVersion  # of the default plain_acl.yml
    files: dict[str, DataVersion] = field(default_factory=dict)


class AclAdmin(AdminBase):
    async def acl_targets(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """``-b`` the one broker, ``-c`` every broker of the cluster, masters and slaves
        (mqadmin's fetchMasterAndSlaveAddrByClusterName); neither: every broker known."""
        if broker_addr:
            return [broker_addr]
        view = await self.cluster_info()
        names = view.clusters.get(cluster, []) if cluster else [n for ns in view.clusters.values() for n in ns]
        return sorted({a for n in names if n in view.brokers for a in view.brokers[n].broker_addrs.values()})

    async def update_acl_config(
        self,
        broker_addr: str,
        access_key: str,
        secret_key: str,
        *,
        white_remote_address: str | None = None,
        admin: bool = False,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: list[str] | None = None,
        group_perms: list[str] | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG (50): add the account, or change the one with this key
        (fields left None stay as they are, but ``admin``, which is always written)."""
        header = CreateAccessConfigRequestHeader(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=white_remote_address,
            admin=admin,
            default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=",".join(topic_perms) if topic_perms is not None else None,
            group_perms=",".join(group_perms) if group_perms is not None else None,
        )
        await self.call_broker(broker_addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header.encode())

    async def delete_acl_config(self, broker_addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG (51)."""
        header = DeleteAccessConfigRequestHeader(access_key=access_key)
        await self.call_broker(broker_addr, RequestCode.DELETE_ACL_CONFIG, header.encode())

    async def update_global_white_addrs(
        self, broker_addr: str, addresses: list[str], acl_file: str | None = None
    ) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace the file's globalWhiteRemoteAddresses
        (``acl_file``: the broker's default plain_acl.yml when None)."""
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=",".join(addresses), acl_file_full_path=acl_file
        )
        await self.call_broker(broker_addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header.encode())

    async def acl_versions(self, broker_addr: str) -> AclVersions:
        """GET_BROKER_CLUSTER_ACL_INFO (52)."""
        resp = await self.call_broker(broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        h = GetBrokerAclConfigResponseHeader.decode(resp.ext_fields)
        files = load_object((h.all_acl_file_version or "").encode())
        return AclVersions(
            cluster=h.cluster_name,
            broker_name=h.broker_name,
            broker_addr=h.broker_addr,
            version=DataVersion.from_json(load_object(h.version.encode())),
            files={path: DataVersion.from_json(v if isinstance(v, dict) else {}) for path, v in files.items()},
        )
