"""Alarms published to an MQTT topic (mqtt://, mqtts://) with QoS 1 through a paho client of the
target's own (runtime/ingest/mqtt.py): the broker's PUBACK acknowledges.
"""

from __future__ import annotations

import threading

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure
from sensorscript.runtime.output.alerts.settings import Target


class Topic:
    """The notifier of an mqtt(s):// target: connected in the background, reconnecting by itself."""

    def __init__(self, target: Target, tls: mqtt.Tls, client_id: str, login: mqtt.Login):
        self.target = target
        self.address = mqtt.Address.parse(target.url)
        self.connected = threading.Event()
        self.refusal = ""
        self.login = login
        self.client = mqtt.client(self.address, client_id, tls, login=login)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda *_: self.connected.clear()
        self.client.connect_async(self.address.host, self.address.port, keepalive=30)
        self.client.loop_start()

    def _on_connect(self, client, userdata, flags, reason_code, properties=None):
        if reason_code.is_failure:
            self.refusal = mqtt.refused(reason_code, self.login)
        else:
            self.refusal = ""
            self.connected.set()

    def send(self, ident: str, body: str) -> None:
        if not self.connected.wait(SEND_TIMEOUT_S):
            raise Failure(self.refusal or f"not connected to the broker {self.address.host}:{self.address.port}")
        info = self.client.publish(self.address.topic, body.encode(), qos=1)
        try:
            info.wait_for_publish(SEND_TIMEOUT_S)
        except (RuntimeError, ValueError) as exc:
            raise Failure(f"not published ({exc})") from None
        if not info.is_published():
            raise Failure("the broker did not acknowledge within 10 s")

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()
