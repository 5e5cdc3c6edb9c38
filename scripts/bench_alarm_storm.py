"""The 469-match case (issue #40), end to end with real Spark: one `sscript run --once` batch whose
pattern makes N matches (469 by default), delivered with `--alerts` to a local webhook receiver
(scripts/alarm_receiver.py) that answers 503 to every 4th request, and to a healthy one.

    .venv/bin/python scripts/bench_alarm_storm.py [--matches 469] [--runs 1] [--receivers failing,healthy]
                                                  [--workflows 1] [--aligned] [--code DIR] [--keep DIR]
                                                  [--json PATH]

The case is built so that its count is exact: 40 sensors U0000..U0039 at 1 Hz for 120 s (one CSV
file, so one batch), every reading 1.0 but for `--matches` spikes of 10.0, none on a sensor's first
reading and none on two consecutive readings; the pattern

    U = union("U0000", ..., "U0039");
    P = pattern(a: U -> b: U) where b.value - a.value > 5 within 1min strategy strict partition by sensor
        yield b.value - a.value;

matches once per spike (a spike's reading and the one before it). `--workflows W` spreads the 40
sensors over W such workflows (each its own group under the default --alerts-group-by workflow, so
W requests go at once instead of one). `--aligned`: every sensor reads at the same instants (as
sensors on one clock do; by default sensor s reads s ms past each second). `--code DIR` runs another
version of the product, `python -m sensorscript.cli` with DIR first on PYTHONPATH (e.g. the commit before
the rewrite: `mkdir /tmp/old && git archive e6569af | tar -x -C /tmp/old`).

For each run: the workflows are compiled (`sscript compile`) into a new temporary folder, a
`Receiver` is started on a free port (fail_every=4, or healthy), and

    .venv/bin/sscript run OUT --input DATA --once --alerts http://127.0.0.1:PORT/hook

runs with the defaults (--alerts-group-wait 2s, --alerts-timeout 60s). Reported per run: matches
written (rows with events in OUT/results.db), alarms received (unique ids) and repeats, requests and
failed requests, seconds from the run's start to the last receipt, when the last "batch N:" line and
the final "alarms: ..." line came (so the seconds the run waited for delivery after its last batch),
the run's wall time and exit code, and the machine's load average before and after. One JSON document
on stdout (and in --json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from alarm_receiver import Receiver  # noqa: E402  (scripts/)

SSCRIPT = ROOT / ".venv" / "bin" / "sscript"
SENSORS = [f"U{i:04d}" for i in range(40)]
SECONDS = 120
BASE_MS = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC


def write_case(folder: Path, matches: int, workflows: int, aligned: bool = False,
               seed: int = 40) -> tuple[list[Path], Path, Path]:
    """The workflows, the sensor registry and the data (one CSV file): `matches` spikes. Sensor s
    reads at s ms past each second, or (`aligned`) every sensor on the second itself."""
    if matches > len(SENSORS) * ((SECONDS - 1) // 2):
        raise SystemExit(f"--matches {matches}: at most {len(SENSORS) * ((SECONDS - 1) // 2)} fit")
    scripts = folder / "workflows"
    scripts.mkdir(parents=True)
    files = []
    for w, group in enumerate(np.array_split(np.array(SENSORS), workflows)):
        names = ", ".join(f'"{s}"' for s in group)
        path = scripts / (f"storm{w:02d}.ss" if workflows > 1 else "storm.ss")
        path.write_text(f"// issue #40: a spike is a match\nU = union({names});\n"
                        "P = pattern(a: U -> b: U) where b.value - a.value > 5 within 1min strategy strict "
                        "partition by sensor\n    yield b.value - a.value;\n")
        files.append(path)
    registry = folder / "sensors.csv"
    registry.write_text("sensor_id,frequency_hz,type\n" + "".join(f"{s},1,storm\n" for s in SENSORS))
    # Spikes at odd readings 1, 3, 5, ... of each sensor: never the first, never two in a row.
    rng = np.random.default_rng(seed)
    slots = [(s, k) for s in range(len(SENSORS)) for k in range(1, SECONDS, 2)]
    chosen = {slots[i] for i in rng.choice(len(slots), matches, replace=False)}
    data = folder / "data"
    data.mkdir()
    lines = ["sensor_id,ts,value"]
    for k in range(SECONDS):
        for s, name in enumerate(SENSORS):
            lines.append(f"{name},{BASE_MS + k * 1000 + (0 if aligned else s)},{10.0 if (s, k) in chosen else 1.0}")
    (data / "readings.csv").write_text("\n".join(lines) + "\n")
    return files, registry, data


def one_run(kind: str, matches: int, workflows: int, keep: Path | None, aligned: bool = False,
            code: Path | None = None) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"bench-alarm-storm-{kind}-", dir=keep))
    files, registry, data = write_case(folder, matches, workflows, aligned)
    out = folder / "out"
    environment = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    sscript = [str(SSCRIPT)]
    if code is not None:  # another version of the product (an extracted commit): its package first on the path
        sscript = [sys.executable, "-m", "sensorscript.cli"]
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))
    compile_command = [*sscript, "compile", *map(str, files), "--out", str(out), "--sensors", str(registry)]
    compiled = subprocess.run(compile_command, capture_output=True, text=True, env=environment)
    if compiled.returncode:
        raise SystemExit(f"compile failed: {compiled.stdout}{compiled.stderr}")
    singles: list[tuple[float, dict]] = []  # bodies of one alarm each (the product before #40's rewrite)

    def single(alarm, body):
        if alarm is None:
            try:
                found = json.loads(body)
            except ValueError:
                return
            if isinstance(found, dict) and "id" in found:
                singles.append((time.time(), found))

    receiver = Receiver(on_alarm=single).start()
    receiver.fail_every = 4 if kind == "failing" else 0
    command = [*sscript, "run", str(out), "--input", str(data), "--once", "--alerts", receiver.url]
    load_before = os.getloadavg()
    lines: list[tuple[float, str]] = []
    started = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                               env=environment)

    def read():
        for line in process.stdout:
            lines.append((time.time(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = process.wait()
    ended = time.time()
    reader.join(5)
    load_after = os.getloadavg()
    time.sleep(0.5)  # a request answered as the run ended
    with sqlite3.connect(out / "results.db") as db:
        written = db.execute("SELECT COUNT(*) FROM results WHERE events IS NOT NULL AND events != ''").fetchone()[0]
    with receiver.lock:
        received = list(receiver.received)
        requests, refused = receiver.requests, receiver.refused
    receiver.stop()
    received += singles
    unique = {alarm["id"] for _, alarm in received}
    batch_lines = [(at, text) for at, text in lines if text.startswith("batch ")]
    alarm_lines = [(at, text) for at, text in lines if text.startswith("alarms:")]
    last_batch = batch_lines[-1][0] if batch_lines else None
    last_receipt = max((at for at, _ in received), default=None)
    first_batch = batch_lines[0][0] if batch_lines else None
    report = {
        "receiver": "503 to every 4th request" if kind == "failing" else "healthy",
        "workflows": workflows,
        "aligned_timestamps": aligned,
        "matches_written": written,
        "alarms_received_unique": len(unique),
        "repeats": len(received) - len(unique),
        "requests": requests,
        "failed_requests": refused,
        "run_s": round(ended - started, 2),
        "exit_code": code,
        "first_batch_line_s": round(first_batch - started, 2) if first_batch else None,
        "last_batch_line_s": round(last_batch - started, 2) if last_batch else None,
        "last_receipt_s": round(last_receipt - started, 2) if last_receipt else None,
        "last_receipt_after_last_batch_s": round(last_receipt - last_batch, 2) if last_receipt and last_batch else None,
        "alarms_line_after_last_batch_s": (round(alarm_lines[-1][0] - last_batch, 2)
                                           if alarm_lines and last_batch else None),
        "alarms_line": alarm_lines[-1][1] if alarm_lines else None,
        "batch_lines": [text for _, text in batch_lines],
        "complete_within_timeout": len(unique) == written and code == 0,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "out": str(out) if keep else None,
        "command": " ".join(command),
    }
    if code:
        report["output_tail"] = [text for _, text in lines[-15:]]
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return report


def code_version(root: Path) -> str:
    """The commit the product's code is at, and whether sensorscript/ differs from it."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout
    head, changed = git("rev-parse", "--short", "HEAD").strip(), git("status", "--short", "--", "sensorscript")
    changed = [line[3:] for line in changed.splitlines() if line.strip()]
    return head + (f" (sensorscript/ changed: {', '.join(changed)})" if changed else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=469)
    parser.add_argument("--workflows", type=int, default=1, help="spread the 40 sensors over this many workflows")
    parser.add_argument("--runs", type=int, default=1, help="runs of each receiver")
    parser.add_argument("--receivers", default="failing,healthy", help="failing (503 every 4th request), healthy")
    parser.add_argument("--aligned", action="store_true",
                        help="every sensor reads at the same instants (else sensor s at s ms past each second)")
    parser.add_argument("--code", help="run the sensorscript package of this folder (a commit extracted with "
                                       "git archive) instead of this checkout's")
    parser.add_argument("--keep", help="keep each run's folder under this folder")
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    keep = Path(args.keep) if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    code = code_version(ROOT) if not args.code else f"the sensorscript package of {args.code}"
    runs = []
    for _ in range(args.runs):
        for kind in args.receivers.split(","):
            runs.append(one_run(kind, args.matches, args.workflows, keep, args.aligned,
                                Path(args.code).resolve() if args.code else None))
            done = runs[-1]
            print(f"# {kind}: {done['alarms_received_unique']}/{done['matches_written']} received, "
                  f"last receipt {done['last_receipt_s']} s, run {done['run_s']} s", file=sys.stderr, flush=True)
    document = {"code": code,
                "case": f"{args.matches} matches in one --once batch, {args.workflows} workflow(s), 40 sensors"
                        + (", timestamps aligned" if args.aligned else ""),
                "runs": runs}
    text = json.dumps(document, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if all(r["complete_within_timeout"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
