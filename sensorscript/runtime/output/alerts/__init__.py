"""Alarms delivered (`sscript run --alerts URL`): the incidents (a pattern's match, a flag's run of
1s: firing, updated, resolved) of the workflows asked for, grouped, to webhooks (http://, https://: a
POST a group), MQTT topics (mqtt://, mqtts://: published with QoS 1), Kafka topics (kafka://) and
PostgreSQL tables (postgresql://: the `alarms` table Grafana reads), at least once, from a durable
outbox in OUT.

One concern a module, in the order an alarm passes them (as Alertmanager's `notify/`):
    settings    --alerts and its options, the targets checked before the run starts, kept in OUT
    detection   the alarms a written batch raises, and those a correction or a backfill changes
    payload     an alarm as delivered: its JSON object, incident key and id; templates: a webhook's body
    outbox      OUT/alerts/outbox.db: alarms taken once per write, incidents' states, silences, waiting per target
    delivery    per target a dispatcher grouping what waits and senders in parallel; retry: per request
    notifier    what a notifier is; one per integration: webhook (HTTP POST), mqtt_topic (QoS 1 publishes),
                kafka_topic (an idempotent producer), postgres_table (rows of an `alarms` table)
    pipeline    `Alerts`, what the run loop calls; `Writes`, what a correction and a backfill call; `deliver`

The names importers use are handed on here.
"""

from sensorscript.runtime.output.alerts.delivery import Deliverer
from sensorscript.runtime.output.alerts.detection import FlagState, batch_alarms, correction_alarms
from sensorscript.runtime.output.alerts.outbox import Outbox
from sensorscript.runtime.output.alerts.pipeline import Alerts, Writes, deliver
from sensorscript.runtime.output.alerts.settings import AlertSettings, Target

__all__ = ["AlertSettings", "Alerts", "Deliverer", "FlagState", "Outbox", "Target", "Writes", "batch_alarms",
           "correction_alarms", "deliver"]
