"""END_TRANSACTION (RocketMQ's EndTransactionProcessor): a producer decides a half message.

Clients send it oneway, so a refusal is only logged; when the request is not oneway the
error comes back as SYSTEM_ERROR with the reason.
"""

from __future__ import annotations

import logging

from apogee.broker.config import BrokerConfig
from apogee.broker.transaction import TransactionService
from apogee.common import constants as c
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.send import EndTransactionRequestHeader
from apogee.remoting.server import RequestDispatcher

log = logging.getLogger("apogee.broker.end_transaction")


class EndTransactionProcessor:
    def __init__(self, *, config: BrokerConfig, transactions: TransactionService) -> None:
        self._config = config
        self._transactions = transactions

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(RequestCode.END_TRANSACTION, self.end_transaction)

    def end_transaction(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.decode(req.ext_fields)
        kind = c.transaction_type(h.commit_or_rollback)
        if kind == c.TRANSACTION_NOT_TYPE:
            log.debug("transaction %s still unknown (from check: %s)", h.msg_id, h.from_transaction_check)
            return None
        if kind not in (c.TRANSACTION_COMMIT_TYPE, c.TRANSACTION_ROLLBACK_TYPE):
            return req.response(ResponseCode.SYSTEM_ERROR, f"commitOrRollback {h.commit_or_rollback} is not 0, 8 or 12")
        if self._config.reject_transaction_message:
            return req.response(ResponseCode.NO_PERMISSION, "this broker rejects transaction messages")
        error = self._transactions.end(
            h.producer_group, h.tran_state_table_offset, h.commit_log_offset,
            commit=kind == c.TRANSACTION_COMMIT_TYPE,
        )
        if error is not None:
            log.warning("END_TRANSACTION for %s refused: %s", h.msg_id, error)
            return req.response(ResponseCode.SYSTEM_ERROR, error)
        return req.response(ResponseCode.SUCCESS)
