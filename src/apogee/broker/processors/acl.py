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


def _not_in_force(path: object, problem: str) -> str:
    return f"written to {path}, but the ACL files are refused, so the rules in force did not change: {problem}"


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
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if self._acl is None:
            return req.response(failed, NOT_ENABLED)
        acl = self._acl
        edit = plain_file.AccountEdit.from_header(h)
        async with acl.edit_lock:
            try:
                path = await asyncio.to_thread(plain_file.update_account, acl.files, acl.rules, edit, _now_ms())
            except (AclConfigError, OSError) as exc:
                log.warning("ACL: updating accessKey %s refused: %s", h.access_key, exc)
                return req.response(failed, str(exc))
            problem = await acl.reload_problem()
        if problem is not None:
            return req.response(failed, _not_in_force(path, problem))
        log.info("ACL: accessKey %s written to %s by %s:%d", h.access_key, path, *conn.peer)
        return req.response(ResponseCode.SUCCESS)

    async def delete_account(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = DeleteAccessConfigRequestHeader.decode(req.ext_fields)
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        if self._acl is None:
            return req.response(failed, NOT_ENABLED)
        acl = self._acl
        async with acl.edit_lock:
            try:
                path = await asyncio.to_thread(plain_file.delete_account, acl.files, acl.rules, h.access_key, _now_ms())
            except (AclConfigError, OSError) as exc:
                return req.response(failed, str(exc))
            if path is None:
                return req.response(
                    failed,
                    f"The accesskey[{h.access_key}] corresponding to accessConfig has been deleted failed: "
                    "no ACL file defines it",
                )
            problem = await acl.reload_problem()
        if problem is not None:
            return req.response(failed, _not_in_force(path, problem))
        log.info("ACL: accessKey %s deleted from %s by %s:%d", h.access_key, path, *conn.peer)
        return req.response(ResponseCode.SUCCESS)

    async def update_global_white(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = UpdateGlobalWhiteAddrsConfigRequestHeader.decode(req.ext_fields)
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if self._acl is None:
            return req.response(failed, NOT_ENABLED)
        acl = self._acl
        addresses = plain_file.java_split(h.global_white_addrs) or []
        async with acl.edit_lock:
            try:
                path = await asyncio.to_thread(
                    plain_file.update_global_white, acl.files, addresses, h.acl_file_full_path, _now_ms()
                )
            except (AclConfigError, OSError) as exc:
                return req.response(failed, f"The globalWhiteAddresses[{h.global_white_addrs}] update failed: {exc}")
            problem = await acl.reload_problem()
        if problem is not None:
            return req.response(failed, _not_in_force(path, problem))
        log.info("ACL: globalWhiteRemoteAddresses of %s set to %s by %s:%d", path, addresses, *conn.peer)
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
