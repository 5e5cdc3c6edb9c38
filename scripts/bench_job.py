"""Throughput of the compiled job on local Spark, against the raw rate, in one run on one input.

    .venv/bin/python scripts/bench_job.py [--workflows 1024] [--sensors 1000] [--shared K] [--seconds 60] [--partitions 2]
                                          [--compare-late] [--check N] [--cluster WORKERS | --master URL | --hosts]
                                          [--source files|kafka [--lines-per-message 100] [--max-readings-per-batch N]]

Generates the seeded bridge workload (scripts shaped like those of Zhou et al., 1,000 sensors of 21
types) and `--seconds` of readings at each sensor's frequency, then measures on local[2]:
  warm-up: the raw scan and the job below each run once on one of the files (the JVM compiles
           their code; a streaming job runs warm, and neither measurement pays it);
  limit: pyarrow alone reads, parses and codes the same files on 2 processes (2 cores), no Spark:
         its CSV reader, typed columns, the sensor ids looked up in the plan's (Arrow's index_in);
  raw: stage 0 through Spark: the job's source and its reading, parsing and packing (write nothing);
  job: the compiled job with --once (all windows emitted), SQLite sink.
Prints readings per second for each, and job/raw and job/limit.
With --compare-late, the job also runs under the late policies drop and correct (which archives
every reading as Parquet, those of sensors no workflow reads too), and prints their rates and ratio
(target: correct at least 80 % of drop) and the archive's size.
With --source kafka (issue #41; default: files alone), after the measurements above, the same
readings are produced into a topic of `--partitions` partitions on a broker of its own (scripts/
kafka_broker.py, stopped at the end; each file's lines cut in blocks of --lines-per-message lines a
message, as a gateway sends them; producing is not timed, and a warm-up topic from the warm-up file
is read first), and the job runs --once over the topic as over the files, SQLite sink, timed the
same way: it prints its rate and Kafka/files measured in this run (target: at least 0.8). The
job's `--max-readings-per-batch` is UNBOUNDED by default, so that it reads the whole topic in one
batch as the files' run reads its files, and the ratio compares the sources, not the batching (a
--once run over a topic needs one more batch to end the input). The bound counts readings, which
the job turns into messages by the readings a message holds (here a block of lines, not one); its
default, 1,000,000, cuts a larger topic into batches, and a topic's partitions then hold different
stretches of event time at a cut: readings behind the watermark come late (and --check tells).
Given, the bound is passed on as it is. With --check, the Kafka run's results are checked as the
files' run's are.
With --shared K, K more sensors at 20 Hz are read by every workflow, each in a union with one of the
workflow's own sensors (workload.write_workflows): their readers sit on every partition, so the
placement cuts sensor edges, which the bridge workload alone does not (its cuts are window outputs).
With --compare-partials (issue #44), the same workflows are compiled again with --no-partials
(readings, never slice partials, cross partitions), and both jobs run alternated twice, each after a
warm-up run: each one's rate, the tuples it forwarded to other partitions and its shuffles' records
and bytes (Spark's status store), and the ratios partials / readings (the best of two each).
With --compare-stage-0 (issue #44), the job runs a file a micro-batch (as a feed arrives), once as
compiled (stage 0 sends the slice partials of sensors only windows read, where on time: runtime/
state/summaries.py) and once with readings alone, alternated twice, each after a warm-up run: each
one's rate, the readings summed, the tuples that crossed the first shuffle (readings and partials'
rows) against the readings (the old bound: each one crosses once), and the shuffles' records and
bytes (Spark's status store); the model's figure is plan.txt's `ours, stage 0 summing`.
With --compare-sinks (issue #42), the job also runs with the PostgreSQL sink (a server of its own,
scripts/postgres_server.py, durable: fsync on; its results written by the executors) and again with
SQLite, alternated twice, and prints each one's rate (the best of two), the result rows written per
second, the peak memory of the driver's Python and JVM, and PostgreSQL/SQLite (target: at least 0.9).
With --check N, the results of N workflows drawn at random equal the reference evaluator's (tests/
oracles/streams.py) over the same readings, row for row. With --cluster WORKERS, everything runs on
a standalone cluster of that many workers of one core and 2 GB on 127.0.0.1 (scripts/standalone.py,
as tests/test_cluster.py starts it), the driver here; with --master URL, on a cluster started
elsewhere, whose workers get the job's Python libraries as `sscript run --cluster` ships them
(sensorscript/shipping.py). With --hosts (issue #43, as root), three runs in processes of their own on
the same arguments: local[2], two one-core workers on 127.0.0.1, and two one-core workers on test
hosts of their own (scripts/netns.py: the master and the driver on `driver`, a worker on `w1` and on
`w2`, the work folder on the folder they share): the cost of real sockets between hosts, as
hosts / local[2] and hosts / 127.0.0.1 cluster. The peak memory of the driver's Python, its
JVM, the executors' JVMs (cluster) and the largest Python worker is sampled during the job's run,
and the state each partition keeps is printed from status.json.
`--rounds N` alternates every comparison N times instead of twice (the best of N each), and
`--no-warm-up` leaves out every warm-up run: the suite's smoke run takes both (one round, cold), as
it proves that each figure prints, not what it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from sensorscript import shipping
from sensorscript.compiler import compile_workflows
from sensorscript.runtime.plan.loading import load_job
from sensorscript.runtime.ingest import source as sources
from sensorscript.runtime.ingest.packets import assign_partitions
from sensorscript.runtime.control import cluster_security
from sensorscript.runtime.control.run_loop import run
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.control.session import spark_session
from sensorscript.workload import write_readings, write_workflows

UNBOUNDED = 1_000_000_000  # --source kafka's --max-readings-per-batch by default: no bound in effect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=1024)
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--shared", type=int, default=0, metavar="K",
                        help="K more sensors at 20 Hz, each workflow reading one of them in a union with its own "
                             "(workload.write_workflows): readers on every partition, so a sensor edge is cut")
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--compare-late", action="store_true", help="also run under --late drop and --late correct")
    parser.add_argument("--check", type=int, default=0, metavar="N",
                        help="compare N workflows drawn at random with the reference evaluator")
    parser.add_argument("--profile", action="store_true",
                        help="print where the job's time went: its query's start, each Spark stage, the driver")
    parser.add_argument("--source", choices=("files", "kafka"), default="files",
                        help="kafka: also run the job on the same readings through a Kafka topic (a broker of its own)")
    parser.add_argument("--lines-per-message", type=int, default=100,
                        help="--source kafka: readings per message (a gateway's block of lines)")
    parser.add_argument("--max-readings-per-batch", type=int, metavar="N",
                        help="--source kafka: readings a micro-batch takes at most (default: no bound in effect)")
    parser.add_argument("--compare-partials", action="store_true",
                        help="also run the same workflows compiled with --no-partials (readings, never slice "
                             "partials, cross partitions), alternated: rates, tuples forwarded, shuffle bytes")
    parser.add_argument("--compare-stage-0", action="store_true",
                        help="also run a file a batch with stage 0 sending slice partials and with readings alone, "
                             "alternated: rates, tuples across the first shuffle, shuffle bytes")
    parser.add_argument("--compare-sinks", action="store_true",
                        help="also run with the PostgreSQL sink (a server of its own) and SQLite, alternated")
    parser.add_argument("--rounds", type=int, default=2, metavar="N",
                        help="--compare-*: alternate the jobs compared N times, the best of N each (default 2)")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="measure cold: no warm-up run before each measured one (a smoke run's figures, not a "
                             "benchmark's)")
    parser.add_argument("--cluster", type=int, default=0, metavar="WORKERS",
                        help="run on a standalone cluster of WORKERS workers (1 core, 2 GB each) on 127.0.0.1")
    parser.add_argument("--master", help="run on this Spark master, started elsewhere (its workers need nothing of "
                                         "the project: the job's Python libraries are shipped as sscript run --cluster "
                                         "ships them); --keep must then be a folder every worker sees")
    parser.add_argument("--cluster-secret", metavar="FILE|env:NAME",
                        help="with --master: the secret its master and workers were started with (as sscript run "
                             "--cluster-secret takes it); without it, a cluster that authenticates no one")
    parser.add_argument("--hosts", action="store_true",
                        help="(root) the job on local[2] here, on two one-core workers on 127.0.0.1, and on two "
                             "one-core workers on test hosts of their own (scripts/netns.py: the master and this "
                             "script on `driver`, a worker on `w1` and `w2`); prints each rate and their ratios")
    args = parser.parse_args()
    if args.hosts:
        on_hosts(args)
        return
    with contextlib.ExitStack() as stack:
        master = args.master or "local[2]"
        if args.cluster:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from standalone import standalone

            folder = Path(tempfile.mkdtemp(prefix="sscript-bench-cluster-"))
            cluster = stack.enter_context(standalone(folder, [(1, "2g")] * args.cluster))
            stack.callback(shutil.rmtree, folder, True)
            master, args.cluster_secret = cluster.url, str(cluster.secret)
        if args.cluster_secret:  # the job's session takes it from there, as under sscript run --cluster
            os.environ[cluster_security.SECRET_VARIABLE] = cluster_security.read_secret(args.cluster_secret, False)
        bench(args, master)


RATE = re.compile(r"^job \(--once, SQLite sink\): +([\d,]+) readings/s", re.MULTILINE)


def on_hosts(args) -> None:
    """This script three times, in processes of their own, on the same arguments: local[2], a
    cluster on 127.0.0.1 (--cluster 2), and a cluster on test hosts (--master, run on `driver`)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cluster_faults import driver_environment
    from netns import Hosts, why_not
    from standalone import spark_home, standalone

    if (reason := why_not()) is not None:
        raise SystemExit(f"bench_job.py --hosts: {reason}")
    given = [a for a in sys.argv[1:] if a != "--hosts"]
    rates = {}

    def measured(label: str, done: subprocess.CompletedProcess) -> None:
        print(f"== {label} ==\n{done.stdout.rstrip()}", flush=True)
        found = RATE.search(done.stdout)
        if done.returncode or not found:
            raise SystemExit(f"bench_job.py --hosts: the run on {label} failed:\n{done.stderr[-3000:]}")
        rates[label] = int(found.group(1).replace(",", ""))

    measured("local[2]", subprocess.run([sys.executable, __file__, *given], capture_output=True, text=True))
    measured("127.0.0.1 cluster", subprocess.run([sys.executable, __file__, *given, "--cluster", "2"],
                                                 capture_output=True, text=True))
    with Hosts(("driver", "w1", "w2"), spark=spark_home()) as hosts:
        base = hosts.shared / "cluster"
        base.mkdir()
        with standalone(base, [(1, "2g"), (1, "2g")], 120, hosts["driver"].place(),
                        [hosts["w1"].place(), hosts["w2"].place()]) as cluster:
            measured("hosts cluster", hosts["driver"].run(
                [sys.executable, __file__, *given, "--master", cluster.url, "--cluster-secret", str(cluster.secret),
                 "--keep", str(hosts.shared / "work")],
                timeout=7200, env=driver_environment(hosts)))
    local = rates["local[2]"]
    print(f"readings/s: local[2] {local:,}, two workers on 127.0.0.1 {rates['127.0.0.1 cluster']:,}, two workers "
          f"on hosts {rates['hosts cluster']:,}; hosts / local[2]: {rates['hosts cluster'] / local:.2f}, "
          f"hosts / 127.0.0.1 cluster: {rates['hosts cluster'] / rates['127.0.0.1 cluster']:.2f}")


def bench(args, master: str) -> None:
    if not args.master:  # this machine's workers: this Python
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.keep or tempfile.mkdtemp(prefix="sscript-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    scripts = work / "workflows"
    shutil.rmtree(scripts, ignore_errors=True)
    sensors = write_workflows(work, args.workflows, args.sensors, shared=args.shared)
    registry = work / "sensors.csv"
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    readings = write_readings(sensors, data, args.seconds, files=args.files)
    start = time.perf_counter()
    compiled = compile_workflows(sorted(str(p) for p in scripts.glob("*.ss")), work / "out", str(registry),
                                 args.partitions)
    compile_seconds = time.perf_counter() - start
    module = load_job(work / "out")
    if args.master:  # the executors get the job's Python as `sscript run --cluster` gives it to them
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join([*shipping.arguments(work / "out"), "pyspark-shell"])
        os.environ["PYSPARK_PYTHON"], os.environ["PATH"] = shipping.executor_python(), shipping.driver_path()
    spark = spark_session(module.JOB, master)

    def scan(folder: Path) -> float:
        """Stage 0 over `folder`: the job's source, reading, parsing and packing; nothing written."""
        start = time.perf_counter()
        query = (assign_partitions(sources.read_input(spark, str(folder)), module.JOB).writeStream.format("noop")
                 .trigger(availableNow=True).option("checkpointLocation", str(work / "raw-checkpoint")).start())
        query.awaitTermination()
        shutil.rmtree(work / "raw-checkpoint", ignore_errors=True)
        return time.perf_counter() - start

    # Warm-up on one file, for both: the raw scan and the job each run once on it first, so that
    # neither measurement pays for the JVM compiling its code (a streaming job runs warm).
    warm = work / "warm-up"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir()
    shutil.copy(sorted(data.iterdir())[0], warm / "part.csv")
    if args.warm_up:
        scan(warm)
    warm_up(args, spark, module.JOB, module.build_query, RunSettings(out=work / "warm-out", input=str(warm), once=True))
    # Raw rate: the same source and stage 0, nothing written; the limit: pyarrow alone.
    raw_seconds = scan(data)
    limit_seconds = limit(sorted(data.iterdir()), list(module.JOB.sensors))

    with PeakMemory() as memory:
        started = time.time()
        summary = run(module.JOB, module.build_query, RunSettings(out=work / "out", input=str(data), once=True), spark,
                      echo=lambda line: print("  " + line))
    job_seconds = summary.seconds
    referenced = summary.readings
    print(f"workload: {args.workflows} workflows over {len(compiled.plan.graph.sensors())} referenced sensors "
          f"({args.sensors} in the fleet{f', {args.shared} shared by all' if args.shared else ''}), "
          f"{readings:,} readings in {args.files} files, "
          f"{args.partitions} partitions; compile {compile_seconds:.1f} s")
    print(f"limit (pyarrow, 2 processes):  {readings / limit_seconds:>12,.0f} readings/s  ({limit_seconds:.1f} s)")
    print(f"raw (stage 0, noop sink):      {readings / raw_seconds:>12,.0f} readings/s  ({raw_seconds:.1f} s)")
    print(f"job (--once, SQLite sink):     {readings / job_seconds:>12,.0f} readings/s  ({job_seconds:.1f} s, "
          f"{referenced:,} referenced readings, {summary.results:,} results)")
    print(f"job / raw: {raw_seconds / job_seconds:.2f}; job / limit: {limit_seconds / job_seconds:.2f}")
    print(f"on {master}; " + memory.describe())
    partitions = json.loads((work / "out" / "status.json").read_text())["partitions"]
    print("state kept per partition: " + ", ".join(f"{p}: {_mib(g.get('state_bytes', 0))}"
                                                   for p, g in sorted(partitions.items(), key=lambda i: int(i[0]))))
    if args.profile:
        print(profile(spark, started, summary.seconds))
    if args.check:
        check(sorted(scripts.glob("*.ss")), data, work / "out", args.check)
    if args.source == "kafka":
        through_kafka(args, spark, module, work, data, warm, readings, job_seconds)
    if args.compare_sinks:
        compare_sinks(args, spark, module, work, data, warm, readings)
    if args.compare_partials:
        compare_partials(args, spark, module, work, data, warm, readings)
    if args.compare_stage_0:
        compare_stage_0(args, spark, module, work, data, warm, readings)
    if args.compare_late:
        rates = {}
        for late in ("drop", "correct") * args.rounds:  # alternated, the best of --rounds each
            warm_up(args, spark, module.JOB, module.build_query,
                    RunSettings(out=work / "warm-out", input=str(warm), once=True, late=late))
            timed = run(module.JOB, module.build_query, RunSettings(out=work / f"out-{late}", input=str(data),
                                                                    once=True, late=late), spark, echo=lambda _: None)
            rates[late] = max(rates.get(late, 0.0), readings / timed.seconds)
            print(f"job with --late {late + ':':<9} {readings / timed.seconds:>12,.0f} readings/s  "
                  f"({timed.seconds:.1f} s, {timed.late:,} late)")
        import pyarrow.parquet as pq

        from sensorscript.runtime.ingest import archive

        sizes = {}
        for folder in (archive.FOLDER, archive.UNREAD):  # read readings by code, unread ones by sensor id
            files = list((work / "out-correct" / folder).rglob("*.parquet"))
            sizes[folder] = (sum(f.stat().st_size for f in files), sum(pq.read_metadata(f).num_rows for f in files))
        print(f"correct / drop: {rates['correct'] / rates['drop']:.2f} ({best_of(args)}; the archive holds "
              + ", ".join(f"{folder}/ {size / 2**20:,.1f} MiB for {rows:,} readings ({size / max(rows, 1):.1f} B each)"
                          for folder, (size, rows) in sizes.items()) + ")")
    spark.stop()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def compare_partials(args, spark, module, work: Path, data: Path, warm: Path, readings: int) -> None:
    """The job as compiled (slice partials cross partitions where fewer than readings) and the same
    workflows compiled with --no-partials, alternated twice (the best of two each), each after a
    warm-up run: readings/s, the tuples forwarded to other partitions and every shuffle's records
    and bytes (Spark's status store), and the ratios."""
    from sensorscript.report.shuffles import shuffled, streaming_jobs

    raw = compile_workflows(sorted(str(p) for p in (work / "workflows").glob("*.ss")), work / "out-readings",
                            str(work / "sensors.csv"), args.partitions, partials=False)
    jobs = {"partials": module, "readings": load_job(work / "out-readings")}
    best: dict[str, tuple[float, int, int, int]] = {}
    for kind in ("partials", "readings") * args.rounds:
        job = jobs[kind]
        warm_up(args, spark, job.JOB, job.build_query, RunSettings(out=work / f"warm-{kind}", input=str(warm), once=True))
        before = streaming_jobs(spark)
        timed = run(job.JOB, job.build_query, RunSettings(out=work / f"out-{kind}", input=str(data), once=True),
                    spark, echo=lambda _: None)
        moved = shuffled(spark, streaming_jobs(spark) - before)
        shutil.rmtree(work / f"out-{kind}", ignore_errors=True)
        print(f"job, {kind} across partitions: {readings / timed.seconds:>12,.0f} readings/s  ({timed.seconds:.1f} s; "
              f"{timed.forwarded_remote:,} tuples to other partitions; shuffles {moved.records:,} records, "
              f"{moved.bytes / 2**20:,.1f} MiB)")
        if kind not in best or timed.seconds < best[kind][0]:
            best[kind] = (timed.seconds, timed.forwarded_remote, moved.records, moved.bytes)
    (p_s, p_fwd, p_rec, p_bytes), (r_s, r_fwd, r_rec, r_bytes) = best["partials"], best["readings"]
    print(f"model: {raw.plan.cost.ours:,.0f} tuples/min with readings, {module_cost(work / 'out'):,.0f} with partials; "
          f"partials / readings: rate {r_s / p_s:.2f}, tuples to other partitions {p_fwd / max(r_fwd, 1):.3f}, "
          f"shuffle records {p_rec / max(r_rec, 1):.3f}, shuffle bytes {p_bytes / max(r_bytes, 1):.3f} ({best_of(args)})")


def compare_stage_0(args, spark, module, work: Path, data: Path, warm: Path, readings: int) -> None:
    """The job a file a batch as compiled (stage 0 sums where it can) and with readings alone,
    alternated twice (the best of two each), each after a warm-up run: rates, what crossed the first
    shuffle, every shuffle's records and bytes, and the ratios."""
    from sensorscript.report.shuffles import shuffled, streaming_jobs
    from sensorscript.runtime.state.summaries import without_stage_0

    jobs = {"stage-0 partials": module.JOB, "readings alone": without_stage_0(module.JOB)}
    best: dict[str, tuple[float, int, int, int, int]] = {}
    for kind in [*jobs] * args.rounds:
        warm_up(args, spark, jobs[kind], module.build_query,
                RunSettings(out=work / "warm-stage-0", input=str(warm), once=True))
        before = streaming_jobs(spark)
        timed = run(jobs[kind], module.build_query, RunSettings(out=work / "out-stage-0", input=str(data), once=True,
                                                                max_files_per_trigger=1), spark, echo=lambda _: None)
        moved = shuffled(spark, streaming_jobs(spark) - before)
        shutil.rmtree(work / "out-stage-0", ignore_errors=True)
        crossed = timed.readings - timed.summed + timed.summary_rows  # across the first shuffle
        print(f"job, {kind + ':':<18} {readings / timed.seconds:>12,.0f} readings/s  ({timed.seconds:.1f} s, "
              f"{timed.batches} batches; {timed.summed:,} of {timed.readings:,} readings summed; {crossed:,} tuples "
              f"across the first shuffle; shuffles {moved.records:,} records, {moved.bytes / 2**20:,.1f} MiB)")
        if kind not in best or timed.seconds < best[kind][0]:
            best[kind] = (timed.seconds, crossed, timed.readings, moved.records, moved.bytes)
    (p_s, p_crossed, p_readings, _, p_bytes), (r_s, r_crossed, _, _, r_bytes) = best.values()
    model = json.loads((work / "out" / "plan.json").read_text())["cost_tuples_per_minute"]
    print(f"stage-0 partials / readings alone: rate {r_s / p_s:.2f}, tuples across the first shuffle "
          f"{p_crossed / max(r_crossed, 1):.3f} ({p_crossed / max(p_readings, 1):.3f} x the readings, the old bound), "
          f"shuffle bytes {p_bytes / max(r_bytes, 1):.3f} ({best_of(args)}); model: "
          f"{model['ours_stage_0_partials'] / model['lower_bound']:.3f} x the bound (one set of partials per slice; "
          f"the job sends one per slice, block read and batch, and every reading of a batch before the first)")


def warm_up(args, spark, job, build_query, settings: RunSettings) -> None:
    """A run before a measured one, so that it does not pay for the JVM compiling its code (a streaming
    job runs warm); none with --no-warm-up."""
    if args.warm_up:
        run(job, build_query, settings, spark, echo=lambda _: None)


def best_of(args) -> str:
    return "best of two each" if args.rounds == 2 else f"best of {args.rounds} each"


def module_cost(out: Path) -> float:
    """The model's tuples/min crossing, as the compile wrote it in OUT/plan.json."""
    return json.loads((out / "plan.json").read_text())["cost_tuples_per_minute"]["ours"]


def compare_sinks(args, spark, module, work: Path, data: Path, warm: Path, readings: int) -> None:
    """The job --once with the PostgreSQL sink and with SQLite, alternated twice (the best of two
    each), each after a warm-up run with that sink; their rates, result rows per second and the
    driver's peak memory, and PostgreSQL/SQLite."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from postgres_server import PostgresServer

    server = PostgresServer().start()
    os.environ["PGPASSWORD"] = server.password
    try:
        best: dict[str, tuple[float, int, str]] = {}
        for kind in ("sqlite", "postgresql") * args.rounds:
            sink = server.url if kind == "postgresql" else f"sqlite:{work / 'out-sinks' / 'results.db'}"
            warm_up(args, spark, module.JOB, module.build_query,
                    RunSettings(out=work / "warm-out", input=str(warm), once=True, sink=sink))
            with PeakMemory() as memory:
                timed = run(module.JOB, module.build_query, RunSettings(out=work / "out-sinks", input=str(data),
                                                                        once=True, sink=sink), spark, echo=lambda _: None)
            driver = ", ".join(f"{k} {v:,.0f} MiB" for k, v in sorted(memory.peaks.items()) if k.startswith("driver"))
            print(f"job, {kind + ' sink:':<18} {readings / timed.seconds:>12,.0f} readings/s  ({timed.seconds:.1f} s, "
                  f"{timed.results:,} results: {timed.results / timed.seconds:,.0f} rows/s; peak {driver})")
            if kind not in best or timed.seconds < best[kind][0]:
                best[kind] = (timed.seconds, timed.results, driver)
        print(f"PostgreSQL / SQLite: {best['sqlite'][0] / best['postgresql'][0]:.2f} ({best_of(args)})")
    finally:
        os.environ.pop("PGPASSWORD", None)
        server.remove()


def through_kafka(args, spark, module, work: Path, data: Path, warm: Path, readings: int, file_seconds: float) -> None:
    """The job --once over a topic holding the same readings (each file's lines in blocks of
    --lines-per-message a message, --partitions partitions) on a broker of its own, timed as the
    files' run; producing is not timed. Prints its rate and its ratio to the files' (target: at
    least 0.8), and with --check checks its results as the files' run's."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kafka_broker import Gateway, KafkaBroker

    broker = KafkaBroker(work / "kafka", heap="1g").start()
    try:
        def fill(topic: str, files: list[Path]) -> tuple[str, int]:
            """The topic made and filled with the files' lines (their headers left out): its
            address and the messages in it."""
            url = broker.topic(topic, args.partitions)
            gateway = Gateway(broker.bootstrap, topic, args.lines_per_message)
            for path in files:
                gateway.send(path.read_text().splitlines()[1:])
            gateway.flush()
            return url, gateway.messages

        fill_start = time.perf_counter()
        warm_url, _ = fill("warm-up", sorted(warm.iterdir()))
        url, messages = fill("readings", sorted(data.iterdir()))
        fill_seconds = time.perf_counter() - fill_start
        most = args.max_readings_per_batch or UNBOUNDED
        print(f"the topic: {readings:,} readings in {messages:,} messages of up to {args.lines_per_message} lines on "
              f"{args.partitions} partitions, produced in {fill_seconds:.1f} s (not timed); --max-readings-per-batch "
              f"{most:,}, in readings (the job turns it into messages of {args.lines_per_message} readings, not one "
              f"each)" + (": no bound in effect, the topic in one batch as the files' run reads its files"
                          if most == UNBOUNDED else ""))
        settings = dict(once=True, max_readings_per_batch=most)
        warm_up(args, spark, module.JOB, module.build_query, RunSettings(out=work / "warm-kafka", input=warm_url,
                                                                         **settings))
        with PeakMemory() as memory:
            summary = run(module.JOB, module.build_query, RunSettings(out=work / "out-kafka", input=url, **settings),
                          spark, echo=lambda line: print("  " + line))
        print(f"job through Kafka (--once, SQLite sink): {readings / summary.seconds:>12,.0f} readings/s  "
              f"({summary.seconds:.1f} s in {summary.batches} batches, {summary.readings:,} referenced readings, "
              f"{summary.results:,} results)")
        print(f"Kafka / files: {file_seconds / summary.seconds:.2f} (target: at least 0.8); from files "
              f"{readings / file_seconds:,.0f} readings/s in this run; " + memory.describe())
        if args.check:
            check(sorted((work / "workflows").glob("*.ss")), data, work / "out-kafka", args.check)
    finally:
        broker.stop(kill=True)


def profile(spark, started: float, seconds: float) -> str:
    """Where a run that began at `started` (time.time()) and took `seconds` spent them: until its first
    Spark stage (the query's start and planning), each stage Spark ran for it (from the driver's
    status store: wall time and its tasks' time), and after the last (the driver writing the rows)."""
    from sensorscript.report.shuffles import scala_list

    context = spark.sparkContext._jsc.sc()
    context.listenerBus().waitUntilEmpty(10_000)
    store = context.statusStore()
    default = getattr(store, "stageData$default$5")()
    stages = {}
    for job in scala_list(store.jobsList(None)):
        for stage_id in scala_list(job.stageIds()):
            try:
                for stage in scala_list(store.stageData(stage_id, False, None, False, default)):
                    if stage.status().toString() == "COMPLETE" and stage.submissionTime().isDefined():
                        begin = stage.submissionTime().get().getTime() / 1000
                        if begin >= started:
                            stages[int(stage.stageId())] = (begin, stage.completionTime().get().getTime() / 1000,
                                                            int(stage.numTasks()), int(stage.executorRunTime()) / 1000)
            except Exception:  # skipped, or no longer retained
                continue
    if not stages:
        return "profile: no stage found"
    rows = sorted(stages.values())
    lines = [f"profile of the job's {seconds:.2f} s: query start and planning {rows[0][0] - started:.2f} s"]
    for number, (begin, end, tasks, task_seconds) in enumerate(rows):
        lines.append(f"  Spark stage {number}: {end - begin:.2f} s ({tasks} tasks, {task_seconds:.2f} s of task time)")
    lines.append(f"  after the last stage (the driver writes the rows): {started + seconds - rows[-1][1]:.2f} s")
    return "\n".join(lines)


def limit(files: list[Path], sensors: list[str]) -> float:
    """Seconds pyarrow alone takes to read, parse and code `files` on two processes: its CSV reader
    with typed columns (the header skipped), then each sensor id's position among `sensors`."""
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_read_and_code, [(str(f), sensors) for f in files]))
    return time.perf_counter() - start


def _read_and_code(task: tuple[str, list[str]]) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    path, sensors = task
    table = pacsv.read_csv(path, pacsv.ReadOptions(column_names=["sensor_id", "ts", "value"], skip_rows=1),
                           convert_options=pacsv.ConvertOptions(
                               column_types={"sensor_id": pa.string(), "ts": pa.int64(), "value": pa.float64()}))
    return len(pc.index_in(table.column("sensor_id"), value_set=pa.array(sensors)))


def _mib(size: float) -> str:
    return f"{size / 2**20:,.1f} MiB" if size >= 2**20 else f"{size / 1024:,.0f} KiB"


def check(scripts: list[Path], data: Path, out: Path, count: int) -> None:
    """The results of `count` workflows drawn at random, row for row against the reference evaluator
    over every line of the input (the job read it as one micro-batch)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the oracles
    from oracles.streams import assert_same, evaluate, expected_rows
    from sensorscript.parser import load
    from sensorscript.runtime.output.sinks import sqlite_results

    start = time.perf_counter()
    sample = random.Random(25).sample(scripts, min(count, len(scripts)))
    lines = [line for path in sorted(data.iterdir()) for line in path.read_text().splitlines()]
    evaluation = evaluate(load([str(p) for p in sample]).workflows, [lines])
    streams = {row.stream for row in evaluation.rows}
    assert_same([r for r in sqlite_results(out / "results.db") if r[0] in streams], expected_rows(evaluation))
    print(f"check: the results of {len(sample)} workflows drawn at random ({len(streams)} streams, "
          f"{len(evaluation.rows):,} rows) equal the reference evaluator's, row for row "
          f"({time.perf_counter() - start:.0f} s)")


class PeakMemory:
    """The largest resident set size seen, every half second, of the driver's Python (this process),
    the JVMs of Spark (the driver's, the executors' on a cluster) and each of Spark's Python workers."""

    def __init__(self):
        self.peaks: dict[str, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "PeakMemory":
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.done.set()
        self.thread.join()

    def _sample(self) -> None:
        own = psutil.Process()
        while not self.done.wait(0.5):
            found = [("driver Python", own)]
            for process in psutil.process_iter(["name", "cmdline"]):
                try:
                    line = " ".join(process.info["cmdline"] or ())
                    if process.info["name"] == "java" and "pyspark" in line:
                        kind = ("executor JVM" if "CoarseGrainedExecutorBackend" in line else
                                "driver JVM" if own.pid in {p.pid for p in process.parents()} else None)
                    else:
                        kind = "largest Python worker" if "pyspark.daemon" in line or "pyspark.worker" in line else None
                    if kind:
                        found.append((kind, process))
                except psutil.Error:
                    continue
            for kind, process in found:
                with contextlib.suppress(psutil.Error):
                    self.peaks[kind] = max(self.peaks.get(kind, 0.0), process.memory_info().rss / 2**20)

    def describe(self) -> str:
        return "peak memory (RSS): " + ", ".join(f"{kind} {mib:,.0f} MiB" for kind, mib in sorted(self.peaks.items()))


if __name__ == "__main__":
    main()
