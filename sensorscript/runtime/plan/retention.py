"""How long the job keeps what it writes (`--retain STORE=DURATION` on compile and run).

A job that runs for years must keep its disk bounded. Each store has a horizon; what lies behind
it is removed (the metrics are downsampled first), by the run loop's housekeeping
(runtime/control/housekeeping.py), and `sscript status` shows each horizon and store:

    archive          7 d   event time: every raw reading (late policy correct); the horizon
                           within which a late reading can still be corrected. A reading that
                           comes later than that is counted and kept in the late store as too
                           late to correct.
    late             30 d  event time: the late store (the sink's late table, OUT/corrections/)
    metrics          1 d   wall time: the metrics table's rows per batch and partition; older
                           ones become per-minute aggregates (metrics_minutes)
    metrics-minutes  90 d  wall time: those per-minute aggregates
    results          kept  event time: result rows (`--retain results=90d` expires them)

Event time is measured back from where the stream has emitted every row (the smallest watermark,
capped at the newest reading: the end of a bounded input does not age what it read). DURATION is
30s, 15min, 12h, 7d ... or `forever`. The horizons a compile gives are the job's; those a run
gives are kept in its checkpoint, and later runs go on with them until a run gives others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sensorscript.times import DAY_MS, duration_ms, duration_text

FOREVER = "forever"
# Store -> (default horizon, whose clock ages it, what it is, in a phrase for the user).
STORES: dict[str, tuple[str, str, str]] = {
    "archive": ("7d", "event", "raw readings archived for corrections"),
    "late": ("30d", "event", "late store"),
    "metrics": ("1d", "wall", "metrics per batch"),
    "metrics-minutes": ("90d", "wall", "metrics per minute"),
    "results": (FOREVER, "event", "results"),
}
KEPT = "retention.json"  # in the checkpoint: the horizons runs gave


@dataclass(frozen=True)
class Retention:
    """Each store's horizon in ms (None: kept forever)."""

    horizons: dict[str, int | None]

    def __getitem__(self, store: str) -> int | None:
        return self.horizons[store]

    def describe(self) -> list[str]:
        """A line per store, for `sscript status`."""
        return [f"{STORES[store][2]} " + ("forever" if ms is None else
                f"{duration_text(ms)} of {'event' if STORES[store][1] == 'event' else 'wall-clock'} time")
                for store, ms in self.horizons.items() if store in STORES]


def parse(specs) -> dict[str, str]:
    """`STORE=DURATION` texts -> {store: duration text}, checked (ValueError in one sentence)."""
    given: dict[str, str] = {}
    for spec in specs or ():
        store, equals, duration = spec.partition("=")
        store = store.strip()
        if not equals or store not in STORES:
            raise ValueError(f"'{spec}' is not STORE=DURATION with STORE one of {', '.join(STORES)} "
                             f"(e.g. archive=7d)")
        horizon(duration.strip(), store)
        given[store] = duration.strip()
    return given


def horizon(text: str, store: str) -> int | None:
    if text == FOREVER:
        return None
    ms = duration_ms(text, f"the horizon of {store}")
    if ms <= 0:
        raise ValueError(f"the horizon of {store} must be longer than 0 (or '{FOREVER}')")
    return ms


def resolve(*layers: dict[str, str]) -> Retention:
    """The horizons: the defaults, then each layer's (later ones win)."""
    texts = {store: default for store, (default, _, _) in STORES.items()}
    for layer in layers:
        texts.update(layer or {})
    return Retention({store: horizon(text, store) for store, text in texts.items()})


def kept(checkpoint: Path) -> dict[str, str]:
    """The horizons earlier runs gave (checkpoint/retention.json)."""
    path = Path(checkpoint) / KEPT
    return json.loads(path.read_text()) if path.exists() else {}


def keep(checkpoint: Path, given: dict[str, str]) -> dict[str, str]:
    """Add a run's horizons to those earlier runs gave; returns them all."""
    found = {**kept(checkpoint), **given}
    if given:
        Path(checkpoint).mkdir(parents=True, exist_ok=True)
        (Path(checkpoint) / KEPT).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    return found
