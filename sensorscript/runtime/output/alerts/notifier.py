"""What a notifier is: one per integration (`webhook.Webhook`, `mqtt_topic.Topic`), each sending one
alarm's body to its target and returning once the receiver acknowledged it, or raising `Failure`.
"""

from __future__ import annotations

from typing import Protocol

SEND_TIMEOUT_S = 10.0  # one HTTP request or one PUBACK


class Failure(Exception):
    """A delivery that did not succeed; `lasting`: the receiver refuses it for good (HTTP 4xx)."""

    def __init__(self, message: str, lasting: bool = False):
        super().__init__(message)
        self.lasting = lasting


class Notifier(Protocol):
    def send(self, ident: str, body: str) -> None:
        """Deliver one alarm (its id and JSON body); return once acknowledged, else raise Failure."""

    def close(self) -> None:
        """Let go of the connection, if any."""
