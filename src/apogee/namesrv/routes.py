"""RouteTable: the NameServer's routing state (RocketMQ's RouteInfoManager).

Five tables, as RocketMQ's RouteInfoManager keeps them:

* ``topic_queue_table``   topic -> broker name -> QueueData
* ``broker_addr_table``   broker name -> BrokerData (cluster, broker id -> address)
* ``cluster_addr_table``  cluster -> broker names
* ``broker_live_table``   broker address -> BrokerLiveInfo (last heartbeat, data version)
* ``filter_server_table`` broker address -> filter server addresses

This class does no I/O and never reads the clock: callers pass ``now_ms``.

Locking: RocketMQ guards these tables with a ReentrantReadWriteLock so that route reads run
concurrently and a registration is applied atomically.  Here every method runs to
completion on the NameServer's event loop without awaiting, which gives the same guarantee
(a reader never sees half a registration; writers are serialised) with no lock to take.
Encoded route bodies are cached per topic and the cache is dropped on every write, so the
hot read path (GET_ROUTEINFO_BY_TOPIC from every client every 30 s) is a dict lookup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apogee.remoting.bodies.route import (
    MASTER_ID,
    BrokerData,
    DataVersion,
    QueueData,
    TopicConfigData,
    TopicRouteData,
)

PERM_WRITE = 2


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    ha_server_addr: str
    connection_id: object = None  # identity of the connection that registered it


@dataclass
class RegisterResult:
    master_addr: str | None = None
    ha_server_addr: str | None = None


@dataclass
class RouteTable:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    _route_cache: dict[str, TopicRouteData | None] = field(default_factory=dict, repr=False)
    _body_cache: dict[str, bytes | None] = field(default_factory=dict, repr=False)

    # --- writes -------------------------------------------------------------------------------

    def _invalidate(self) -> None:
        self._route_cache.clear()
        self._body_cache.clear()

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: DataVersion,
        topic_configs: dict[str, TopicConfigData] | None,
        filter_servers: list[str],
        now_ms: int,
        connection_id: object = None,
    ) -> RegisterResult:
        """Apply one broker registration (sent at start-up and every 30 s)."""
        self._invalidate()
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)

        broker = self.broker_addr_table.get(broker_name)
        register_first = broker is None
        if broker is None:
            broker = BrokerData(cluster, broker_name)
            self.broker_addr_table[broker_name] = broker
        broker.cluster = cluster
        # The same address under another id means a role switch (slave became master):
        # drop the old id so one address never appears twice.
        for bid, addr in list(broker.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del broker.broker_addrs[bid]
        old_addr = broker.broker_addrs.get(broker_id)
        register_first = register_first or old_addr is None
        broker.broker_addrs[broker_id] = broker_addr

        live = self.broker_live_table.get(broker_addr)
        version_changed = live is None or (
            live.data_version.counter,
            live.data_version.timestamp,
        ) != (data_version.counter, data_version.timestamp)
        if topic_configs is not None and broker_id == MASTER_ID and (version_changed or register_first):
            for config in topic_configs.values():
                self._update_queue_data(broker_name, config)

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, data_version, ha_server_addr, connection_id
        )
        if filter_servers:
            self.filter_server_table[broker_addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(broker_addr, None)

        result = RegisterResult()
        if broker_id != MASTER_ID:
            master = broker.broker_addrs.get(MASTER_ID)
            if master is not None:
                master_live = self.broker_live_table.get(master)
                result.master_addr = master
                result.ha_server_addr = master_live.ha_server_addr if master_live else None
        return result

    def _update_queue_data(self, broker_name: str, config: TopicConfigData) -> None:
        queues = self.topic_queue_table.setdefault(config.topic_name, {})
        queues[broker_name] = QueueData(
            broker_name,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
        )

    def unregister_broker(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self._invalidate()
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker = self.broker_addr_table.get(broker_name)
        removed_name = False
        if broker is not None:
            if broker.broker_addrs.get(broker_id) == broker_addr:
                del broker.broker_addrs[broker_id]
            if not broker.broker_addrs:
                del self.broker_addr_table[broker_name]
                removed_name = True
        if removed_name:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
            self._remove_topics_of(broker_name)

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def remove_broker_by_addr(self, broker_addr: str) -> bool:
        """Forget the broker at ``broker_addr`` (expired, or its connection closed)."""
        for name, broker in list(self.broker_addr_table.items()):
            for bid, addr in list(broker.broker_addrs.items()):
                if addr == broker_addr:
                    self.unregister_broker(broker.cluster, addr, name, bid)
                    return True
        if self.broker_live_table.pop(broker_addr, None) is not None:
            self._invalidate()
            return True
        return False

    def remove_brokers_of_connection(self, connection_id: object) -> list[str]:
        addrs = [
            addr
            for addr, live in self.broker_live_table.items()
            if live.connection_id is connection_id
        ]
        for addr in addrs:
            self.remove_broker_by_addr(addr)
        return addrs

    def scan_expired(self, now_ms: int, expiry_ms: int) -> list[str]:
        """Remove brokers silent for longer than ``expiry_ms``; return their addresses."""
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if now_ms - live.last_update_ms > expiry_ms
        ]
        for addr in expired:
            self.remove_broker_by_addr(addr)
        return expired

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        self._invalidate()
        if cluster is None:
            self.topic_queue_table.pop(topic, None)
            return
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        for name in self.cluster_addr_table.get(cluster, set()):
            queues.pop(name, None)
        if not queues:
            del self.topic_queue_table[topic]

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """Wipe or add the write permission of a broker on every topic; returns the count."""
        self._invalidate()
        changed = 0
        for queues in self.topic_queue_table.values():
            queue = queues.get(broker_name)
            if queue is not None:
                queue.perm = queue.perm | PERM_WRITE if writable else queue.perm & ~PERM_WRITE
                changed += 1
        return changed

    # --- reads --------------------------------------------------------------------------------

    def route_of(self, topic: str) -> TopicRouteData | None:
        """The route clients see for ``topic``, or None when no live broker serves it."""
        if topic in self._route_cache:
            return self._route_cache[topic]
        route: TopicRouteData | None = None
        queues = self.topic_queue_table.get(topic)
        if queues:
            brokers = [
                BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs))
                for name in sorted(queues)
                if (b := self.broker_addr_table.get(name)) is not None
            ]
            if brokers:
                filters = {
                    addr: list(self.filter_server_table[addr])
                    for b in brokers
                    for addr in b.broker_addrs.values()
                    if addr in self.filter_server_table
                }
                route = TopicRouteData(
                    queue_datas=[queues[name] for name in sorted(queues)],
                    broker_datas=brokers,
                    filter_server_table=filters,
                )
        self._route_cache[topic] = route
        return route

    def encoded_route(self, topic: str) -> bytes | None:
        """``route_of(topic)`` as the JSON body clients receive, cached until the next write."""
        body = self._body_cache.get(topic, b"")
        if body == b"":
            route = self.route_of(topic)
            body = route.encode() if route is not None else None
            self._body_cache[topic] = body
        return body

    def data_version_of(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live else None

    def touch(self, broker_addr: str, now_ms: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = now_ms

    def topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, q in self.topic_queue_table.items() if names & q.keys())

    def system_topics(self) -> list[str]:
        """Cluster and broker names, which RocketMQ also treats as topics."""
        return sorted(set(self.cluster_addr_table) | set(self.broker_addr_table))
