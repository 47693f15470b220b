"""BrokerController: wiring and lifecycle of one broker.

Start order: store (recovery happens here), tables, remoting server, the HA port (a
master) or the HA client's store role (a slave), NameServer registration, the HA client,
periodic tasks.  Stop order is the reverse, so that clients are told to go
elsewhere (UNREGISTER_BROKER) before the socket closes, and every table is persisted before
the store shuts down and removes its abort file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from apogee.broker.acl.plain_file import AclFiles
from apogee.broker.acl.service import AclDispatcher, PlainAcl
from apogee.broker.clients import ClientManager
from apogee.broker.config import BrokerAddress, BrokerConfig, BrokerRole, advertised_ip
from apogee.broker.config_update import LIVE_BROKER_KEYS, default_config_path
from apogee.broker.ha.master import HAMaster
from apogee.broker.ha.slave import HASlave
from apogee.broker.ha.sync import SlaveSynchronize
from apogee.broker.locks import RebalanceLockManager
from apogee.broker.long_polling import PullRequestHoldService
from apogee.broker.metrics import SPECS as METRIC_SPECS
from apogee.broker.metrics import BrokerMetrics
from apogee.broker.offsets import SEPARATOR as OFFSET_KEY_SEPARATOR
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.persistence import TableWriter
from apogee.broker.processors.acl import AclAdminProcessor
from apogee.broker.processors.admin import AdminProcessor
from apogee.broker.processors.client_manage import ClientManageProcessor, notify_consumer_ids_changed
from apogee.broker.processors.end_transaction import EndTransactionProcessor
from apogee.broker.processors.pull import PullProcessor
from apogee.broker.processors.relay import ConsumerRelayProcessor
from apogee.broker.processors.reply import ReplyProcessor
from apogee.broker.processors.send import SendProcessor
from apogee.broker.registration import NamesrvRegistrar
from apogee.broker.schedule import ScheduleService
from apogee.broker.stats import BrokerStats, NullBrokerStats
from apogee.broker.subscriptions import SubscriptionGroupManager
from apogee.broker.topics import PERM_RW, TopicConfigManager
from apogee.broker.transaction import TransactionService
from apogee.common.config_update import LiveConfig
from apogee.common.constants import SCHEDULE_TOPIC, parse_delay_levels
from apogee.common.exposure import open_port_warning
from apogee.common.histogram import NullHistogram
from apogee.common.metrics_http import MetricsServer, metrics_address
from apogee.remoting.bodies.route import DataVersion, TopicConfigData
from apogee.remoting.client import RemotingClient
from apogee.remoting.codes import RequestCode
from apogee.remoting.config import RemotingConfig
from apogee.remoting.config_requests import ConfigRequestProcessor
from apogee.remoting.connection import Connection
from apogee.remoting.server import RemotingServer, RequestDispatcher
from apogee.remoting.tls import TlsContexts
from apogee.store.config import StoreConfig
from apogee.store.message_store import MessageStore

log = logging.getLogger("apogee.broker")


class BrokerController:
    def __init__(
        self,
        config: BrokerConfig,
        store_config: StoreConfig,
        remoting: RemotingConfig | None = None,
        *,
        config_file: Path | None = None,
        tls: TlsContexts | None = None,
    ) -> None:
        """``config_file``: the broker.conf given with ``-c``, where runtime config changes
        persist (default ``<storePathRootDir>/config/broker.properties``); ``tls``: the TLS of
        the remoting port, the HA port and the broker's own requests (docs/security.md)."""
        config.validate_role()
        self.config = config
        self.store_config = store_config
        self.remoting_config = remoting or RemotingConfig()
        root = Path(store_config.store_path_root_dir)
        config_dir = root / "config"
        self.delay_levels_ms = parse_delay_levels(store_config.message_delay_level)
        self.store = MessageStore(store_config)
        self.topics = TopicConfigManager(
            config_dir / "topics.json",
            cluster_name=config.broker_cluster_name,
            broker_name=config.broker_name,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            delay_level_count=len(self.delay_levels_ms),
            cluster_topic_enable=config.cluster_topic_enable,
            broker_topic_enable=config.broker_topic_enable,
            trace_topic=config.msg_trace_topic_name if config.trace_topic_enable else None,
        )
        self.offsets = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.subscriptions = SubscriptionGroupManager(
            config_dir / "subscriptionGroup.json",
            auto_create=config.auto_create_subscription_group,
            max_reconsume_times=config.max_reconsume_times,
        )
        self.clients = ClientManager()
        self.locks = RebalanceLockManager(config.rebalance_lock_max_live_time_ms)
        self.long_polling = PullRequestHoldService(config.max_held_pulls_per_connection)
        store_ip, self.store_ip_reason = advertised_ip(config.broker_ip1, config.listen_host)
        self.address = BrokerAddress(store_ip, config.listen_port)
        self.schedule = ScheduleService(self.store, self.delay_levels_ms, self.address, config_dir / "delayOffset.json")
        # Topics, groups and delay progress are written soon after a change (a burst in one
        # write); offsets every flushConsumerOffsetInterval.  All of them at shutdown.
        self.table_writer = TableWriter(
            (self.topics.file, self.subscriptions.file, self.offsets.file, self.schedule.file)
        )
        self.table_writer.watch(self.topics.file, self.subscriptions.file, self.schedule.file)
        max_delay_level = len(self.delay_levels_ms)
        self.transactions = TransactionService(
            config, self.store, self.offsets, self.clients, self.address, max_delay_level
        )
        self.tls = tls
        # ACL on: every request is judged before its processor (broker/acl/service.py).
        self.acl: PlainAcl | None = None
        if config.acl_enable:
            self.acl = PlainAcl(AclFiles.locate(
                config.rocketmq_home, config.acl_plain_file, config_file, store_config.store_path_root_dir
            ))
        self.dispatcher = AclDispatcher(self.acl) if self.acl is not None else RequestDispatcher()
        self.server = RemotingServer(
            self.dispatcher, self.remoting_config, on_connection_closed=self._connection_closed, tls=tls
        )
        self.outbound = RemotingClient(self.remoting_config, tls=tls.outbound if tls is not None else None)
        self.registrar: NamesrvRegistrar | None = None
        # Each processor gets what it uses; the controller only wires them.
        # brokerStatsEnable=false (Apogee's, to measure their cost): statistics that count nothing.
        stats_class = BrokerStats if config.broker_stats_enable else NullBrokerStats
        self.stats = stats_class(config.broker_cluster_name, int(time.time() * 1000))
        if not config.broker_stats_enable:
            self.store.flush_latency = NullHistogram(self.store.flush_latency.bounds)
            self.store.dispatch_latency = NullHistogram(self.store.dispatch_latency.bounds)
        self.send_processor = SendProcessor(
            config=config, store_config=store_config, store=self.store, topics=self.topics,
            subscriptions=self.subscriptions, table_writer=self.table_writer, address=self.address,
            max_delay_level=max_delay_level, topics_changed=self.registrar_trigger, stats=self.stats,
        )
        self.pull_processor = PullProcessor(
            config=config, store=self.store, topics=self.topics, subscriptions=self.subscriptions,
            offsets=self.offsets, clients=self.clients, long_polling=self.long_polling, address=self.address,
            stats=self.stats,
        )
        for processor in (
            self.send_processor,
            self.pull_processor,
            ClientManageProcessor(
                config=config, store=self.store, topics=self.topics, subscriptions=self.subscriptions,
                offsets=self.offsets, clients=self.clients, locks=self.locks, topics_changed=self.registrar_trigger,
            ),
            AdminProcessor(
                config=config, store=self.store, topics=self.topics, subscriptions=self.subscriptions,
                offsets=self.offsets, clients=self.clients, table_writer=self.table_writer,
                delay_offsets=self.schedule.encode, topics_changed=self.registrar_trigger, stats=self.stats,
                ha_info=self._ha_runtime_info,
            ),
            EndTransactionProcessor(config=config, transactions=self.transactions),
            ConsumerRelayProcessor(config=config, store=self.store, clients=self.clients),
            ConfigRequestProcessor(
                LiveConfig(
                    (config, store_config, self.remoting_config), config_file or default_config_path(root),
                    live=LIVE_BROKER_KEYS, now_ms=int(time.time() * 1000),
                ),
                get_code=RequestCode.GET_BROKER_CONFIG, update_code=RequestCode.UPDATE_BROKER_CONFIG,
                version_header=True, on_change=self._config_changed,
            ),
            ReplyProcessor(
                config=config, store_config=store_config, store=self.store, clients=self.clients,
                address=self.address, sends=self.send_processor,
            ),
            AclAdminProcessor(config=config, address=self.address, acl=self.acl),
        ):
            processor.register_with(self.dispatcher)
        self._tasks: list[asyncio.Task[None]] = []
        # Replication: a master serves slaves on its HA port; a slave follows its master.
        self.ha_master: HAMaster | None = None
        self.ha_slave: HASlave | None = None
        self._learnt_master_ha: str | None = None
        self._learnt_master: str | None = None
        self.metrics: MetricsServer | None = None
        self.slave_sync: SlaveSynchronize | None = None
        if config.is_slave:
            self.ha_slave = HASlave(
                self.store, store_config, self._master_ha_address, outbound=self.outbound,
                master_broker=lambda: self._learnt_master, own_addr=lambda: self.broker_addr,
                tls=lambda: tls.ha if tls is not None else None, busy_poll_us=self.remoting_config.busy_poll_us,
            )
            self.slave_sync = SlaveSynchronize(
                self.outbound, own_addr=lambda: self.broker_addr, topics=self.topics,
                subscriptions=self.subscriptions, offsets=self.offsets, schedule=self.schedule,
                table_writer=self.table_writer,
            )
        else:
            self.ha_master = HAMaster(
                self.store, store_config, sync_master=config.broker_role is BrokerRole.SYNC_MASTER,
                tls=tls if tls is not None and tls.server_config.ha_enable else None,
                busy_poll_us=self.remoting_config.busy_poll_us,
            )
            self.ha_master.register_with(self.dispatcher)

    # --- addresses ----------------------------------------------------------------------------

    @property
    def broker_addr(self) -> str:
        """The address registered with NameServers and written into STOREHOST."""
        return self.address.addr

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> tuple[str, int]:
        # The store is loaded and recovered before the port opens (as RocketMQ loads it
        # first): a client that still knows this address from before a crash must not pull
        # or query offsets from queue tables recovery is still rebuilding.
        await self.store.start()
        if self.ha_slave is not None:
            self.store.serve_as_slave()
        host, port = await self.server.start(self.config.listen_host, self.config.listen_port)
        self.address.bind(port)
        warning = open_port_warning("broker", self.config.listen_host, acl=self.acl is not None)
        if warning is not None:
            log.warning("%s", warning)
        if self.acl is not None:
            self.acl.start()
        log.info("advertising %s to NameServers and in STOREHOST: %s", self.broker_addr, self.store_ip_reason)
        ha_port = self.store_config.ha_listen_port or (port + 1 if self.config.listen_port else 0)
        if self.ha_master is not None:
            ha_port = await self.ha_master.start(self.config.listen_host, ha_port)
        self.store.add_arrival_listener(self._message_arrived)
        self.store.set_committed_offsets(self._committed_offsets)
        if self.ha_slave is None:  # a slave writes nothing itself (RocketMQ starts these on masters only)
            self.schedule.start()
            self.transactions.start()
        namesrvs = self.config.namesrv_list()
        self.registrar = NamesrvRegistrar(
            self.outbound,
            namesrvs,
            cluster=self.config.broker_cluster_name,
            broker_name=self.config.broker_name,
            broker_id=self.config.broker_id,
            broker_addr=self.broker_addr,
            ha_addr=f"{self.config.broker_ip2 or self.address.ip}:{ha_port}",
            timeout_ms=self.config.register_broker_timeout_ms,
            period_ms=self.config.register_name_server_period_ms,
            snapshot=self._topic_snapshot,
            on_master=self._master_learnt if self.ha_slave is not None else None,
        )
        if namesrvs:
            accepted = await self.registrar.register_all()
            log.info("registered with %d of %d NameServers", accepted, len(namesrvs))
        self.registrar.start()
        if self.ha_slave is not None:
            self.ha_slave.start()
        if self.slave_sync is not None:
            self.slave_sync.start()
        self._tasks.append(asyncio.create_task(self._persist_loop()))
        self._tasks.append(asyncio.create_task(self._expire_clients_loop()))
        self._tasks.append(asyncio.create_task(self._stats_loop()))
        await self._start_metrics()
        return host, port

    async def _start_metrics(self) -> None:
        """/metrics on metricsListen, when set (common/metrics_http: read on this loop)."""
        where = metrics_address(self.config.metrics_listen, self.config.listen_host)
        if where is None:
            return
        source = BrokerMetrics(
            cluster=self.config.broker_cluster_name, broker=self.config.broker_name, address=self.broker_addr,
            store=self.store, topics=self.topics, offsets=self.offsets, clients=self.clients, stats=self.stats,
            server=self.server, table_writer=self.table_writer,
        )
        self.metrics = MetricsServer(METRIC_SPECS, source.parts)
        await self.metrics.start(*where)

    def _master_ha_address(self) -> str | None:
        """Where the slave's HA client connects: haMasterAddress, else what the NameServers said."""
        return self.store_config.ha_master_address or self._learnt_master_ha

    def _ha_runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's HA keys (docs/replication.md, Operations)."""
        info = {"haRole": self.config.broker_role.value}
        if self.ha_master is not None:
            info.update(self.ha_master.runtime_info())
        if self.ha_slave is not None:
            info.update(self.ha_slave.runtime_info())
        return info

    def _master_learnt(self, master_addr: str, ha_addr: str) -> None:
        self._learnt_master = master_addr or None
        if self.slave_sync is not None:
            self.slave_sync.master_addr = master_addr
        if ha_addr != self._learnt_master_ha:
            log.info("master of %s is %s (HA address %s)", self.config.broker_name, master_addr, ha_addr)
            self._learnt_master_ha = ha_addr
            if self.ha_slave is not None:
                self.ha_slave.address_known.set()

    def _topic_snapshot(self) -> tuple[DataVersion, dict[str, TopicConfigData]]:
        """The topics registered with NameServers; a broker that may not be written (or read)
        masks every topic's permission with its own, as RocketMQ's registerBrokerAll."""
        perm = self.config.broker_permission
        table = dict(self.topics.table)
        if perm & PERM_RW != PERM_RW:
            table = {name: dataclasses.replace(tc, perm=tc.perm & perm) for name, tc in table.items()}
        return self.topics.data_version, table

    def _config_changed(self, keys: set[str]) -> None:
        """After UPDATE_BROKER_CONFIG: a new brokerPermission is registered at once, with a new
        topic data version so that NameServers take the masked permissions (RocketMQ's)."""
        if "brokerPermission" in keys:
            version = self.topics.data_version
            self.topics.data_version = DataVersion(int(time.time() * 1000), version.counter + 1)
            self.registrar_trigger()

    def reload_tls(self) -> None:
        """SIGHUP: new certificates for the connections accepted or opened from now on; open
        ones keep theirs (``TlsContexts.reload``)."""
        if self.tls is None:
            log.info("SIGHUP: no TLS configured, nothing to reload")
            return
        if self.tls.reload():
            self.outbound.tls = self.tls.outbound

    def registrar_trigger(self) -> None:
        if self.registrar is not None:
            self.registrar.trigger()

    async def stop(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
        if self.registrar is not None and self.config.namesrv_list():
            await self.registrar.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.slave_sync is not None:
            await self.slave_sync.close()
        if self.ha_slave is not None:
            await self.ha_slave.close()
        if self.ha_master is not None:
            await self.ha_master.close()
        self.long_polling.wake_all()
        await self.schedule.stop()
        await self.transactions.stop()
        if self.acl is not None:
            await self.acl.stop()
        await self.server.close()
        await self.outbound.close()
        await self.table_writer.close()
        await self.store.shutdown()

    async def _persist_loop(self) -> None:
        """Every table that is behind its file, written; a failure is logged and retried."""
        interval = self.config.flush_consumer_offset_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.table_writer.save_all()

    async def _stats_loop(self) -> None:
        """The statistics' samples, once a second (RocketMQ samples on the same clock)."""
        while True:
            now = time.time()
            self.stats.tick(int(now * 1000), time.localtime(now).tm_yday)
            await asyncio.sleep(1.0)

    async def _expire_clients_loop(self) -> None:
        timeout = self.config.channel_expired_timeout_ms
        while True:
            await asyncio.sleep(min(10.0, timeout / 4000))
            now = int(time.time() * 1000)
            for conn in self.clients.expired_connections(now, timeout):
                if isinstance(conn, Connection):
                    log.warning("closing silent client connection from %s:%d", *conn.peer)
                    conn.close(f"no heartbeat for {timeout} ms")
                self._forget_connection(conn)

    # --- clients ------------------------------------------------------------------------------

    def _connection_closed(self, conn: Connection) -> None:
        self._forget_connection(conn)

    def _forget_connection(self, conn: object) -> None:
        for group in self.clients.remove_connection(conn):
            notify_consumer_ids_changed(self.clients, group)

    def _committed_offsets(self) -> Iterator[tuple[str, str, int, int]]:
        """(group, topic, queue id, next offset) of every committed offset, for the store's
        report of what a cleanup deletes before it was consumed."""
        for key, queues in self.offsets.table.items():
            topic, _, group = key.partition(OFFSET_KEY_SEPARATOR)
            for queue_id, offset in queues.items():
                yield group, topic, queue_id, offset

    def _message_arrived(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None, properties: object
    ) -> None:
        if topic == SCHEDULE_TOPIC:
            self.schedule.notify_arrival(queue_id)
        else:
            self.long_polling.notify(topic, queue_id, max_offset, tags_code)
