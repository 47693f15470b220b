"""The one exception hierarchy of Apogee.

Remote failures travel as a response code and a remark; inside Python they become one of
these classes.  Callers catch ``ApogeeError`` for everything, or a narrower class when they
can act on it.  Some classes also derive from a builtin (``TimeoutError``, ``ValueError``,
``ConnectionError``) so that generic code handles them too.

Each class also says what a client does after a send attempt failed with it (``retry``):
give up, try again on another broker, or refresh the topic's route and try again.  That is
the one retry rule of every send path (the producer's and the Spark sink's, through
``apogee.client.producer.retry``); ``retriable`` is true for the two that try again.  The
categories follow RocketMQ 4.9.8's ``DefaultMQProducerImpl.sendDefaultImpl``: transport
failures (its RemotingException) and a missing broker or route (MQClientException) are
tried again at once on another broker, broker answers (MQBrokerException) only for the
codes of ``DefaultMQProducer.retryResponseCodes`` -- SYSTEM_ERROR, SERVICE_NOT_AVAILABLE,
NO_PERMISSION, TOPIC_NOT_EXIST, NO_BUYER_ID, NOT_IN_CURRENT_UNIT -- and every other answer
is raised.  Apogee adds SYSTEM_BUSY (a broker shedding load: another one may take the
message) and refreshes the route first where the route is what failed (TOPIC_NOT_EXIST, no
route or no master address).
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Retry(enum.Enum):
    """What a client does after a send attempt failed with an error of a class."""

    RAISE = "raise"  # another attempt cannot help
    ANOTHER_BROKER = "retry on another broker"  # the broker (or the path to it) failed
    REFRESH_ROUTE = "refresh the route and retry"  # what we know of the topic is stale


class ApogeeError(Exception):
    """Root of every error Apogee raises on purpose."""

    retry: ClassVar[Retry] = Retry.RAISE
    retriable: ClassVar[bool] = False  # derived from ``retry``, for callers that only ask "again?"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.retriable = cls.retry is not Retry.RAISE


# --- protocol ---------------------------------------------------------------------------------


class ProtocolError(ApogeeError):
    """Bytes on the wire that do not form a valid RemotingCommand frame.

    Never instantiated directly: ``RemoteProtocolError`` means the peer sent garbage (close
    that connection), ``LocalProtocolError`` means we were asked to encode something illegal.
    """

    def __init__(self, message: str) -> None:
        if type(self) is ProtocolError:
            raise TypeError("use LocalProtocolError or RemoteProtocolError")
        super().__init__(message)


class RemoteProtocolError(ProtocolError):
    """The peer sent a frame that cannot be decoded; its connection must be closed."""


class LocalProtocolError(ProtocolError, ValueError):
    """We tried to encode a command that the protocol cannot carry."""


class HeaderError(ApogeeError, ValueError):
    """A request header (extFields) lacks a required field or has a malformed one.

    A server answers it with a response code and this text as the remark; the connection
    stays open.
    """


# --- responses from a server ------------------------------------------------------------------


class RemoteError(ApogeeError):
    """A NameServer or Broker answered with a non-success response code."""

    code: int
    remark: str
    _registry: ClassVar[dict[int, type[RemoteError]]] = {}
    code_value: ClassVar[int | None] = None

    def __init__(self, code: int, remark: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        super().__init__(f"code {code}: {self.remark}" if self.remark else f"code {code}")

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code_value is not None:
            RemoteError._registry[cls.code_value] = cls

    @classmethod
    def for_code(cls, code: int, remark: str | None = None) -> RemoteError:
        """Build the most specific error class registered for a response code."""
        return cls._registry.get(code, RemoteError)(code, remark)


class SystemError_(RemoteError):  # noqa: N801 - the builtin name SystemError is taken
    code_value = 1
    retry = Retry.ANOTHER_BROKER


class SystemBusyError(RemoteError):
    code_value = 2
    retry = Retry.ANOTHER_BROKER  # not in RocketMQ's list: Apogee's addition (see above)


class RequestCodeNotSupportedError(RemoteError):
    code_value = 3


class FlushDiskTimeoutError(RemoteError):
    """A send answered this way was stored (a ``SendStatus``, retried on another broker only
    with ``retry_another_broker_when_not_store_ok``); as an error it is not retried."""

    code_value = 10


class MessageIllegalError(RemoteError, ValueError):
    code_value = 13


class ServiceNotAvailableError(RemoteError):
    code_value = 14
    retry = Retry.ANOTHER_BROKER


class NoPermissionError(RemoteError):
    code_value = 16
    retry = Retry.ANOTHER_BROKER


class TopicNotExistError(RemoteError):
    code_value = 17
    retry = Retry.REFRESH_ROUTE


class QueryNotFoundError(RemoteError):
    code_value = 22


class SubscriptionParseFailedError(RemoteError, ValueError):
    code_value = 23


class NoBuyerIdError(RemoteError):
    code_value = 204
    retry = Retry.ANOTHER_BROKER


class NotInCurrentUnitError(RemoteError):
    code_value = 205
    retry = Retry.ANOTHER_BROKER


# --- client side ------------------------------------------------------------------------------


class ClientError(ApogeeError):
    """A failure detected on the client side, before or without a server answer."""


class RequestTimeoutError(ClientError, TimeoutError):
    """No response arrived within the request's timeout."""

    retry = Retry.ANOTHER_BROKER


class ReplyTimeoutError(ClientError, TimeoutError):
    """A request (``Producer.request``) was sent, but no reply came within its timeout
    (RocketMQ's RequestTimeoutException).  Not a send failure: nothing is retried."""


class ConnectionClosedError(ClientError, ConnectionError):
    """The connection closed (or could not open) while a request was pending."""

    retry = Retry.ANOTHER_BROKER


class NoRouteError(ClientError):
    """No NameServer knows a route for the topic, or no broker of it is reachable."""

    retry = Retry.REFRESH_ROUTE


class MessageValidationError(ClientError, ValueError):
    """A message fails the client's checks (topic, body, properties) before anything is sent."""


class PayloadDecodeError(ClientError, ValueError):
    """A message body does not decode into the type a listener declared (the message is retried)."""


class NameServerUnreachableError(ConnectionClosedError):
    """No NameServer of the configured list answered; the message names them and what to check."""


class TopicMissingError(NoRouteError):
    """A topic an application needs does not exist; the message says how to create it."""

    retriable = False


class ClientStateError(ClientError, RuntimeError):
    """The client was used before ``start()`` or after ``shutdown()``."""


# --- store and configuration ------------------------------------------------------------------


class StoreError(ApogeeError):
    """The message store cannot do what was asked (closed, misconfigured, I/O failure)."""


class CorruptionError(StoreError):
    """Stored bytes fail their checks (magic, size or CRC) where they must be valid."""


class ConfigError(ApogeeError, ValueError):
    """A configuration file or flag has an unknown key or an invalid value."""
