"""The one retry rule of every send: the producer's sync, async, batch and auto-batch sends
and the Spark sink's all ask it after a failed attempt.

An error's category comes from its class (``apogee.errors``: ``Retry``, with the facts from
RocketMQ's ``DefaultMQProducerImpl.sendDefaultImpl``):

* ``RAISE`` -- another attempt cannot help (a refused message, a bad request);
* ``ANOTHER_BROKER`` -- the broker or the way to it failed: try again, on another broker
  when the topic has one (the queue selection skips the broker that failed);
* ``REFRESH_ROUTE`` -- what we know of the topic is stale: fetch its route, then try again.

An attempt is made only while the send has attempts (``1 + retries``) and time (its
timeout) left.  The next attempt goes at once when it goes to another broker, as in
RocketMQ; back to the same broker (a fixed queue, or the only broker) it waits
``PAUSE_S`` times the attempts made, so a broker that is restarting or shedding load is not
asked again within microseconds.  A stored answer that is not SEND_OK (flush or replica
timeout) counts as a failure only with ``retry_another_broker_when_not_store_ok``.

Pure: no I/O, no clock; the sender does the waiting.
"""

from __future__ import annotations

from apogee.errors import ApogeeError, Retry

PAUSE_S = 0.1


def classify(error: BaseException) -> Retry:
    """The category of ``error``: its class's, ``RAISE`` for anything not ours."""
    return error.retry if isinstance(error, ApogeeError) else Retry.RAISE


def after_failure(error: BaseException, attempts_left: int, remaining_ms: float) -> Retry:
    """What to do after an attempt failed with ``error``: ``RAISE`` it, or try again."""
    if attempts_left <= 0 or remaining_ms <= 0:
        return Retry.RAISE
    return classify(error)


def after_stored(ok: bool, retry_not_ok: bool, attempts_left: int) -> bool:
    """True when a stored answer (``ok``: SEND_OK) is to be sent again on another broker
    (RocketMQ's ``retryAnotherBrokerWhenNotStoreOK``)."""
    return not ok and retry_not_ok and attempts_left > 0


def pause_before(same_broker: bool, attempts_made: int) -> float:
    """Seconds to wait before the next attempt."""
    return PAUSE_S * attempts_made if same_broker else 0.0
