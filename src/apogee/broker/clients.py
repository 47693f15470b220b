"""Who is connected: producer and consumer groups, their channels and subscriptions.

RocketMQ's ProducerManager and ConsumerManager, merged: both are keyed by group, hold one
``ClientChannel`` per connection, refresh it on every heartbeat and drop it when the
connection closes or stays silent for ``channel_expired_timeout_ms`` (120 s).  Pure state:
the clock is passed in, and membership changes are returned for the caller to act on
(NOTIFY_CONSUMER_IDS_CHANGED).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apogee.remoting.bodies.heartbeat import ConsumerData, SubscriptionData


@dataclass
class ClientChannel:
    conn: object  # the remoting Connection; opaque here
    client_id: str
    language: int
    version: int
    last_update_ms: int


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[int, ClientChannel] = field(default_factory=dict)  # id(conn) -> channel
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})


class ClientManager:
    def __init__(self) -> None:
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        # Bumped whenever a consumer group's subscription table changes (an entry added,
        # replaced or dropped) or the group goes: a pull's cached verdict (PullProcessor) is
        # taken again after it.
        self.subscriptions_version = 0
        self.producers: dict[str, dict[int, ClientChannel]] = {}
        # client id -> the channel of its latest producer registration (ProducerManager's
        # clientChannelTable): where a reply to that client is pushed.
        self._producer_clients: dict[str, ClientChannel] = {}

    # --- producers ----------------------------------------------------------------------------

    def register_producer(self, group: str, channel: ClientChannel) -> None:
        self.producers.setdefault(group, {})[id(channel.conn)] = channel
        self._producer_clients[channel.client_id] = channel

    def unregister_producer(self, group: str, conn: object) -> None:
        channels = self.producers.get(group)
        if channels is not None:
            channel = channels.pop(id(conn), None)
            if not channels:
                del self.producers[group]
            if channel is not None:
                self._forget_producer_client(channel)

    def _forget_producer_client(self, channel: ClientChannel) -> None:
        """Drop ``channel`` from the client id index once its connection holds no producer group."""
        current = self._producer_clients.get(channel.client_id)
        key = id(channel.conn)
        if current is not None and current.conn is channel.conn and not any(
            key in channels for channels in self.producers.values()
        ):
            del self._producer_clients[channel.client_id]

    def find_producer_channel(self, client_id: str) -> ClientChannel | None:
        """The channel of the producer client ``client_id`` (ProducerManager.findChannel)."""
        return self._producer_clients.get(client_id)

    def producer_channels(self, group: str) -> list[ClientChannel]:
        return list(self.producers.get(group, {}).values())

    # --- consumers ----------------------------------------------------------------------------

    def register_consumer(self, data: ConsumerData, channel: ClientChannel) -> bool:
        """Record a consumer heartbeat; True when the group's set of clients changed."""
        info = self.consumers.get(data.group_name)
        if info is None:
            info = ConsumerGroupInfo(data.group_name)
            self.consumers[data.group_name] = info
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        key = id(channel.conn)
        old = info.channels.get(key)
        changed = old is None or old.client_id != channel.client_id
        info.channels[key] = channel
        # As RocketMQ's ConsumerGroupInfo.updateSubscription: the heartbeat's set replaces the
        # table; a topic's entry changes only when the expression or a newer version arrives.
        wanted: dict[str, SubscriptionData] = {}
        for sub in data.subscriptions:
            current = info.subscriptions.get(sub.topic)
            keep = (
                current is not None and current.sub_version >= sub.sub_version and current.sub_string == sub.sub_string
            )
            wanted[sub.topic] = current if keep and current is not None else sub
        if wanted.keys() != info.subscriptions.keys() or any(
            info.subscriptions[topic] is not sub for topic, sub in wanted.items()
        ):
            self.subscriptions_version += 1
        info.subscriptions = wanted
        return changed

    def unregister_consumer(self, group: str, conn: object) -> bool:
        info = self.consumers.get(group)
        if info is None or info.channels.pop(id(conn), None) is None:
            return False
        if not info.channels:
            del self.consumers[group]
            self.subscriptions_version += 1
        return True

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumers.get(group)
        return info.subscriptions.get(topic) if info else None

    def channel_of(self, conn: object) -> ClientChannel | None:
        key = id(conn)
        for info in self.consumers.values():
            if key in info.channels:
                return info.channels[key]
        for channels in self.producers.values():
            if key in channels:
                return channels[key]
        return None

    # --- connection loss and expiry -----------------------------------------------------------

    def remove_connection(self, conn: object) -> list[str]:
        """Drop every registration of ``conn``; return the consumer groups that changed."""
        changed = [g for g in list(self.consumers) if self.unregister_consumer(g, conn)]
        for group in list(self.producers):
            self.unregister_producer(group, conn)
        return changed

    def expired_connections(self, now_ms: int, timeout_ms: int) -> list[object]:
        conns: dict[int, object] = {}
        for info in self.consumers.values():
            for key, ch in info.channels.items():
                if now_ms - ch.last_update_ms > timeout_ms:
                    conns[key] = ch.conn
        for channels in self.producers.values():
            for key, ch in channels.items():
                if now_ms - ch.last_update_ms > timeout_ms:
                    conns[key] = ch.conn
        return list(conns.values())
