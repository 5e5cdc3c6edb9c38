"""Time to a usable dashboard over a large job (issue #25): `sscript dashboard` at 1,024 and 10,240 workflows.

    .venv/bin/python scripts/bench_dashboard.py [--workflows 1024,10240] [--sensors 1000,10000] [--seconds 20]
                                                [--runs 3] [--pick wf0042] [--work DIR]

For each size, a real job's output: WORKFLOWS workflows in all, the 5 examples (workflows/*.ss), one
threshold flag in 64 and the rest generated bridge workflows over SENSORS sensors (workload.write_workflows),
are compiled with `sscript compile`, and the job runs with `sscript run OUT --input DATA --once` over
SECONDS of readings (workload.write_readings); both are timed. Then RUNS times, `sscript dashboard OUT` is started
afresh (its first page pays for reading OUT) and headless chromium (Debian's, through Playwright) opens
it. Times run from the navigation's start and are taken in the page, when an element first appears:
  title, health, alarms: the job's title line, the health table, the alarms (the newest first);
  usable: all three there;
  default plots: every plot of the workflows shown by default (those of the newest alarms) drawn;
  picked: --pick typed into the list of workflows and clicked, until its plots are drawn (from the click);
  address: the page opened again at ?workflow=PICK (the server warm), until its plots are drawn.
Prints each run and the medians, then what one look at OUT costs the server (reading.JobOutput, in this
process, on a copy of OUT): the first (the plan parsed, the sink read), one with nothing new, and one
after a batch of 10,000 new result rows (the newest 10,000 again, a day later), each a median of RUNS.
With --work, a size whose job already ran there is reused.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from sensorscript.dashboard import reading
from sensorscript.dashboard.app import shown_by_default
from sensorscript.dashboard.browser import chromium, why_no_browser
from sensorscript.registry import read_csv
from sensorscript.runtime.output.sinks import BatchRows, SQLiteSink
from sensorscript.workload import write_readings, write_workflows

ROOT = Path(__file__).resolve().parent.parent
SSCRIPT = [sys.executable, "-m", "sensorscript.cli"]
# When each element first appears (performance.now(), ms from the navigation's start).
WATCH = {"title": "#title", "health": "tr.health", "alarms": "#alarm-list > *"}
WATCHER = """
window.__seen = {};
const watch = %s;
const look = () => { for (const [name, selector] of Object.entries(watch))
  if (!(name in window.__seen) && document.querySelector(selector)) window.__seen[name] = performance.now(); };
new MutationObserver(look).observe(document, {childList: true, subtree: true});
"""
# Every card of the workflows shown has its plot drawn, or says it has no results.
DRAWN = """names => names.length > 0 && names.every(name => {
  const cards = [...document.querySelectorAll(`[id="workflow-${name}"] .stream`)];
  return cards.length > 0 && cards.every(card => card.querySelector('.main-svg') || card.innerText.includes('no results yet'));
}) && performance.now()"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", default="1024,10240", help="workflows in all, one size per comma")
    parser.add_argument("--sensors", default="1000,10000", help="generated sensors, one per size")
    parser.add_argument("--seconds", type=float, default=20, help="seconds of readings the job runs over")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pick", default="wf0042", help="the workflow picked in the list")
    parser.add_argument("--work", help="work in this folder and keep it (a job already run there is reused)")
    args = parser.parse_args()
    if why_no_browser():
        print(f"error: {why_no_browser()}", file=sys.stderr)
        return 1
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.work or tempfile.mkdtemp(prefix="sscript-bench-dashboard-"))
    sizes = list(zip(map(int, args.workflows.split(",")), map(int, args.sensors.split(","))))
    for workflows, sensors in sizes:
        out = build(work / f"w{workflows}", workflows, sensors, args.seconds)
        runs = [measure(out, args.pick) for _ in range(args.runs)]
        for number, run in enumerate(runs, 1):
            print(f"  run {number}: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in run.items()))
        print(f"  median of {len(runs)}: " + ", ".join(
            f"{name} {statistics.median(run[name] for run in runs):.2f} s" for name in runs[0]), flush=True)
        looks = [look_costs(out, args.pick, work / "copy") for _ in range(args.runs)]
        print("  one look at OUT, median: " + ", ".join(
            f"{name} {statistics.median(look[name] for look in looks) * 1000:,.1f} ms" for name in looks[0]), flush=True)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def build(folder: Path, workflows: int, sensors: int, seconds: float) -> Path:
    """The job's output in folder/out: compiled and run once (reused when it ran before)."""
    out = folder / "out"
    if (out / "status.json").exists():
        print(f"{workflows:,} workflows: reusing {out}", flush=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        examples, flags = len(list((ROOT / "workflows").glob("*.ss"))), workflows // 64
        fleet = write_workflows(folder, workflows - examples - flags, sensors, ROOT / "workflows", flags=flags)
        readings = write_readings(read_csv(folder / "sensors.csv"), folder / "data", seconds, files=2)
        scripts = sorted(str(p) for p in (folder / "workflows").glob("*.ss"))
        compiled = timed(SSCRIPT + ["compile", *scripts, "-o", str(out), "--sensors", str(folder / "sensors.csv")])
        ran = timed(SSCRIPT + ["run", str(out), "--input", str(folder / "data"), "--once"])
        print(f"{len(scripts):,} workflows ({flags} flags) compiled in {compiled:.1f} s; {readings:,} readings of "
              f"{len(fleet):,} sensors over {seconds:g} s, run with --once in {ran:.1f} s", flush=True)
    db = sqlite3.connect(out / "results.db")
    try:
        results, alarms = db.execute("SELECT COUNT(*), COUNT(events) FROM results").fetchone()
    finally:
        db.close()
    size = (out / "plan.json").stat().st_size
    flagged = len(reading.JobOutput(out).alarms().newest_first)
    print(f"  {results:,} results, {flagged:,} alarms ({alarms:,} pattern matches); plan.json {size / 2**20:.1f} MiB",
          flush=True)
    return out


def timed(command: list[str]) -> float:
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command[2:5])} ... failed:\n{done.stdout}{done.stderr}")
    return time.time() - started


def measure(out: Path, pick: str) -> dict[str, float]:
    """One run against a dashboard started afresh."""
    output = reading.JobOutput(out)
    default = shown_by_default(output.plan(), output.alarms().by_workflow)  # what the page shows as it opens
    # --port 0: the system picks a free port as the server binds it (a port probed here first could be
    # taken by another program before the dashboard binds it); the line it prints says which.
    server = subprocess.Popen(SSCRIPT + ["dashboard", str(out), "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if not found:
            raise SystemExit(f"sscript dashboard did not start: {line}{server.stdout.read()}")
        url = found.group(1)
        with chromium(1400, 1000) as (page, errors):
            page.add_init_script(WATCHER % dict(WATCH))
            page.goto(url)
            for selector in WATCH.values():
                page.locator(selector).first.wait_for(timeout=600_000)
            seen = page.evaluate("window.__seen")
            run = {name: seen[name] / 1000 for name in WATCH}
            run["usable"] = max(run.values())
            if default:
                run["default plots"] = page.wait_for_function(DRAWN, arg=default, timeout=600_000).json_value() / 1000

            page.locator("#workflows").click()
            page.keyboard.type(pick)
            option = page.get_by_role("option", name=pick, exact=True)
            option.wait_for(timeout=60_000)
            clicked = page.evaluate("performance.now()")
            option.click()
            drawn = page.wait_for_function(DRAWN, arg=[pick], timeout=600_000).json_value()
            run["picked"] = (drawn - clicked) / 1000

            page.goto(f"{url}?workflow={pick}")
            run["address"] = page.wait_for_function(DRAWN, arg=[pick], timeout=600_000).json_value() / 1000
            if errors:
                raise SystemExit("the browser's console said: " + "; ".join(errors))
        return run
    finally:
        server.terminate()
        server.wait(timeout=30)


def look_costs(out: Path, pick: str, copy: Path, batch: int = 10_000) -> dict[str, float]:
    """What the page's sections ask of JobOutput at a refresh (the alarms, the health, the picked
    workflow's rows), timed on a copy of OUT: the first look, one with nothing new, one after a batch."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("checkpoint"))
    status = json.loads((copy / "status.json").read_text())
    status["sink_spec"] = f"sqlite:{copy / 'results.db'}"
    (copy / "status.json").write_text(json.dumps(status))
    reading.READ_EVERY_S = -1.0  # every look reads
    output = reading.JobOutput(copy)

    def look() -> float:
        started = time.perf_counter()
        output.alarms(), output.health()
        output.stream_rows(list(output.plan().workflows[pick]))
        return time.perf_counter() - started

    costs = {"first": look(), "nothing new": look()}
    db = sqlite3.connect(copy / "results.db")
    try:
        rows = pd.read_sql_query(f"SELECT * FROM results ORDER BY rowid DESC LIMIT {batch}", db)
    finally:
        db.close()
    day = 86_400_000
    rows = rows.assign(**{c: rows[c] + day for c in ("ts", "window_start", "window_end", "start_ts", "end_ts")})
    SQLiteSink(copy / "results.db").write(10**9, BatchRows(rows, pd.DataFrame(columns=["raw", "reason"])))
    costs[f"after {batch:,} new rows"] = look()
    return costs


if __name__ == "__main__":
    sys.exit(main())
