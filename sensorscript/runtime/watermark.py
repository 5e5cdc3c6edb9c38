"""Watermark policies (SPEC §6): from the event times seen so far to the watermark in force.

A policy is asked once per batch, before the batch's readings are applied, for
the watermark in force during that batch; it then observes the batch. Its state
lives in the partition's engine state, so it survives restarts.

`fixed` is bounded out-of-orderness: the largest event time seen in earlier
batches minus a delay D (Spark's and Flink's default). The `adaptive` and
`quality` policies of SPEC §6 implement the same two methods.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

NONE_YET = -(2**63)  # no watermark before the first reading: nothing is late


@dataclass
class FixedDelay:
    delay_ms: int
    max_seen: int | None = None

    def current(self) -> int:
        return NONE_YET if self.max_seen is None else self.max_seen - self.delay_ms

    def observe(self, ts: np.ndarray) -> None:
        if len(ts):
            batch_max = int(ts.max())
            self.max_seen = batch_max if self.max_seen is None else max(self.max_seen, batch_max)

    def describe(self) -> str:
        return f"fixed, delay {self.delay_ms} ms"


_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000}


def parse_policy(spec: str):
    """`fixed:30s` (or `fixed:30000`) -> a policy. Errors name what was wrong."""
    kind, _, argument = spec.partition(":")
    if kind != "fixed":
        raise ValueError(f"unknown watermark policy '{kind}': this version supports fixed:DELAY "
                         f"(adaptive and quality are planned, SPEC §6)")
    match = re.fullmatch(r"([0-9_]+)(ms|s|min|h)?", argument or "0")
    if not match:
        raise ValueError(f"watermark delay '{argument}' is not a duration like 30s, 5min or 250ms")
    return FixedDelay(int(match.group(1).replace("_", "")) * _UNITS[match.group(2) or "ms"])
