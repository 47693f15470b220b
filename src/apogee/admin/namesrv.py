"""NameServer administration (mqadmin updateKvConfig, deleteKvConfig, getNamesrvConfig,
updateNamesrvConfig, wipeWritePerm, addWritePerm): 100-102, 319, 318, 205 and 327, sent to
every NameServer of ``-n`` as RocketMQ's tools do, since each keeps its own state."""

from __future__ import annotations

from apogee.admin.base import AdminBase
from apogee.remoting.codes import RequestCode, ResponseCode
from apogee.remoting.headers.namesrv import KVConfigRequestHeader


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` lines (GET_BROKER_CONFIG / GET_NAMESRV_CONFIG bodies) as a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


def properties_body(settings: dict[str, str]) -> bytes:
    """The body UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG carry: Java's properties text."""
    return "".join(f"{k}={v}\n" for k, v in settings.items()).encode()


class NamesrvAdmin(AdminBase):
    async def get_kv(self, namespace: str, key: str) -> str | None:
        resp = await self.call_namesrv(RequestCode.GET_KV_CONFIG, KVConfigRequestHeader(namespace, key).encode(),
                                       ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return (resp.ext_fields or {}).get("value") if resp.code == ResponseCode.SUCCESS else None

    async def put_kv(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every NameServer, as RocketMQ's putKVConfigValue."""
        await self.call_each_namesrv(RequestCode.PUT_KV_CONFIG, KVConfigRequestHeader(namespace, key, value).encode())

    async def delete_kv(self, namespace: str, key: str) -> None:
        await self.call_each_namesrv(RequestCode.DELETE_KV_CONFIG, KVConfigRequestHeader(namespace, key).encode())

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG (319): NameServer address -> its settings."""
        answers = await self.call_each_namesrv(RequestCode.GET_NAMESRV_CONFIG)
        return {addr: parse_properties(resp.body_bytes().decode(errors="replace")) for addr, resp in answers.items()}

    async def update_namesrv_config(self, key: str, value: str) -> list[str]:
        """UPDATE_NAMESRV_CONFIG (318) on every NameServer; returns their addresses."""
        answers = await self.call_each_namesrv(RequestCode.UPDATE_NAMESRV_CONFIG, body=properties_body({key: value}))
        return sorted(answers)

    async def _perm_of_broker(self, code: int, broker_name: str, count_key: str) -> dict[str, int]:
        answers = await self.call_each_namesrv(code, {"brokerName": broker_name})
        return {addr: int((resp.ext_fields or {}).get(count_key) or 0) for addr, resp in answers.items()}

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """WIPE_WRITE_PERM_OF_BROKER (205): NameServer -> how many topics lost write permission."""
        return await self._perm_of_broker(RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount")

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """ADD_WRITE_PERM_OF_BROKER (327): NameServer -> how many topics got write permission back."""
        return await self._perm_of_broker(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")
