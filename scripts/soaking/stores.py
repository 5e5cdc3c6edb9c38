"""--days: what the job keeps on disk, sampled while it runs, and judged per simulated day.
  stores       every STORES_EVERY s: bytes on disk of each store in OUT/job (archive/,
               archive-unread/, corrections/), of the checkpoint (all, and Spark's parts:
               state/sources (the file source's log), state/state (the operators' state),
               state/offsets, state/commits), of the sink and the rows of each of its tables
               (soaking.sink's Reading.stored: results.db with its -wal and -shm and SELECT COUNT(*);
               a Parquet sink's folders and their files' rows; a PostgreSQL schema's tables,
               partitions and indexes, and COUNT(*)), and the files waiting in the input folder.
  per day      each series at the end of each simulated day (the last sample before it), and its
               growth per day over the middle and the last third of the days (least squares): a
               store whose horizon has passed is flat, i.e. grows in the last third by at most
               FLAT_SHARE of its size (or FLAT_BYTES, FLAT_ROWS a day).
  batches      the batches' durations (soaking.sink: from the checkpoint) against their number:
               the slope (s per 1,000 batches) and the medians of the first and last third.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

STORES_EVERY = 10.0  # s between two samples of the stores
STORE_FOLDERS = ("archive", "archive-unread", "corrections")
CHECKPOINT_PARTS = {"checkpoint": "checkpoint", "checkpoint/sources": "checkpoint/state/sources",
                    "checkpoint/state": "checkpoint/state/state", "checkpoint/offsets": "checkpoint/state/offsets",
                    "checkpoint/commits": "checkpoint/state/commits"}
FLAT_SHARE, FLAT_BYTES, FLAT_ROWS = 0.05, 64 * 2**10, 100


def folder_bytes(path: Path) -> int:
    total = 0
    for found in (path.rglob("*") if path.exists() else ()):
        try:
            if found.is_file():
                total += found.stat().st_size
        except OSError:  # went while listed (a compaction, a retention)
            continue
    return total


def measure(job_dir: Path, input_folder: Path | None, reading) -> dict:
    """Bytes per store, checkpoint part and the sink, rows per table of the sink, files in the input folder."""
    sizes = {name: folder_bytes(job_dir / name) for name in STORE_FOLDERS}
    sizes.update({name: folder_bytes(job_dir / part) for name, part in CHECKPOINT_PARTS.items()})
    try:
        sink_bytes, rows = reading.stored()
    except reading.errors:
        sink_bytes, rows = {}, {}
    sizes.update(sink_bytes)
    waiting = sum(1 for p in input_folder.iterdir() if not p.name.startswith(".")) \
        if input_folder is not None and input_folder.exists() else None
    return {"bytes": sizes, "rows": rows, "input_files": waiting}


def series(samples, day_seconds: float) -> dict[str, list[tuple[float, float]]]:
    """(simulated day, value) of every measured series: bytes:NAME, rows:TABLE, input files, and
    the job's memory (RSS of driver + JVM + workers, MiB, and of each)."""
    found: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        day = s.at / day_seconds
        if s.stores:
            for name, value in s.stores["bytes"].items():
                found.setdefault(f"bytes:{name}", []).append((day, value))
            for name, value in s.stores["rows"].items():
                found.setdefault(f"rows:{name}", []).append((day, value))
            if s.stores["input_files"] is not None:
                found.setdefault("input files", []).append((day, s.stores["input_files"]))
        if s.rss:
            found.setdefault("memory MiB", []).append((day, sum(s.rss.values())))
            for name, value in s.rss.items():  # the driver's own too: a batch's size must not show in it
                found.setdefault(f"memory MiB: {name}", []).append((day, value))
    return found


def _slope(points: list[tuple[float, float]], lo: float, hi: float) -> float | None:
    inside = [(d, v) for d, v in points if lo <= d <= hi]
    if len(inside) < 3 or inside[-1][0] - inside[0][0] <= 0:
        return None
    d, v = np.array(inside, dtype=float).T
    return float(np.polyfit(d, v, 1)[0])


def per_day(samples, days: float, day_seconds: float) -> dict[str, dict]:
    """Per series: its value at the end of each simulated day, its growth per day over the middle and
    the last third of the days, and whether it is flat in the last third."""
    judged = {}
    for name, points in series(samples, day_seconds).items():
        ends = []
        for day in range(1, int(days) + 1):
            before = [v for d, v in points if d <= day]
            ends.append(before[-1] if before else None)
        middle, last = _slope(points, days / 3, 2 * days / 3), _slope(points, 2 * days / 3, days)
        size = max((v for d, v in points if d <= 2 * days / 3), default=0.0)
        floor = FLAT_ROWS if name.startswith("rows:") else FLAT_BYTES if name.startswith("bytes:") else 0.0
        flat = None if last is None else last <= max(FLAT_SHARE * size, floor)
        judged[name] = {"at_day_end": ends, "growth_per_day_middle": middle, "growth_per_day_last": last, "flat": flat}
    return judged


def batch_trend(batches) -> dict:
    """Batch duration against batch number: slope (s per 1,000 batches), medians of the first and last third."""
    timed = [(b.batch_id, b.duration) for b in batches if b.duration is not None]
    if len(timed) < 6:
        return {"batches_timed": len(timed), "slope_s_per_1000": None, "median_first_s": None, "median_last_s": None}
    ids, durations = np.array(timed, dtype=float).T
    third = len(timed) // 3
    return {"batches_timed": len(timed), "slope_s_per_1000": float(np.polyfit(ids, durations, 1)[0] * 1000),
            "median_first_s": float(np.median(durations[:third])), "median_last_s": float(np.median(durations[-third:]))}


def _shown(name: str, value) -> str:
    if value is None:
        return "-"
    if name.startswith("bytes:"):
        return f"{value / 2**20:,.2f} MiB"
    return f"{value:,.0f}"


def day_lines(judged: dict[str, dict], batches: dict) -> list[str]:
    """The report's lines: a row per series (value at the end of each day, growth per day), the batches."""
    days = max((len(j["at_day_end"]) for j in judged.values()), default=0)
    shown_days = sorted({0, days // 3, 2 * days // 3, days - 1} - {-1}) if days > 6 else list(range(days))
    lines = ["", "per store, at the end of simulated day " + ", ".join(str(d + 1) for d in shown_days)
             + "; growth per day over the middle third -> the last third; flat in the last third:"]
    for name, j in sorted(judged.items()):
        values = ", ".join(_shown(name, j["at_day_end"][d]) for d in shown_days)
        growth = f"{_shown(name, j['growth_per_day_middle'])} -> {_shown(name, j['growth_per_day_last'])} a day"
        flat = {True: "flat", False: "GROWS", None: "-"}[j["flat"]]
        lines.append(f"  {name:<28} {values:<60} {growth:<36} {flat}")
    slope = batches["slope_s_per_1000"]
    lines.append(f"batch duration over {batches['batches_timed']:,} batches timed: "
                 + ("too few to judge" if slope is None else
                    f"{slope:+.3f} s per 1,000 batches; median {batches['median_first_s']:.2f} s in the first "
                    f"third, {batches['median_last_s']:.2f} s in the last"))
    return lines
