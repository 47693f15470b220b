"""A stored message put again where a rewrite sends it (``rewrite``): a delayed message that
is due, a committed or checked-back half message, a message a consumer hands back.

Everything the rewrite does not decide is the stored message's own: body, flag, born time
and host, reconsume times; the store host is this broker.
"""

from __future__ import annotations

from apogee.broker.rewrite import Placement
from apogee.common import constants as c
from apogee.common.java_hash import tags_code
from apogee.common.message import MessageExt
from apogee.common.message_codec import properties_to_string
from apogee.store.inner import HostAddress, InnerMessage


def reput(
    message: MessageExt,
    placed: Placement,
    store_host: HostAddress,
    *,
    reconsume_times: int | None = None,
    prepared_transaction_offset: int = 0,
) -> InnerMessage:
    """``message`` as the store puts it at ``placed`` (``reconsume_times``: when not the
    message's own)."""
    return InnerMessage(
        topic=placed.topic,
        queue_id=placed.queue_id,
        body=message.body,
        flag=message.flag,
        properties=properties_to_string(placed.properties),
        sysflag=placed.sysflag,
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        store_host=store_host,
        reconsume_times=message.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        tags_code=tags_code(placed.properties.get(c.TAGS)),
    )
