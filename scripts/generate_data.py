"""Write seeded example readings for the bundled workflows (or the bridge workload).

    .venv/bin/python scripts/generate_data.py OUT_FOLDER [--sensors workflows/sensors.csv]
        [--seconds 1800] [--files 4] [--bad-lines 5] [--seed 7]
    .venv/bin/python scripts/generate_data.py OUT_FOLDER --bridge 1000 --seconds 60

Readings follow each sensor's frequency from the registry CSV (or the bridge fleet).
"""

from __future__ import annotations

import argparse

from sensorscript.registry import read_csv
from sensorscript.workload import bridge_sensors, write_readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--sensors", default="workflows/sensors.csv")
    parser.add_argument("--bridge", type=int, help="use N sensors of the bridge workload instead")
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--bad-lines", type=int, default=5)
    parser.add_argument("--disorder-ms", type=int, default=0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sensors = bridge_sensors(args.bridge, args.seed) if args.bridge else read_csv(args.sensors)
    count = write_readings(sensors, args.folder, args.seconds, files=args.files, seed=args.seed,
                           bad_lines=args.bad_lines, disorder_ms=args.disorder_ms)
    print(f"wrote {count:,} readings of {len(sensors)} sensors ({args.seconds:g} s) and {args.bad_lines} bad "
          f"line(s) into {args.folder}")


if __name__ == "__main__":
    main()
