"""Request-reply (RIP-16) on the replying side: the reply to a request message (pure).

``create_reply_message`` is RocketMQ's ``MessageUtil.createReplyMessage``: the reply goes to
``<cluster>_REPLY_TOPIC`` of the cluster that stored the request (its ``CLUSTER`` property,
which every broker adds), marked ``MSG_TYPE=reply`` and carrying the request's
``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``.  A producer sends a message marked so as
SEND_REPLY_MESSAGE_V2, and the broker pushes it to the requesting client
(``Producer.reply`` does both steps).
"""

from __future__ import annotations

from apogee.common import constants as c
from apogee.common.message import Message
from apogee.errors import MessageValidationError

_CARRIED = (c.PROPERTY_CORRELATION_ID, c.PROPERTY_MESSAGE_REPLY_TO_CLIENT, c.PROPERTY_MESSAGE_TTL)


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request`` (a message a consumer received) with ``body``.

    ``MessageValidationError`` when ``request`` has no ``CLUSTER`` property: it was not
    received from a broker, so no reply topic is known.
    """
    cluster = request.properties.get(c.PROPERTY_CLUSTER)
    if not cluster:
        raise MessageValidationError(
            f"create reply message fail, requestMessage error, property[{c.PROPERTY_CLUSTER}] is null."
        )
    reply = Message(c.reply_topic(cluster), body)
    reply.properties[c.PROPERTY_MESSAGE_TYPE] = c.REPLY_MESSAGE_FLAG
    for name in _CARRIED:
        value = request.properties.get(name)
        if value:
            reply.properties[name] = value
    return reply


def is_reply(msg: Message) -> bool:
    """Is ``msg`` a reply (sent as SEND_REPLY_MESSAGE_V2, pushed to its requester)?"""
    return msg.properties.get(c.PROPERTY_MESSAGE_TYPE) == c.REPLY_MESSAGE_FLAG


def reply_to_client(msg: Message) -> str | None:
    """The client id a request asks its reply to go to (MessageUtil.getReplyToClient)."""
    return msg.properties.get(c.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
