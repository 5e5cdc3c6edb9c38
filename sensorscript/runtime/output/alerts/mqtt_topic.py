"""Alarms published to an MQTT topic (mqtt://, mqtts://) with QoS 1 through a paho client of the
target's own (runtime/ingest/mqtt.py), one message an alarm: a request's messages are all in flight
at once (paho keeps as many unacknowledged as the broker's window allows and queues the rest), and
each PUBACK acknowledges its own alarm.
"""

from __future__ import annotations

import threading
import time

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Request
from sensorscript.runtime.output.alerts.payload import to_json
from sensorscript.runtime.output.alerts.settings import Target

MOST = 1_000  # messages of one request
IN_FLIGHT = 100  # unacknowledged QoS 1 messages at once (mosquitto's default window is 20 for 3.1.1, more for 5)


class Topic:
    """The notifier of an mqtt(s):// target: connected in the background, reconnecting by itself."""

    most = MOST

    def __init__(self, target: Target, tls: mqtt.Tls, client_id: str, login: mqtt.Login):
        self.target = target
        self.address = mqtt.Address.parse(target.url)
        self.connected = threading.Event()
        self.refusal = ""
        self.login = login
        self.client = mqtt.client(self.address, client_id, tls, login=login)
        self.client.max_inflight_messages_set(IN_FLIGHT)
        self.client.max_queued_messages_set(0)  # no bound: a request's messages wait in the client
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

    def send(self, request: Request) -> None:
        if not self.connected.wait(SEND_TIMEOUT_S):
            raise Failure(self.refusal or f"not connected to the broker {self.address.host}:{self.address.port}")
        sent = []
        for seq, alarm in zip(request.seqs, request.alarms):
            info = self.client.publish(self.address.topic, to_json(alarm).encode(), qos=1)
            sent.append((seq, info))
        deadline = time.monotonic() + SEND_TIMEOUT_S + len(sent) * 0.01
        for _, info in sent:
            try:
                info.wait_for_publish(max(0.0, deadline - time.monotonic()))
            except (RuntimeError, ValueError):
                break
        done = [seq for seq, info in sent if info.is_published()]
        if len(done) < len(sent):
            raise Failure(f"the broker acknowledged {len(done)} of {len(sent)} alarms in time", delivered=done)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()
