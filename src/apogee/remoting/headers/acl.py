"""Headers of the ACL admin codes 50-53 (RocketMQ 4.9.8's ``common/protocol/header``)."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header


@dataclass
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50); the perm lists are comma-separated ``name=PERM``."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str


@dataclass
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): comma-separated patterns, and the file to write
    (required in RocketMQ's header, though mqadmin leaves it out without -p; absent here means
    the default plain_acl.yml)."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@dataclass
class GetBrokerAclConfigResponseHeader(Header):
    """GET_BROKER_CLUSTER_ACL_INFO (52)'s answer: ``version`` is the default file's DataVersion
    as JSON, ``allAclFileVersion`` a JSON object of file path -> DataVersion."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None
