"""The one exception hierarchy of Apogee.

Remote failures travel as a response code and a remark; inside Python they become one of
these classes.  Callers catch ``ApogeeError`` for everything, or a narrower class when they
can act on it: ``retriable`` tells a client whether trying again (elsewhere) may help.
Some classes also derive from a builtin (``TimeoutError``, ``ValueError``,
``ConnectionError``) so that generic code handles them too.
"""

from __future__ import annotations

from typing import ClassVar


class ApogeeError(Exception):
    """Root of every error Apogee raises on purpose."""

    retriable: ClassVar[bool] = False


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


class SystemBusyError(RemoteError):
    code_value = 2
    retriable = True


class RequestCodeNotSupportedError(RemoteError):
    code_value = 3


class FlushDiskTimeoutError(RemoteError):
    code_value = 10
    retriable = True


class MessageIllegalError(RemoteError, ValueError):
    code_value = 13


class ServiceNotAvailableError(RemoteError):
    code_value = 14
    retriable = True


class NoPermissionError(RemoteError):
    code_value = 16


class TopicNotExistError(RemoteError):
    code_value = 17


class QueryNotFoundError(RemoteError):
    code_value = 22


class SubscriptionParseFailedError(RemoteError, ValueError):
    code_value = 23


# --- client side ------------------------------------------------------------------------------


class ClientError(ApogeeError):
    """A failure detected on the client side, before or without a server answer."""


class RequestTimeoutError(ClientError, TimeoutError):
    """No response arrived within the request's timeout."""

    retriable = True


class ConnectionClosedError(ClientError, ConnectionError):
    """The connection closed (or could not open) while a request was pending."""

    retriable = True


class NoRouteError(ClientError):
    """No NameServer knows a route for the topic, or no broker of it is reachable."""

    retriable = True


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
