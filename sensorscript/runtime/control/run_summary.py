"""What a run did, in the user's terms: each micro-batch's counts (`BatchCounts`, said in one line
as it is written) and their sum over the run (`RunSummary`), with the pattern conditions' measured
pass counts kept for the next compile (OUT/selectivity.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path


@dataclass
class BatchCounts:
    """One micro-batch's counts, from its operators' counters (`metrics`: by name, summed over the
    partitions) and the rows written."""

    readings: int = 0
    quarantined: int = 0
    unread: int = 0  # readings of sensors no workflow reads (ignored, counted)
    skipped: int = 0  # blank lines and CSV headers
    late: int = 0
    too_late: int = 0  # late readings older than the archive's horizon (late policy correct): not corrected
    results: int = 0
    division_by_zero: int = 0
    forwarded: int = 0  # tuples sent to second operators (over cut edges, and local inputs beside them)
    forwarded_remote: int = 0  # those sent to another partition's second operator: cut edges
    forward_packets: int = 0  # the rows that carried them
    matches: int = 0  # result rows of pattern streams
    cut: int = 0  # partial matches the patterns' caps cut
    # Readings stage 0 sent as slice partials (runtime/state/summaries.py), and the rows that carried them.
    summed: int = 0
    summary_rows: int = 0

    @staticmethod
    def of(metrics, quarantined: int, results: tuple[int, int], too_late: int) -> "BatchCounts":
        """`results`: how many result rows the batch wrote, and how many of them were pattern matches."""
        def starting(prefix: str) -> int:
            return int(sum(v for k, v in metrics.items() if k.startswith(prefix)))

        named = {name: int(metrics.get(name, 0)) for name in
                 ("readings", "unread", "skipped", "late", "forwarded", "forwarded_remote", "forward_packets",
                  "summed", "summary_rows")}
        return BatchCounts(**named, quarantined=quarantined, too_late=too_late, results=results[0],
                           division_by_zero=starting("division_by_zero:"), cut=starting("pattern_cut:"),
                           matches=results[1])

    def describe(self, batch_id: int, measures, seconds: float) -> str:
        """The batch's line of progress; `measures`: its gauges (the metrics table's rows)."""
        lag = measures[measures["name"] == "lag_ms"]["value"]
        state = measures[measures["name"] == "state_bytes"]["value"]
        return (f"batch {batch_id}: {self.readings:,} readings, {self.quarantined:,} quarantined, "
                + (f"{self.unread:,} readings of sensors no workflow reads ignored, " if self.unread else "")
                + f"{self.late:,} late"
                + (f" ({self.too_late:,} too late to correct: older than the archive's horizon)" if self.too_late
                   else "") + ", "
                f"{self.results:,} results" + (f" ({self.matches:,} pattern matches)" if self.matches else "")
                + (f", {self.division_by_zero} divisions by zero skipped" if self.division_by_zero else "")
                + (f", {self.cut:,} partial matches cut by the patterns' limit" if self.cut else "")
                + (f", watermark {lag.max() / 1000:,.1f} s behind the newest reading" if len(lag) else "")
                + (f", state {_size(state.sum())} (largest partition {_size(state.max())})" if len(state) else "")
                + f" ({seconds:.1f} s to write)")


@dataclass
class RunSummary(BatchCounts):
    """A run's batches, their counts summed (BatchCounts' fields), and how the run ended."""

    batches: int = 0
    corrected: int = 0  # rows written by corrections of late data (new versions and tombstones)
    seconds: float = 0.0
    last_batch: int | None = None  # the last micro-batch written
    outcome: str = ""  # finished | ended (input ended: every window emitted) | stopped (to be continued)
    # Per pattern node and condition: [rows tested, rows passed] (kept in OUT/selectivity.json).
    selectivity: dict = field(default_factory=dict)
    last_lines: int = 0  # the lines of input the last batch took (readings, ignored, quarantined, blank)

    def add(self, batch_id: int, counts: BatchCounts, metrics) -> None:
        """A batch written: its counts (`BatchCounts`, whose fields are the same) and the pattern
        conditions' pass counts among its `metrics`."""
        for each in fields(BatchCounts):
            setattr(self, each.name, getattr(self, each.name) + getattr(counts, each.name))
        self.batches += 1
        self.last_batch = batch_id
        self.last_lines = counts.readings + counts.unread + counts.quarantined + counts.skipped
        for key, count in metrics.items():
            if key.startswith(("pattern_tested:", "pattern_passed:")):
                what, node, condition = key.split(":", 3)[0], *key.split(":", 1)[1].rsplit(":", 1)
                entry = self.selectivity.setdefault(node, {}).setdefault(condition, [0, 0])
                entry[0 if what == "pattern_tested" else 1] += int(count)


def record_selectivity(path: Path, measured: dict) -> None:
    """Add a run's measured pass counts of pattern conditions to OUT/selectivity.json, which the next
    `sscript compile` into OUT reads to order conditions and choose tree shapes."""
    known = json.loads(path.read_text()) if path.exists() else {}
    for node, conditions in measured.items():
        for condition, (tested, passed) in conditions.items():
            entry = known.setdefault(node, {}).setdefault(condition, [0, 0])
            entry[0] += tested
            entry[1] += passed
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")


def _size(count: float) -> str:
    return f"{count / 1024:,.0f} KiB" if count < 1024 ** 2 else f"{count / 1024 ** 2:,.1f} MiB"
