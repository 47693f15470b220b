"""The quick-start application API: ``App``, its ``Template`` and ``@app.listener`` declarations.

RocketMQ's Spring Boot convenience (rocketmq-spring) (a configured producer wrapper with ``sendSyncMsg``, and
consumers declared with ``@RocketMQMessageListener``) in Python's idiom; see ``docs/app.md``.

    from apogee.client.app import App
"""

from apogee.client.app.application import App
from apogee.client.app.listeners import ListenerSpec
from apogee.client.app.payload import decoder_for, encode_body
from apogee.client.app.settings import ClientSettings
from apogee.client.app.template import SyncTemplate, Template, build_message

__all__ = [
    "App",
    "ClientSettings",
    "ListenerSpec",
    "SyncTemplate",
    "Template",
    "build_message",
    "decoder_for",
    "encode_body",
]
