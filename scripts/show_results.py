"""Print a short summary of a SQLite results database: rows per output stream, a few values, quarantine."""

from __future__ import annotations

import sqlite3
import sys


def main(path: str) -> None:
    db = sqlite3.connect(path)
    print(f"{'output stream':<32} {'rows':>6}  {'first window or time':<24} {'last value':>12}")
    for stream, rows in db.execute("SELECT stream, COUNT(*) FROM results GROUP BY stream ORDER BY stream"):
        first, last = db.execute(
            "SELECT MIN(COALESCE(window_start, ts)), (SELECT value FROM results r2 WHERE r2.stream = ? "
            "ORDER BY ts DESC LIMIT 1) FROM results WHERE stream = ?", (stream, stream)).fetchone()
        print(f"{stream:<32} {rows:>6}  {first:<24} {last:>12.4f}")
    for reason, count in db.execute("SELECT reason, COUNT(*) FROM quarantine GROUP BY reason ORDER BY reason"):
        print(f"quarantined: {count} line(s): {reason}")


if __name__ == "__main__":
    main(sys.argv[1])
