"""AdminClient: every operation of RocketMQ's mqadmin that Apogee's CLI offers.

Routes and cluster membership come from the NameServers (``admin.base``); each operation then
talks to the brokers directly.  The operations live in one module per concept (``topics``,
``groups``, ``messages``, ``brokers``, ``namesrv``, ``reports``, ``acl``); this class is all of them.
Given an AccessKey and SecretKey (default ``$APOGEE_ACCESS_KEY``/``$APOGEE_SECRET_KEY``) it
signs every request (ACL, docs/security.md).
Methods return plain values and raise from ``apogee.errors`` or ``apogee.admin.errors``
(``TopicNotFoundError``, ``WrongServerError``, ``RemoteError`` with the broker's code and
remark ...), so the CLI prints one line per failure that names its cause.
"""

from __future__ import annotations

from apogee.admin.acl import AclAdmin, AclVersions
from apogee.admin.base import check
from apogee.admin.groups import QueueProgress
from apogee.admin.messages import FoundMessage, InvalidIdError
from apogee.admin.reports import ReportAdmin

__all__ = ["AclVersions", "AdminClient", "FoundMessage", "InvalidIdError", "QueueProgress", "check"]


class AdminClient(ReportAdmin, AclAdmin):
    """``async with AdminClient("127.0.0.1:9876") as admin: ...``"""

    async def __aenter__(self) -> AdminClient:
        await super().__aenter__()
        return self
