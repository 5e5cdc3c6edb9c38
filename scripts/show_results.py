"""Print a short summary of a SQLite results database: rows per output stream, the alarms (pattern
matches, newest first, with the events they bound), the quarantine. Times in UTC, or --tz ZONE.

    .venv/bin/python scripts/show_results.py OUT/results.db [--alarms 12] [--tz Europe/Zurich]
"""

from __future__ import annotations

import argparse
import json
import sqlite3

from sensorscript.times import human_time, time_zone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database")
    parser.add_argument("--alarms", type=int, default=12, help="how many of the newest matches to list")
    parser.add_argument("--tz", default="UTC", help="the time zone of the times shown (an IANA name)")
    args = parser.parse_args()
    try:
        tz = time_zone(args.tz)
    except ValueError as exc:
        parser.error(str(exc))

    def when(ms: int | None) -> str:
        return "-" if ms is None else human_time(ms, tz)

    db = sqlite3.connect(args.database)
    columns = {row[1] for row in db.execute("PRAGMA table_info(results)")}
    print(f"{'output stream':<32} {'rows':>6}  {'first window or time':<27} {'last value':>12}")
    for stream, rows in db.execute("SELECT stream, COUNT(*) FROM results GROUP BY stream ORDER BY stream"):
        first, last = db.execute(
            "SELECT MIN(COALESCE(window_start, ts)), (SELECT value FROM results r2 WHERE r2.stream = ? "
            "ORDER BY ts DESC LIMIT 1) FROM results WHERE stream = ?", (stream, stream)).fetchone()
        print(f"{stream:<32} {rows:>6}  {when(first):<27} {last:>12.4f}")
    if "events" in columns:
        alarms = db.execute("SELECT stream, ts, value, events FROM results WHERE events IS NOT NULL "
                            "ORDER BY ts DESC, stream LIMIT ?", (args.alarms,)).fetchall()
        total = db.execute("SELECT COUNT(*) FROM results WHERE events IS NOT NULL").fetchone()[0]
        if alarms:
            print(f"\nalarms (pattern matches): {total}, the newest {len(alarms)}:")
        for stream, ts, value, events in alarms:
            bound = ", ".join(f"{e['var']}={e['value']:g} ({e['sensor']})" for e in json.loads(events))
            print(f"  {when(ts)}  {stream:<24} {value:>8.3f}  {bound}")
    for reason, count in db.execute("SELECT reason, COUNT(*) FROM quarantine GROUP BY reason ORDER BY reason"):
        print(f"quarantined: {count} line(s): {reason}")


if __name__ == "__main__":
    main()
