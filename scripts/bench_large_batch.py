"""The driver's memory while a micro-batch of 1,000,000 result rows is written, through each sink
(issue #42, items 3 and 7).

    .venv/bin/python scripts/bench_large_batch.py [--workflows 100] [--seconds 1000]
                                                  [--sinks sqlite,csv,parquet,postgresql] [--out DIR]

The batch (`write_workload`, also tests/test_large_batches.py's): WORKFLOWS workflows of ten
1-second averages of ten sensors read once a second, SECONDS seconds of readings in one file, one
`--once` batch of WORKFLOWS x 10 x SECONDS result rows (the workflows share the windows; each
writes its own rows). For each sink the job runs (`job.py --input DATA --once --sink ...`) twice:
with the batch, and with one twice its size (twice the workflows); for SQLite also with the batch
collected at once (SSCRIPT_DRIVER_ROWS above its size: what the driver did before
it took a large batch in chunks). Every 50 ms (psutil) the resident memory of the job's driver (its
Python process) and of its JVM (in local mode also the executors'): the peaks, the batch's time to
write from its line, and its rows/s. Printed, per sink: the driver's peak at twice the batch against
the batch (1.0: independent of the batch's size), and for SQLite at once against chunks. A
PostgreSQL of its own (scripts/postgres_server.py) is started for the postgresql sink and removed
at the end. Not part of the test suite (tests/test_scripts.py smoke-runs it at a tiny size); the
machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_767_225_600_000  # 2026-01-01, ms
SENSORS = 10


def value(t: np.ndarray, sensor: np.ndarray) -> np.ndarray:
    """The reading of `sensor` in second `t`."""
    return (t * 7 + sensor) % 13 + 0.5


def write_workload(folder: Path, workflows: int, seconds: int) -> None:
    """FOLDER/sensors.csv, FOLDER/workflows/wNNN.ss and FOLDER/data/readings.csv."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sensors.csv").write_text("sensor_id,frequency_hz,type\n"
                                        + "".join(f"S{i},1,strain\n" for i in range(SENSORS)))
    (folder / "workflows").mkdir(exist_ok=True)
    for w in range(workflows):
        (folder / "workflows" / f"w{w:03d}.ss").write_text(
            "".join(f'o{i} = avg("S{i}", 1s, 1s);\n' for i in range(SENSORS)))
    t, sensor = np.divmod(np.arange(seconds * SENSORS), SENSORS)
    (folder / "data").mkdir(exist_ok=True)
    pd.DataFrame({"s": "S" + pd.Series(sensor).astype(str), "ts": T0 + t * 1000 + 500, "v": value(t, sensor)}
                 ).to_csv(folder / "data" / "readings.csv", header=False, index=False)


def expected(workflows: int, seconds: int) -> pd.DataFrame:
    """Every result row, by stream and time: a 1-second average over one reading is that reading."""
    w, rest = np.divmod(np.arange(workflows * SENSORS * seconds), SENSORS * seconds)
    sensor, t = np.divmod(rest, seconds)
    start = T0 + t * 1000
    names = np.array([f"w{a:03d}.o{b}" for a in range(workflows) for b in range(SENSORS)], dtype=object)
    return pd.DataFrame({"stream": names[w * SENSORS + sensor], "ts": start + 999, "window_start": start,
                         "window_end": start + 1000, "value": value(t, sensor)})


def run(job: Path, data: Path, sink: str, environment: dict[str, str]) -> dict:
    """One --once run of the job, its driver's and JVM's memory sampled."""
    process = subprocess.Popen([sys.executable, str(job / "job.py"), "--input", str(data), "--once", "--sink", sink],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    driver, peaks = psutil.Process(process.pid), {"driver": 0, "jvm": 0}
    while process.poll() is None:
        try:
            peaks["driver"] = max(peaks["driver"], driver.memory_info().rss)
            for child in driver.children(recursive=True):
                if child.name() == "java":
                    peaks["jvm"] = max(peaks["jvm"], child.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join(10)
    said = "".join(lines)
    if process.returncode != 0:
        raise SystemExit(f"the job on {sink} failed:\n{said[-3000:]}")
    batch = re.search(r"batch 0: .*?([\d,]+) results.*\(([\d.]+) s to write\)", said)
    return {"rows": int(batch.group(1).replace(",", "")), "seconds": float(batch.group(2)),
            "driver_mib": peaks["driver"] / 2**20, "jvm_mib": peaks["jvm"] / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=1000)
    parser.add_argument("--sinks", default="sqlite,csv,parquet,postgresql")
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder, removed)")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "scripts"))
    from postgres_server import PostgresServer

    from sensorscript.compiler import compile_workflows

    folder = options.out or Path(tempfile.mkdtemp(prefix="sscript-large-"))
    server = None
    try:
        sizes = {"batch": options.workflows, "twice": 2 * options.workflows}
        for size, workflows in sizes.items():
            write_workload(folder / size, workflows, options.seconds)
            compile_workflows(sorted(str(f) for f in (folder / size / "workflows").glob("*.ss")), folder / size / "job",
                              str(folder / size / "sensors.csv"), 2)
        print(f"a batch of {options.workflows * SENSORS * options.seconds:,} result rows "
              f"({options.workflows} workflows x {SENSORS} streams x {options.seconds} s), and twice that")
        environment = dict(os.environ)
        for kind in options.sinks.split(","):
            found = {}
            cases = [("batch", {}), ("twice", {})]
            if kind == "sqlite":
                cases.append(("batch", {"SSCRIPT_DRIVER_ROWS": str(10**12)}))
            for size, extra in cases:
                if kind == "postgresql":
                    if server is None:
                        server = PostgresServer().start()
                        environment["PGPASSWORD"] = server.password
                    schema = f"large_{size}_{len(found)}"
                    sink = f"{server.url}{'&' if '?' in server.url else '?'}schema={schema}"
                else:
                    target = folder / size / f"results-{kind}-{len(found)}"
                    sink = f"{kind}:{target}" if kind == "parquet" else f"{kind}:{target}.{kind}"
                result = found[(size, bool(extra))] = run(folder / size / "job", folder / size / "data", sink,
                                                         {**environment, **extra})
                how = " at once" if extra else ""
                print(f"{kind:>10} {size:>5}{how:<8}: {result['rows']:>9,} rows in {result['seconds']:5.1f} s "
                      f"({result['rows'] / max(result['seconds'], 1e-9):>8,.0f} rows/s); driver peak "
                      f"{result['driver_mib']:,.0f} MiB, JVM peak {result['jvm_mib']:,.0f} MiB")
            batch, twice = found[("batch", False)], found[("twice", False)]
            print(f"{kind:>10}: driver peak twice/batch {twice['driver_mib'] / batch['driver_mib']:.2f}"
                  + (f"; at once/chunks {found[('batch', True)]['driver_mib'] / batch['driver_mib']:.2f}, "
                     f"time at once/chunks {found[('batch', True)]['seconds'] / batch['seconds']:.2f}"
                     if ("batch", True) in found else ""))
    finally:
        if server is not None:
            server.remove()
        if options.out is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
