"""The webhook receiver of the alarm tests: scripts/alarm_receiver.py's `Receiver` (an HTTP server on a
free port of 127.0.0.1 that keeps what it is sent and can be told to fail)."""

from tests.brokers import Broker  # noqa: F401  (puts scripts/ on the path)

from alarm_receiver import Receiver  # noqa: E402

__all__ = ["Receiver"]
