"""The core every admin operation stands on: one connection set, calls to the NameServers and
to brokers that turn a failure into its cause, routes and cluster membership.

The concept modules (``topics``, ``groups``, ``messages``, ``brokers``, ``namesrv``) add
operations to this base; ``AdminClient`` (``admin.client``) is all of them together.  A
failure is diagnosed where it happens: an unreachable NameServer, a broker address given as
the NameServer (or the reverse: it answers the other server's request codes), a topic that
does not exist, no broker registered, so the command line can print one line that says what
to do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from apogee.admin.errors import NoBrokerRegisteredError, TopicNotFoundError, WrongServerError
from apogee.client.config import ClientConfig
from apogee.client.instance import ClientInstance
from apogee.client.routes import read_addr
from apogee.common import constants as c
from apogee.common.lenient_json import loads, loads_keyed
from apogee.errors import (
    ConnectionClosedError,
    NameServerUnreachableError,
    RemoteError,
    RequestCodeNotSupportedError,
    RequestTimeoutError,
)
from apogee.remoting.bodies.route import BrokerData, TopicRouteData, decode_cluster_info, decode_topic_list
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.tls_config import TlsClientConfig

TIMEOUT_MS = 5000

Tick = Callable[[int, int], None]
"""``tick(done, total)``: how far a walk over many brokers or queues has got (for a progress bar)."""


def _code_name(code: int) -> str:
    try:
        return f"{code} {RequestCode(code).name}"
    except ValueError:
        return str(code)


def check(resp: RemotingCommand, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    """``resp`` if its code is one of ``ok``; else the RemoteError of its code and remark."""
    if resp.code not in ok:
        raise RemoteError.for_code(resp.code, resp.remark)
    return resp


def load_object(body: bytes, *, keyed: bool = False) -> dict[str, Any]:
    """A JSON object body as fastjson writes it (numeric keys unquoted; with ``keyed``, maps
    keyed by objects as ``KeyedPairs``); an empty or non-object body is ``{}``."""
    if not body:
        return {}
    obj = loads_keyed(body.rstrip(b"\x00")) if keyed else loads(body)
    return obj if isinstance(obj, dict) else {}


class ClusterView(NamedTuple):
    """GET_BROKER_CLUSTER_INFO: broker name -> its addresses by broker id, cluster -> broker names.

    A named tuple: ``brokers, clusters = await admin.cluster_info()``, what ``cluster_info``
    returned before it had methods, still works (the peer benchmark harness's adapter does it)."""

    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """broker name -> master address, of ``cluster`` (of every cluster when None)."""
        names = self.clusters.get(cluster, []) if cluster is not None else [
            n for ns in self.clusters.values() for n in ns
        ]
        out = {}
        for name in names:
            data = self.brokers.get(name)
            addr = data.broker_addrs.get(c.MASTER_ID) if data is not None else None
            if addr:
                out[name] = addr
        return out

    def name_of(self, addr: str) -> str | None:
        """The broker name registered for ``addr`` (master or slave)."""
        for name, data in self.brokers.items():
            if addr in data.broker_addrs.values():
                return name
        return None

    def cluster_of(self, broker_name: str) -> str | None:
        return next((cl for cl, names in self.clusters.items() if broker_name in names), None)


class AdminBase:
    """Connections, NameServer and broker calls with diagnosed failures, routes and clusters."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        timeout_ms: int = TIMEOUT_MS,
        tls: TlsClientConfig | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
    ) -> None:
        """``tls``: TLS to the NameServers and brokers (docs/security.md, TLS); None: plain.
        ``access_key``/``secret_key`` (and ``security_token``) sign every request (ACL);
        default ``$APOGEE_ACCESS_KEY`` / ``$APOGEE_SECRET_KEY`` (``client.config``)."""
        self.config = ClientConfig(namesrv_addr=namesrv_addr, instance_name=f"admin-{id(self)}", tls=tls)
        if access_key is not None:
            self.config.access_key, self.config.secret_key = access_key, secret_key or ""
            self.config.security_token = security_token or ""
        self.timeout_ms = timeout_ms
        self._instance: ClientInstance | None = None

    async def __aenter__(self) -> AdminBase:
        self._instance = await ClientInstance.acquire(self.config)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._instance is not None:
            await self._instance.release()

    @property
    def instance(self) -> ClientInstance:
        assert self._instance is not None, "use `async with AdminClient(...)`"
        return self._instance

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.config.namesrv_addr.split(";") if a.strip()]

    async def _invoke(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        return await self.instance.remoting.invoke(addr, request, self.timeout_ms)

    # --- calls --------------------------------------------------------------------------------

    async def call_broker(
        self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request to the broker at ``addr``; a code it does not serve is diagnosed (a
        NameServer given as the broker, or a broker without that code)."""
        try:
            resp = await self._invoke(addr, RemotingCommand.request(code, dict(ext or {}), body))
        except (ConnectionClosedError, RequestTimeoutError) as exc:
            raise type(exc)(f"cannot reach the broker at {addr}: {exc}") from None
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and resp.code not in ok:
            raise await self._unsupported(addr, code, "broker", resp.remark)
        return check(resp, ok)

    async def _unsupported(self, addr: str, code: int, kind: str, remark: str | None = None) -> Exception:
        """Why ``addr`` answered REQUEST_CODE_NOT_SUPPORTED to a ``kind`` ("broker" or
        "NameServer") code: if it serves the other kind's probe (106 for a NameServer, 28 for
        a broker), it is the other kind of server, and the error says so."""
        other = "NameServer" if kind == "broker" else "broker"
        probe_code = RequestCode.GET_BROKER_CLUSTER_INFO if kind == "broker" else RequestCode.GET_BROKER_RUNTIME_INFO
        probe = await self._invoke(addr, RemotingCommand.request(probe_code))
        if probe.code == ResponseCode.SUCCESS:
            hint = ("give a broker's address (`apogee admin cluster-list` lists them)" if kind == "broker"
                    else "give the NameServer's address with -n (or NAMESRV_ADDR), the one the broker registers with")
            return WrongServerError(f"{addr} is a {other}, not a {kind}: {hint}")
        return RequestCodeNotSupportedError(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f"the {kind} at {addr} does not serve request code {_code_name(code)} ({remark or 'not supported'})",
        )

    async def call_namesrv(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request to the NameServers, failing over in turn; see ``_namesrv_answer``."""

        async def one(addr: str) -> RemotingCommand:
            resp = await self._invoke(addr, RemotingCommand.request(code, dict(ext or {}), body))
            return await self._namesrv_answer(addr, code, resp, ok)

        try:
            return await self.instance.invoke_namesrv(one)
        except (ConnectionClosedError, RequestTimeoutError) as exc:
            raise self._unreachable(exc) from None

    async def call_each_namesrv(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> dict[str, RemotingCommand]:
        """The same request to every NameServer (what RocketMQ's tools do for writes such as
        wipeWritePerm or updateNamesrvConfig: each NameServer keeps its own state)."""
        out = {}
        for addr in self.namesrv_addrs:
            try:
                resp = await self._invoke(addr, RemotingCommand.request(code, dict(ext or {}), body))
            except (ConnectionClosedError, RequestTimeoutError) as exc:
                raise self._unreachable(exc, addr) from None
            out[addr] = await self._namesrv_answer(addr, code, resp)
        return out

    async def _namesrv_answer(
        self, addr: str, code: int, resp: RemotingCommand, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)
    ) -> RemotingCommand:
        """A broker answers a NameServer code with REQUEST_CODE_NOT_SUPPORTED and serves its
        runtime info (28): then the address is a broker's, and the error says so."""
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and resp.code not in ok:
            raise await self._unsupported(addr, code, "NameServer", resp.remark)
        return check(resp, ok)

    def _unreachable(self, exc: Exception, addr: str | None = None) -> NameServerUnreachableError:
        where = addr or ";".join(self.namesrv_addrs)
        return NameServerUnreachableError(
            f"cannot reach the NameServer at {where} ({exc}): is it running there? "
            "Check -n / NAMESRV_ADDR"
        )

    # --- routes and clusters ------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route; a missing one raises why: the topic does not exist, or no
        broker is registered at all."""
        resp = await self.call_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"},
            ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if resp.code == ResponseCode.TOPIC_NOT_EXIST or not resp.body:
            raise await self._no_route(topic)
        route = TopicRouteData.decode(resp.body_bytes())
        self.instance.route_table.apply(topic, route)
        return route

    async def _no_route(self, topic: str) -> Exception:
        view = await self.cluster_info()
        if not any(d.broker_addrs for d in view.brokers.values()):
            return NoBrokerRegisteredError(
                f"no broker is registered with the NameServer at {';'.join(self.namesrv_addrs)}: "
                "start one (`apogee broker -n ...`) or check its namesrvAddr"
            )
        return TopicNotFoundError(
            f"topic {topic!r} does not exist: no broker registered with the NameServer serves it "
            f"(create it with `apogee admin update-topic -t {topic} -c CLUSTER`)"
        )

    async def masters(self, topic: str) -> dict[str, str]:
        """broker name -> master address, for every broker serving ``topic``."""
        route = await self.route(topic)
        out = {b.broker_name: b.broker_addrs[c.MASTER_ID] for b in route.broker_datas if c.MASTER_ID in b.broker_addrs}
        if not out:
            raise NoBrokerRegisteredError(
                f"no master broker of topic {topic!r} is registered with the NameServer "
                "(its brokers are down or only slaves are up)"
            )
        return out

    async def readers(self, topic: str) -> dict[str, str]:
        """broker name -> where to read its state: the master, else (the master gone) a slave
        (``client.routes.read_addr``, the client's one rule).  Writes use ``masters``."""
        route = await self.route(topic)
        out = {b.broker_name: a for b in route.broker_datas if (a := read_addr(b.broker_addrs)) is not None}
        if not out:
            raise NoBrokerRegisteredError(
                f"no broker of topic {topic!r} is registered with the NameServer (its brokers are down)"
            )
        return out

    async def topic_list(self) -> list[str]:
        resp = await self.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return decode_topic_list(resp.body_bytes())

    async def cluster_info(self) -> ClusterView:
        resp = await self.call_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        brokers, clusters = decode_cluster_info(resp.body_bytes())
        return ClusterView(dict(brokers), clusters)

    async def cluster_masters(self, cluster: str | None = None) -> dict[str, str]:
        """broker name -> master address of ``cluster`` (every cluster when None)."""
        view = await self.cluster_info()
        if cluster is not None and cluster not in view.clusters:
            known = ", ".join(sorted(view.clusters)) or "none"
            raise NoBrokerRegisteredError(f"the NameServer knows no cluster {cluster!r} (clusters: {known})")
        out = view.masters(cluster)
        if not out:
            raise NoBrokerRegisteredError(
                f"no master broker{' of cluster ' + repr(cluster) if cluster else ''} is registered with the NameServer"
            )
        return out

    async def targets(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """The broker addresses an mqadmin ``-b ADDR`` / ``-c CLUSTER`` pair names: the one
        broker, else the masters of the cluster (of every cluster when neither is given)."""
        if broker_addr:
            return [broker_addr]
        return sorted((await self.cluster_masters(cluster)).values())
