"""Stopping a running job between two micro-batches: `sscript stop OUT [--drain]`, Ctrl-C, SIGTERM.

A stop is a request file, OUT/stop-request.json, which the run loop reads twice a second: `sscript
stop` writes it, and so do Ctrl-C and SIGTERM on the job or on the `sscript run` that started it
(which passes them on this way, so that a job on a cluster stops the same way as a local one).
Three kinds of stop, each stronger than the one before; a request never weakens an earlier one:

- `boundary`: stop after the batch being written. The checkpoint keeps every window and partial
  match, and the next run on OUT continues from it.
- `drain`: end the input first (as `--once` does at its end, and Flink's `stop --drain`): the next
  batch moves every partition's watermark to +infinity, so every window and pending match is
  emitted, then stop. Files a folder source has not read by then are not read by this run.
- `now`: stop at once. A batch cut short is not lost: it was not committed, so the next run does
  it again, and the sinks skip what they already wrote of it.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from sensorscript import atomic

REQUEST = "stop-request.json"  # under OUT
MODES = ("boundary", "drain", "now")  # weakest first


def request_stop(out: Path, mode: str) -> str:
    """Ask the job running in `out` to stop; returns the mode in force (an earlier, stronger request stays)."""
    if mode not in MODES:
        raise ValueError(f"unknown stop '{mode}': one of {', '.join(MODES)}")
    earlier = read_request(out)
    if earlier is not None and MODES.index(earlier) >= MODES.index(mode):
        return earlier
    atomic.write_json(Path(out) / REQUEST, {"mode": mode, "requested": time.time()})  # never read half
    return mode


def read_request(out: Path) -> str | None:
    """The stop asked of the job in `out`, if any."""
    try:
        mode = json.loads((Path(out) / REQUEST).read_text()).get("mode")
    except (OSError, ValueError, AttributeError):
        return None
    return mode if mode in MODES else None


def clear_request(out: Path) -> None:
    """Forget a request (a run starting now was not asked to stop)."""
    (Path(out) / REQUEST).unlink(missing_ok=True)


class StopOnSignals:
    """While active (a `with` block), Ctrl-C and SIGTERM ask for a stop between batches, and a
    second one for a stop at once, instead of raising KeyboardInterrupt in the middle of a call to
    Spark. Only the main thread can set signal handlers; elsewhere this does nothing."""

    def __init__(self, out: Path, echo=print, last_resort=None):
        self.out = Path(out)
        self.echo = echo
        self.last_resort = last_resort  # called at the third signal (`sscript run`: terminate the job)
        self.count = 0
        self._saved: dict[int, object] = {}

    def __enter__(self) -> "StopOnSignals":
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._saved[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self._saved.items():
            signal.signal(number, handler)

    def _handle(self, number, frame) -> None:
        self.count += 1
        if self.count == 1:
            request_stop(self.out, "boundary")
            self.echo("stopping after the batch being written (Ctrl-C again to stop at once) ...")
        elif self.count == 2 or self.last_resort is None:
            request_stop(self.out, "now")
            self.echo("stopping at once; the batch cut short is done again by the next run ...")
        else:
            self.last_resort()
