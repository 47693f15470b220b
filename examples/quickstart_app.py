"""RocketMQ's Spring Boot quick start -- WarnController and WarnConsumer -- as an Apogee app.

    apogee admin update-topic -n 127.0.0.1:9876 -t TopicTest   # create the topic by hand, as the quick start does
    apogee run quickstart_app:app --app-dir examples          # or: python examples/quickstart_app.py
    curl http://127.0.0.1:8080/warn/syncSend                  # the SendResult as JSON; the consumer prints the message

The Spring Boot quick start's ``ServerProduct`` (a producer configured from a file, with ``sendSyncMsg``) is the
app's template, configured by ``quickstart_app.properties`` beside this file (``NAMESRV_ADDR``
in the environment overrides it).  ``WarnController`` answers ``GET /warn/syncSend`` on
``WARN_HTTP_LISTEN`` (default 127.0.0.1:8080) with the standard library's HTTP server, whose
request threads use the template's blocking facade.  ``WarnConsumer`` is declared with the
topic and group of the quick start's ``@RocketMQMessageListener(topic = "TopicTest", consumerGroup =
"warn_consumer_group")`` and receives the body decoded as ``str`` (``RocketMQListener<String>``).
SIGINT/SIGTERM stop the controller, then the consumer (its offsets committed), then the producer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

from apogee.client.app import App

TOPIC = "TopicTest"

app = App("warn-service", config_file=Path(__file__).with_name("quickstart_app.properties"))
log = logging.getLogger("quickstart_app")


class WarnController(BaseHTTPRequestHandler):
    """``@RequestMapping("/warn")`` with ``@GetMapping("/syncSend")``."""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        if self.path != "/warn/syncSend":
            self.send_error(404, "try /warn/syncSend")
            return
        result = app.template.sync.send_sync_msg(TOPIC, "tag", "sync hello world!")
        body = orjson.dumps(
            {
                "sendStatus": result.status.name,
                "msgId": result.msg_id,
                "offsetMsgId": result.offset_msg_id,
                "messageQueue": result.message_queue._asdict(),
                "queueOffset": result.queue_offset,
            }
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the standard library's name
        log.info("%s %s", self.address_string(), format % args)


@app.listener(topic=TOPIC, group="warn_consumer_group")
class WarnConsumer:
    def on_message(self, message: str) -> None:
        # 处理消息 (handle the message)
        print(f"Received message: {message}", flush=True)


_server: ThreadingHTTPServer | None = None


@app.on_startup
def start_controller() -> None:
    global _server
    host, _, port = os.environ.get("WARN_HTTP_LISTEN", "127.0.0.1:8080").rpartition(":")
    _server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), WarnController)
    threading.Thread(target=_server.serve_forever, name="warn-controller", daemon=True).start()
    print(f"WarnController on http://{host}:{_server.server_port}/warn/syncSend", flush=True)


@app.on_shutdown
async def stop_controller() -> None:
    # On a thread: a request still being answered needs the app's loop to finish its send.
    if _server is not None:
        await asyncio.to_thread(_server.shutdown)
        await asyncio.to_thread(_server.server_close)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-5s %(name)s: %(message)s")
    app.run()
