"""Alarms delivered (`sscript run --alerts URL`): every alarm (runtime/output/alarms.py) of the
workflows asked for, as one JSON object, to webhooks (http://, https://: a POST) and MQTT topics
(mqtt://, mqtts://: published with QoS 1), at least once, from a durable outbox in OUT.

One concern a module, in the order an alarm passes them (as Alertmanager's `notify/`):
    settings    --alerts and its options, the targets checked before the run starts
    detection   the alarms a written batch raises, and those a correction raises or retracts
    payload     an alarm as delivered: its JSON object and id; templates: a webhook's body from the user's template
    outbox      OUT/alerts/outbox.db: alarms taken once per batch, waiting per target until acknowledged
    delivery    a thread per target sending what waits, oldest first; retry: when a failed target is tried again
    notifier    what a notifier is; one per integration: webhook (HTTP POST), mqtt_topic (QoS 1 publish)
    pipeline    `Alerts`, what the run loop calls: each batch and correction in, the run's end waited for

The names importers use are handed on here.
"""

from sensorscript.runtime.output.alerts.delivery import Deliverer
from sensorscript.runtime.output.alerts.detection import batch_alarms, correction_alarms
from sensorscript.runtime.output.alerts.outbox import Outbox
from sensorscript.runtime.output.alerts.pipeline import Alerts
from sensorscript.runtime.output.alerts.settings import AlertSettings, Target

__all__ = ["AlertSettings", "Alerts", "Deliverer", "Outbox", "Target", "batch_alarms", "correction_alarms"]
