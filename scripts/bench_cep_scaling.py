"""How the pattern matcher scales with `within` and with the events of one key in one batch (issue #38).

    .venv/bin/python scripts/bench_cep_scaling.py [--keys 4] [--per-key 1000,10000,100000,1000000]
                                                  [--within 1s,1min,1h] [--patterns ab,akc,neg]
                                                  [--strategies next,any] [--timeout 600] [--json PATH]
    .venv/bin/python scripts/bench_cep_scaling.py --target [--keys 400] [--per-key 10000] [--runs 3]

Each case is one batch handed to the job's matcher (`Matcher.step`, the code the Spark job's
workers run per partition, without Spark around it) in a child process of its own: `--keys` sensors
at 10 Hz, values uniform in [0, 10) (seed 38), every sensor in one batch, patterns per sensor:

  ab   P = pattern(a: U -> b: U) where a.value > 9 and b.value > a.value + 0.95
  akc  P = pattern(a: U -> b: U+ -> c: U) where a.value > 9 and b.value < 5 and c.value > a.value + 0.95
  neg  P = pattern(a: U -> !n: U -> b: U) where a.value > 9 and n.value > 9.9 and b.value > a.value + 0.95
  surge  P = pattern(a: U -> !calm: U -> c: U+) where a.value > 9.5 and calm.value < 0.1 and c.value > a.value
         and count(c) >= 2   (workflows/pier_alarms.ss's SURGE: the closure's conditions read a)
  akcr P = akc's pattern and count(b) >= 3 (the closure read by the step that ends it)

each `within W strategy S partition by sensor`, S = next, or any with `emit first` (one match per
start: `any` with `emit all` makes every pair in the window a match, its cost is its output). Printed
per case: seconds, events per second, matches, partial matches cut by the pattern limit, and the
child's peak resident memory (ru_maxrss) less what it held before the batch (the input's arrays):
the matcher's own peak. A case that runs past `--timeout` seconds is reported as such.

`--target`: the issue's target, 400 sensors x 10,000 readings (4 M) in one batch, `ab` with `next`
and with `strict` (the throughput to be within 2x of) on the same data, for within 1 s, 1 min and
10 min, peak memory of each; then per within, next's time over strict's (a longer window makes
strict slower too: the events it holds). `--runs K`: each case K times, its median time (a case's
time varies by a third from run to run here, most of it the kernel's first touch of new memory).

`--rivals`: the same events (scripts/cep_rivals.py: 40 sensors x 10,000 readings, seed 38) matched by
ours (`next`, the matcher alone as above), Esper and Flink SQL MATCH_RECOGNIZE (their time: the
engine's own matching loop or job, the events already read; `python scripts/cep_rivals.py --fetch`
first), for `--patterns` and `--within`; the matches compared one by one as (sensor, first event's
time, last event's time). A rival past `--timeout` seconds is reported as such.

`--spark`: the same 4 M readings (one CSV file) through the whole job, `sscript compile` and
`sscript run OUT --input DATA --once` on local[2], `ab` with `next` for each `--within` (default
1s,10min), the Python workers capped at `--worker-memory` (default 1g; spark.executor.pyspark.memory,
an address-space limit); printed: whether the run completed, its wall time, the matches written and
the largest resident memory any Python worker of the run reached (sampled from /proc every 0.2 s).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # cep_rivals.py beside it

PATTERNS = {
    "ab": ("a: U -> b: U", "a.value > 9 and b.value > a.value + 0.95"),
    "akc": ("a: U -> b: U+ -> c: U", "a.value > 9 and b.value < 5 and c.value > a.value + 0.95"),
    "neg": ("a: U -> !n: U -> b: U", "a.value > 9 and n.value > 9.9 and b.value > a.value + 0.95"),
    # Closures read by other elements (not for --rivals): the example's SURGE, and a count at c.
    "surge": ("a: U -> !calm: U -> c: U+", "a.value > 9.5 and calm.value < 0.1 and c.value > a.value and count(c) >= 2"),
    "akcr": ("a: U -> b: U+ -> c: U", "a.value > 9 and b.value < 5 and c.value > a.value + 0.95 and count(b) >= 3"),
}


def script(names: list[str], pattern: str, within: str, strategy: str) -> str:
    elements, where = PATTERNS[pattern]
    emit = " emit first" if strategy == "any" else ""
    union = ", ".join(f'"{name}"' for name in names)
    return (f"U = union({union});\nP = pattern({elements}) where {where} within {within} strategy {strategy}{emit} "
            f"partition by sensor;\n")


def sensors(keys: int) -> list[str]:
    return [f"U{i:04d}" for i in range(keys)]


def matched(text: str, readings) -> dict:
    """The pattern P of `text` run by the job's matcher over one batch, in this process:
    `readings(name)` gives a sensor's (ts, values), asked in the order the pattern's feeds come.
    Its matches, state and time, the plan, and the resident peak (MiB) before the batch."""
    import numpy as np

    from sensorscript.codegen.program import programs
    from sensorscript.parser import load
    from sensorscript.partition.plan import make_plan
    from sensorscript.runtime.state.cep.matcher import POS_INF, Matcher
    from sensorscript.runtime.state.engine import Tuples

    plan = make_plan(load(["w.ss"], texts={"w.ss": text}).workflows, None, 1)
    (program,), _ = programs(plan)
    node = next(n for n in program.nodes if hasattr(n, "tree"))
    feeds = {}
    for feed in node.feeds:
        name = feed.stream.split(":", 1)[1]
        ts, values = readings(name)
        feeds[feed.stream] = Tuples(ts, values, np.full(len(ts), plan.codes[name], np.int32))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    matcher = Matcher(node)
    state = matcher.new_state()
    start = time.perf_counter()
    found = matcher.step(state, matcher.arrivals(feeds), POS_INF)
    return {"found": found, "state": state, "seconds": time.perf_counter() - start, "plan": plan,
            "before_mib": before}


def one_case(keys: int, per_key: int, pattern: str, within: str, strategy: str) -> dict:
    """In this process: the batch, matched once; its figures."""
    import numpy as np

    rng = np.random.default_rng(38)
    ts = np.arange(per_key, dtype=np.int64) * 100
    run = matched(script(sensors(keys), pattern, within, strategy), lambda name: (ts, rng.random(per_key) * 10))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seconds, before = run["seconds"], run["before_mib"]
    return {"keys": keys, "per_key": per_key, "pattern": pattern, "within": within, "strategy": strategy,
            "seconds": round(seconds, 3), "events_per_s": round(keys * per_key / seconds),
            "matches": len(run["found"]), "bound": sum(int(part[2].sum()) for part in run["found"].parts),
            "cut": run["state"].cut, "matcher_mib": round(peak - before),
            "input_mib": round(before)}


def median_case(keys: int, per_key: int, pattern: str, within: str, strategy: str, timeout: float,
                runs: int) -> dict:
    """`run_case` `runs` times: the run of median time."""
    results = [run_case(keys, per_key, pattern, within, strategy, timeout) for _ in range(runs)]
    timed = sorted((r for r in results if "seconds" in r), key=lambda r: r["seconds"])
    return timed[len(timed) // 2] if len(timed) == runs else results[-1]


def run_case(keys: int, per_key: int, pattern: str, within: str, strategy: str, timeout: float) -> dict:
    command = [sys.executable, __file__, "--case", json.dumps([keys, per_key, pattern, within, strategy])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"keys": keys, "per_key": per_key, "pattern": pattern, "within": within, "strategy": strategy,
                "timeout": timeout}
    if done.returncode:
        return {"keys": keys, "per_key": per_key, "pattern": pattern, "within": within, "strategy": strategy,
                "failed": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def spark_case(keys: int, per_key: int, within: str, worker_memory: str, folder: Path) -> dict:
    """The whole job over one batch, with the workers capped; their peak resident memory."""
    import os
    import sqlite3
    import threading

    import numpy as np

    data = folder / f"data-{keys}x{per_key}"
    if not data.exists():
        data.mkdir(parents=True)
        rng = np.random.default_rng(38)
        names = sensors(keys)
        with open(data / "readings.csv", "w") as f:
            for i in range(per_key):
                ts = 1_700_000_000_000 + i * 100
                f.writelines(f"{name},{ts},{v:.4f}\n" for name, v in zip(names, rng.random(keys) * 10))
    out = folder / f"out-{within}"
    (folder / "w.ss").write_text(script(sensors(keys), "ab", within, "next"))
    environment = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"--conf spark.executor.pyspark.memory={worker_memory} "
                                                        "pyspark-shell"}
    sscript = [sys.executable, "-m", "sensorscript.cli"]
    subprocess.run([*sscript, "compile", str(folder / "w.ss"), "-o", str(out)], env=environment, check=True,
                   capture_output=True)
    peak, running = [0], [True]

    def sample() -> None:
        while running[0]:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    command = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if b"pyspark" not in command or b"java" in command:
                        continue
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            peak[0] = max(peak[0], int(line.split()[1]) // 1024)
                except OSError:
                    continue
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    done = subprocess.run([*sscript, "run", str(out), "--input", str(data), "--once"], env=environment,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    running[0] = False
    sampler.join()
    matches = 0
    if not done.returncode:
        with sqlite3.connect(out / "results.db") as db:
            matches = db.execute("SELECT count(*) FROM results WHERE stream = 'w.P'").fetchone()[0]
    return {"keys": keys, "per_key": per_key, "within": within, "worker_memory": worker_memory,
            "completed": not done.returncode, "seconds": round(seconds, 1), "matches": matches,
            "worker_peak_mib": peak[0], "said": (done.stdout + done.stderr).strip().splitlines()[-1:]}


def ours_on(events_csv: Path, pattern: str, within_ms: int) -> dict:
    """Our matcher on the rivals' events: its matches as (sensor, first ts, last ts), its time."""
    import numpy as np

    from cep_rivals import load_events

    events = load_events(events_csv)
    names = sorted({sensor for sensor, _, _ in events})
    by_sensor = {name: [] for name in names}
    for sensor, ts, value in events:
        by_sensor[sensor].append((ts, value))

    def readings(name: str):
        rows = np.array(by_sensor[name], dtype=np.float64).reshape(-1, 2)
        return rows[:, 0].astype(np.int64), rows[:, 1]

    run = matched(script(names, pattern, str(within_ms), "next"), readings)
    found, seconds = run["found"], run["seconds"]
    sensor_of = {code: name for name, code in run["plan"].codes.items()}
    first_part = found.parts[0]
    matched_sensors = [sensor_of[int(c)] for c in first_part[5][first_part[1]]] if len(found) else []
    matches = sorted(zip(matched_sensors, found.start.tolist(), found.end.tolist()))
    return {"matches": matches, "seconds": seconds, "events_per_s": len(events) / seconds}


def rivals(patterns: list[str], withins: list[str], timeout: float) -> list[dict]:
    import tempfile

    from sensorscript.times import duration_ms
    from cep_rivals import make_events, run_rival

    results = []
    with tempfile.TemporaryDirectory() as folder:
        events_csv = Path(folder) / "events.csv"
        count = make_events(events_csv)
        for pattern in patterns:
            for within in withins:
                within_ms = duration_ms(within, "within")
                ours = ours_on(events_csv, pattern, within_ms)
                line = {"pattern": pattern, "within": within, "events": count, "engine": "sensorscript",
                        "events_per_s": round(ours["events_per_s"]), "seconds": round(ours["seconds"], 3),
                        "matches": len(ours["matches"]), "same": True}
                results.append(line)
                print(json.dumps(line), flush=True)
                for engine in ("esper", "flink"):
                    try:
                        theirs = run_rival(engine, events_csv, pattern, within_ms, timeout=timeout)
                        line = {"pattern": pattern, "within": within, "events": count, "engine": engine,
                                "events_per_s": round(theirs["events_per_s"]), "seconds": round(theirs["seconds"], 3),
                                "matches": len(theirs["matches"]),
                                "same": [tuple(m) for m in theirs["matches"]] == ours["matches"]}
                    except Exception as error:  # a timeout, a missing JVM: said in the table
                        line = {"pattern": pattern, "within": within, "events": count, "engine": engine,
                                "failed": str(error).splitlines()[0][:200] if str(error) else type(error).__name__}
                    results.append(line)
                    print(json.dumps(line), flush=True)
    return results


def row(result: dict) -> str:
    head = (f"| {result['pattern']} | {result['strategy']} | {result['within']} | {result['keys']} x "
            f"{result['per_key']:,} |")
    if "timeout" in result:
        return head + f" over {result['timeout']:.0f} s | | | | | |"
    if "failed" in result:
        return head + f" failed: {result['failed']} | | | | | |"
    return head + (f" {result['seconds']:.2f} | {result['events_per_s']:,} | {result['matches']:,} |"
                   f" {result['bound']:,} | {result['cut']:,} | {result['matcher_mib']:,} |")


def output_linear(results: list[dict]) -> list[str]:
    """Per pattern, strategy and batch size: how the time grows from each `within` to the next, and
    how the time per event bound in the matches does (for `emit all`, a cost linear in the matches:
    CORE's output-linear delay; where the matches bind few events, the time is the events' alone)."""
    lines, seen = [], {}
    for r in results:
        if "seconds" in r:
            seen.setdefault((r["pattern"], r["strategy"], r["per_key"]), []).append(r)
    for (pattern, strategy, n), rows in seen.items():
        steps = []
        for first, last in zip(rows, rows[1:]):
            if first["bound"] and last["bound"] and first["seconds"] >= 0.05:
                per_bound = (last["seconds"] / last["bound"]) / (first["seconds"] / first["bound"])
                steps.append(f"{first['within']} -> {last['within']}: time {last['seconds'] / first['seconds']:.1f}x, "
                             f"events in matches {last['bound'] / first['bound']:.1f}x, time per event in matches "
                             f"{per_bound:.2f}x")
        if steps:
            lines.append(f"{pattern} {strategy} {n:,} a key, " + "; ".join(steps))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=None)
    parser.add_argument("--per-key", default=None)
    parser.add_argument("--within", default="1s,1min,1h")
    parser.add_argument("--patterns", default="ab,akc,neg")
    parser.add_argument("--strategies", default="next,any")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--target", action="store_true")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--spark", action="store_true")
    parser.add_argument("--rivals", action="store_true")
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--json")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(*json.loads(args.case))))
        return 0
    if args.rivals:
        results = rivals(args.patterns.split(","), (args.within if args.within != "1s,1min,1h" else "1s,1min")
                         .split(","), args.timeout)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 0
    if args.spark:
        import tempfile

        keys, per_key = args.keys or 400, int(args.per_key or 10_000)
        results = []
        with tempfile.TemporaryDirectory() as folder:
            for within in (args.within if args.within != "1s,1min,1h" else "1s,10min").split(","):
                results.append(spark_case(keys, per_key, within, args.worker_memory, Path(folder)))
                print(json.dumps(results[-1]), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 0
    if args.target:
        keys, sizes = args.keys or 400, [int(n) for n in (args.per_key or "10000").split(",")]
        cases = [(keys, n, "ab", w, strategy) for n in sizes for strategy in ("next", "strict")
                 for w in ("1s", "1min", "10min")]
    else:
        keys, sizes = args.keys or 4, [int(n) for n in (args.per_key or "1000,10000,100000,1000000").split(",")]
        cases = [(keys, n, pattern, within, strategy) for pattern in args.patterns.split(",")
                 for strategy in args.strategies.split(",") for within in args.within.split(",") for n in sizes]
    print("| pattern | strategy | within | sensors x readings in the batch | seconds | events/s | matches |"
          " events in matches | cut | matcher's peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for case in cases:
        result = median_case(*case, timeout=args.timeout, runs=args.runs)
        results.append(result)
        print(row(result), flush=True)
    if args.target:
        timed = {(r["per_key"], r["within"], r["strategy"]): r["seconds"] for r in results if "seconds" in r}
        for n in sizes:
            ratios = [f"{w} {timed[(n, w, 'next')] / timed[(n, w, 'strict')]:.2f}x" for w in ("1s", "1min", "10min")
                      if (n, w, "next") in timed and (n, w, "strict") in timed]
            print(f"next's time over strict's, {keys} x {n:,}: " + ", ".join(ratios))
    else:
        print("\n".join(output_linear(results)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
