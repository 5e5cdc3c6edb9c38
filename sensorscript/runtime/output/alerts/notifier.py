"""What a notifier is: one per integration (`webhook.Webhook`, `mqtt_topic.Topic`), each sending one
request (`Request`: a group's alarms, as many as the integration takes at once) to its target and
returning once the receiver acknowledged it, or raising `Failure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

SEND_TIMEOUT_S = 10.0  # one HTTP request, or one request's PUBACKs


@dataclass
class Request:
    """Alarms of one group (`group`: its labels, as --alerts-group-by says) sent together."""

    seqs: list[int]  # the outbox's numbers of the alarms
    alarms: list[dict]
    group: dict = field(default_factory=dict)
    group_key: str = ""

    @property
    def incidents(self) -> list[str]:
        return [alarm["incident"] for alarm in self.alarms]


class Failure(Exception):
    """A delivery that did not succeed: `lasting` when the receiver refuses it for good (HTTP 4xx);
    `delivered`: the outbox numbers of those alarms of the request it acknowledged all the same (MQTT
    publishes each alone); `retry_after`: seconds the receiver asked to be left alone (HTTP 429, 503)."""

    def __init__(self, message: str, lasting: bool = False, delivered=(), retry_after: float | None = None):
        super().__init__(message)
        self.lasting, self.delivered, self.retry_after = lasting, frozenset(delivered), retry_after


class Notifier(Protocol):
    most: int  # alarms in one request at most

    def send(self, request: Request) -> None:
        """Deliver one request; return once acknowledged, else raise Failure."""

    def close(self) -> None:
        """Let go of the connection, if any."""
