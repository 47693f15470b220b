"""Headers of the NameServer requests (RocketMQ ``header/namesrv/*``)."""

from __future__ import annotations

from dataclasses import dataclass

from apogee.remoting.headers.base import Header, Int32, Int64


@dataclass
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Int64
    compressed: bool = False
    body_crc32: Int32 = 0


@dataclass
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass
class UnRegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Int64


@dataclass
class KVConfigRequestHeader(Header):
    """PUT/GET/DELETE_KV_CONFIG: value is only sent with PUT."""

    namespace: str
    key: str
    value: str | None = None


@dataclass
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@dataclass
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str


@dataclass
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@dataclass
class GetTopicsByClusterRequestHeader(Header):
    cluster: str


@dataclass
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Int64


@dataclass
class QueryDataVersionResponseHeader(Header):
    changed: bool
