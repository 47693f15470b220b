"""The ACL admin codes (RocketMQ's AdminBrokerProcessor): UPDATE_AND_CREATE_ACL_CONFIG (50),
DELETE_ACL_CONFIG (51), GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

Each edit rewrites one plain_acl.yml file (``acl/plain_file.py``) off the event loop, one edit
at a time, then reloads the rules, so the answer means the change is in force.  A refusal is
RocketMQ's code (209, 210, 211) with a remark saying what is wrong; no secret is ever logged.
The codes are admin-only (``acl/permission.py``).  On a broker without ``aclEnable`` they fail
with a remark saying so (RocketMQ answers them with an empty remark, or not at all for 52).
(GET_BROKER_CLUSTER_ACL_CONFIG, 54, was removed before 4.9.8 and is not served.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from apogee.broker.acl import plain_file
from apogee.broker.acl.rules import AclConfigError
from apogee.broker.acl.service import PlainAcl
from apogee.broker.config import BrokerAddress, BrokerConfig
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from apogee.remoting.server import RequestDispatcher

log = logging.getLogger("apogee.broker.acl")

NOT_ENABLED = "ACL is not enabled on this broker (aclEnable=false): there is no ACL configuration to change or read"


def _now_ms() -> int:
    return int(time.time() * 1000)


class AclAdminProcessor:
    def __init__(self, *, config: BrokerConfig, address: BrokerAddress, acl: PlainAcl | None) -> None:
        self._config = config
        self._address = address
        self._acl = acl

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, self.update_account)
        dispatcher.register(RequestCode.DELETE_ACL_CONFIG, self.delete_account)
        dispatcher.register(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, self.versions)
        dispatcher.register(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, self.update_global_white)

    async def update_account(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = CreateAccessConfigRequestHeader.decode(req.ext_fields)
        return await self._edit(
            conn, req, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, f"accessKey {h.access_key} written to",
            lambda acl: plain_file.update_account(acl.files, acl.rules, h, _now_ms()),
        )

    async def delete_account(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = DeleteAccessConfigRequestHeader.decode(req.ext_fields)

        def delete(acl: PlainAcl) -> Path:
            path = plain_file.delete_account(acl.files, acl.rules, h.access_key, _now_ms())
            if path is None:
                raise AclConfigError(
                    f"The accesskey[{h.access_key}] corresponding to accessConfig has been deleted failed: "
                    "no ACL file defines it"
                )
            return path

        return await self._edit(
            conn, req, ResponseCode.DELETE_ACL_CONFIG_FAILED, f"accessKey {h.access_key} deleted from", delete
        )

    async def update_global_white(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = UpdateGlobalWhiteAddrsConfigRequestHeader.decode(req.ext_fields)
        addresses = plain_file.java_split(h.global_white_addrs) or []
        return await self._edit(
            conn, req, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            f"globalWhiteRemoteAddresses set to {addresses} in",
            lambda acl: plain_file.update_global_white(acl.files, addresses, h.acl_file_full_path, _now_ms()),
        )

    async def _edit(
        self, conn: Connection, req: RemotingCommand, failed: int, done: str, write: Callable[[PlainAcl], Path]
    ) -> RemotingCommand:
        """One edit at a time: ``write`` the file off the loop, then reload the rules, so the
        answer means the change is in force; a refusal answers ``failed`` with the reason."""
        if self._acl is None:
            return req.response(failed, NOT_ENABLED)
        acl = self._acl
        async with acl.edit_lock:
            try:
                path = await asyncio.to_thread(write, acl)
            except (AclConfigError, OSError) as exc:
                log.warning("ACL: an edit (request code %d) from %s:%d refused: %s", req.code, *conn.peer, exc)
                return req.response(failed, str(exc))
            problem = await acl.reload_problem()
        if problem is not None:
            return req.response(
                failed, f"written to {path}, but the ACL files are refused, so the rules in force did not change: "
                f"{problem}"
            )
        log.info("ACL: %s %s by %s:%d", done, path, *conn.peer)
        return req.response(ResponseCode.SUCCESS)

    def versions(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        if self._acl is None:
            return req.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        acl = self._acl
        versions = acl.rules.versions
        default = versions.get(str(acl.files.default_file))
        header = GetBrokerAclConfigResponseHeader(
            version=orjson.dumps(default.to_json() if default is not None else {}).decode(),
            broker_name=self._config.broker_name,
            broker_addr=self._address.addr,
            cluster_name=self._config.broker_cluster_name,
            all_acl_file_version=orjson.dumps({path: v.to_json() for path, v in versions.items()}).decode(),
        )
        return req.response(ResponseCode.SUCCESS, ext_fields=header.encode())
