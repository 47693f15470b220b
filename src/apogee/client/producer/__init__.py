"""The producer, split by role as aiokafka splits its own.

* ``producer`` -- ``Producer``, the public face: lifecycle, the send calls, backpressure;
* ``validation`` -- what a message must be before it is sent;
* ``accumulator`` -- auto-batching of async sends into batch bodies;
* ``sender`` -- one send from its topic to the broker's answer, with retries (also used by
  the Spark sink);
* ``retry`` -- the one retry rule every send path asks after a failed attempt;
* ``hooks`` -- send hooks around every attempt.
"""

from apogee.client.producer.accumulator import split_batch
from apogee.client.producer.hooks import SendContext, SendHook
from apogee.client.producer.producer import Producer, RequestCallback, SendCallback
from apogee.client.producer.validation import check_topic, validate_message

__all__ = [
    "Producer",
    "RequestCallback",
    "SendCallback",
    "SendContext",
    "SendHook",
    "check_topic",
    "split_batch",
    "validate_message",
]
