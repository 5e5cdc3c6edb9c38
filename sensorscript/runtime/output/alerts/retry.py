"""When a failed request's alarms are tried again: a delay that doubles with their attempts from
BACKOFF_FIRST_S to BACKOFF_LAST_S, with jitter, per request (the target's other alarms go on
meanwhile); a receiver's Retry-After is honoured; alarms a receiver refuses for good
(`Failure.lasting`) are tried again every BACKOFF_LAST_S, kept until someone fixes it (status
shows why it fails). A request that succeeds shows the receiver answers again: what it failed for
a passing reason is tried at once (delivery.py).
"""

from __future__ import annotations

import random

BACKOFF_FIRST_S, BACKOFF_LAST_S = 1.0, 30.0


def delay(attempts: int, lasting: bool = False, retry_after: float | None = None) -> float:
    """Seconds until alarms that failed `attempts` times in a row (this one included) are tried again."""
    base = BACKOFF_LAST_S if lasting else min(BACKOFF_LAST_S, BACKOFF_FIRST_S * 2 ** max(0, attempts - 1))
    base *= random.uniform(0.8, 1.2)  # receivers that come back are not all hit at once
    return max(base, min(retry_after or 0.0, 3600.0))
