"""NameServer request handling: each request code becomes one call on the route or KV table.

Thin by design: parsing headers and bodies, calling ``RouteTable``/``KVConfig``, and building
the response RocketMQ clients expect (codes and remarks as Java's DefaultRequestProcessor and
ClientRequestProcessor send them).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import Counter
from collections.abc import Callable

import orjson

from apogee.errors import HeaderError
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.kv_config import ORDER_TOPIC_CONFIG, KVConfig
from apogee.namesrv.routes import RouteTable
from apogee.remoting.bodies.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicRouteData,
    encode_cluster_info,
    encode_kv_table,
    encode_topic_list,
)
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from apogee.remoting.server import Processor, ProcessorResult, RequestDispatcher

log = logging.getLogger("apogee.namesrv.processor")

NO_ROUTE_REMARK = "No topic route info in name server for the topic: {topic}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class NamesrvProcessor:
    """Owns the request handlers; state lives in ``routes`` and ``kv``."""

    def __init__(
        self,
        config: NamesrvConfig,
        routes: RouteTable,
        kv: KVConfig,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.config = config
        self.routes = routes
        self.kv = kv
        self._clock_ms = clock_ms
        self.requests: Counter[int] = Counter()  # request code -> requests answered

    def register_with(self, dispatcher: RequestDispatcher) -> None:
        handlers = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
        }
        for code, handler in handlers.items():
            dispatcher.register(code, self._counted(int(code), handler))

    def _counted(self, code: int, handler: Processor) -> Processor:
        """``handler`` counting its requests in ``self.requests`` (the /metrics request counts)."""
        requests = self.requests

        def counted(conn: Connection, req: RemotingCommand) -> ProcessorResult:
            requests[code] += 1
            return handler(conn, req)

        return counted

    # --- brokers ------------------------------------------------------------------------------

    def register_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.decode(req.ext_fields)
        body = req.body_bytes()
        if header.body_crc32 != 0 and body and (zlib.crc32(body) & 0x7FFFFFFF) != header.body_crc32:
            log.warning("register from %s rejected: body CRC mismatch", header.broker_addr)
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        parsed = RegisterBrokerBody.decode(body, header.compressed)
        result = self.routes.register_broker(
            cluster=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            data_version=parsed.data_version,
            topic_configs=parsed.topic_configs if body else None,
            filter_servers=parsed.filter_server_list,
            now_ms=self._clock_ms(),
            connection_id=conn,
        )
        log.debug("registered broker %s (%s) id %d", header.broker_name, header.broker_addr, header.broker_id)
        response_header = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        return req.response(
            ResponseCode.SUCCESS,
            ext_fields=response_header.encode(),
            body=encode_kv_table(self.kv.namespace(ORDER_TOPIC_CONFIG)),
        )

    def unregister_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.decode(req.ext_fields)
        self.routes.unregister_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
        )
        log.info("unregistered broker %s (%s)", header.broker_name, header.broker_addr)
        return req.response(ResponseCode.SUCCESS)

    def query_data_version(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.decode(req.ext_fields)
        try:
            theirs = DataVersion.from_json(orjson.loads(req.body_bytes() or b"{}"))
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
            raise HeaderError(f"malformed DataVersion body: {exc}") from None
        ours = self.routes.data_version_of(header.broker_addr)
        changed = ours is None or (ours.counter, ours.timestamp) != (theirs.counter, theirs.timestamp)
        if not changed:
            self.routes.touch(header.broker_addr, self._clock_ms())
        return req.response(
            ResponseCode.SUCCESS,
            ext_fields=QueryDataVersionResponseHeader(changed).encode(),
            body=orjson.dumps(ours.to_json()) if ours else None,
        )

    # --- routes -------------------------------------------------------------------------------

    def get_route_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.decode(req.ext_fields)
        topic = header.topic
        if self.config.order_message_enable:
            route = self.routes.route_of(topic)
            body = None
            if route is not None:
                conf = self.kv.get(ORDER_TOPIC_CONFIG, topic)
                body = TopicRouteData(
                    route.queue_datas, route.broker_datas, conf, route.filter_server_table
                ).encode()
        else:
            body = self.routes.encoded_route(topic)
        if body is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, NO_ROUTE_REMARK.format(topic=topic))
        return req.response(ResponseCode.SUCCESS, body=body)

    def get_cluster_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = encode_cluster_info(self.routes.broker_addr_table, self.routes.cluster_addr_table)
        return req.response(ResponseCode.SUCCESS, body=body)

    def get_all_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=encode_topic_list(self.routes.topics()))

    def get_topics_by_cluster(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.decode(req.ext_fields)
        topics = self.routes.topics_of_cluster(header.cluster)
        return req.response(ResponseCode.SUCCESS, body=encode_topic_list(topics))

    def get_system_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=encode_topic_list(self.routes.system_topics()))

    def delete_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.decode(req.ext_fields)
        self.routes.delete_topic(header.topic, header.cluster_name)
        return req.response(ResponseCode.SUCCESS)

    def _broker_name(self, req: RemotingCommand) -> str:
        name = (req.ext_fields or {}).get("brokerName")
        if not name:
            raise HeaderError("the custom field <brokerName> is null")
        return name

    def wipe_write_perm(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.set_write_perm(self._broker_name(req), writable=False)
        return req.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)})

    def add_write_perm(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.set_write_perm(self._broker_name(req), writable=True)
        return req.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    # --- KV config ----------------------------------------------------------------------------

    def put_kv(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = KVConfigRequestHeader.decode(req.ext_fields)
        if header.value is None:
            raise HeaderError("the custom field <value> is null")
        self.kv.put(header.namespace, header.key, header.value)
        return req.response(ResponseCode.SUCCESS)

    def get_kv(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = KVConfigRequestHeader.decode(req.ext_fields)
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return req.response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return req.response(ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value).encode())

    def delete_kv(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = KVConfigRequestHeader.decode(req.ext_fields)
        self.kv.delete(header.namespace, header.key)
        return req.response(ResponseCode.SUCCESS)

    def get_kv_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.decode(req.ext_fields)
        table = self.kv.namespace(header.namespace)
        if not table:
            return req.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return req.response(ResponseCode.SUCCESS, body=encode_kv_table(table))
