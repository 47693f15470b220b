"""Apogee's native asyncio client for RocketMQ 4.x brokers (and Apogee's own).

Producers, push / pull / lite-pull consumers and their options; ``apogee.client.sync`` has
the same classes for code without an event loop.
"""

from apogee.client.config import ClientConfig, ConsumerConfig, ProducerConfig
from apogee.client.consumer.allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateConsistentHash,
    AllocateStrategy,
)
from apogee.client.consumer.lite_pull import LitePullConsumer
from apogee.client.consumer.pull import PullConsumer
from apogee.client.consumer.push import PushConsumer
from apogee.client.producer import Producer, SendContext, SendHook
from apogee.client.replier import create_reply_message
from apogee.client.selectors import MessageQueueSelector, SelectByHash, SelectRandom, SelectRoundRobin
from apogee.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from apogee.client.types import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeResult,
    MessageModel,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from apogee.common.message import Message, MessageExt, MessageQueue
from apogee.remoting.tls_config import TlsClientConfig

__all__ = [
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateByConfig",
    "AllocateConsistentHash",
    "AllocateStrategy",
    "ClientConfig",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeResult",
    "ConsumerConfig",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "SelectByHash",
    "SelectRandom",
    "SelectRoundRobin",
    "SendContext",
    "SendHook",
    "SendResult",
    "SendStatus",
    "TlsClientConfig",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "create_reply_message",
]
