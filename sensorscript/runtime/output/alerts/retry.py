"""When a target that failed is tried again: a delay that doubles from BACKOFF_FIRST_S to
BACKOFF_LAST_S, with jitter; a receiver that refuses an alarm for good (`Failure.lasting`) is tried
again every BACKOFF_LAST_S, the alarm kept, until someone fixes it (status shows why it fails).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

BACKOFF_FIRST_S, BACKOFF_LAST_S = 1.0, 60.0


@dataclass
class Backoff:
    """One target's failures in a row and when it may be tried next (time.monotonic())."""

    failures: int = 0
    next_try: float = 0.0

    def failed(self, lasting: bool) -> float:
        self.failures += 1
        delay = BACKOFF_LAST_S if lasting else min(BACKOFF_LAST_S, BACKOFF_FIRST_S * 2 ** (self.failures - 1))
        delay *= random.uniform(0.8, 1.2)  # receivers that come back are not all hit at once
        self.next_try = time.monotonic() + delay
        return delay

    def succeeded(self) -> None:
        self.failures, self.next_try = 0, 0.0
