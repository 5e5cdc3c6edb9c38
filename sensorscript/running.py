"""`sscript run`: run a compiled job (OUT/job.py) on local Spark or submit it to a cluster."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from sensorscript import shipping
from sensorscript.errors import Diagnostic, SensorScriptError, file_problem
from sensorscript.runtime.control import cluster_security
from sensorscript.runtime.control.run_options import RunSettings
from sensorscript.runtime.control.session import SPARK_LOG
from sensorscript.runtime.plan.loading import compiled_job, load_job


def run_local(out: Path, source: str, once: bool, sink: str | None, spark=None, echo=print, **options):
    """Run the job in OUT in this process (tests, `sscript report`); `options`: RunSettings' fields."""
    from sensorscript.runtime.control.run_loop import run
    from sensorscript.runtime.control.session import spark_session

    settings = RunSettings(out=Path(out), input=source, once=once, sink=sink, **options)
    module = load_job(out)
    _check_input(source)
    _check_sink(sink, out)
    spark = spark or spark_session(module.JOB, "local[2]", log=Path(out) / SPARK_LOG)
    return run(module.JOB, module.build_query, settings, spark, echo=echo)


def run_process(settings: RunSettings, echo=print) -> int:
    """Run OUT/job.py in a child process on local Spark, passing on its output without Spark's noise."""
    _check_job(settings)
    return run_quietly([sys.executable, str(settings.out / "job.py"), *settings.job_arguments()], echo,
                       job_out=settings.out)


def run_quietly(command: list[str], echo, environment: dict[str, str] | None = None,
                job_out: Path | None = None, spark_log: Path | None = None) -> int:
    """Run a command that starts Spark, passing its output on (a job started with python writes
    Spark's own output to OUT/spark.log itself: runtime/control/session.py).

    `spark_log`: the command is spark-submit, whose standard error is Spark's (its JVM's log and
    what the Python workers it starts print; the Python driver's own output comes on its standard
    output): written to that file, bounded, unless SSCRIPT_SPARK_LOG asks for it here.

    `job_out`: the command runs the job in that folder. It then runs in a session of its own, so
    that Ctrl-C in a terminal reaches only this process, which turns Ctrl-C and SIGTERM into stop
    requests the job reads between batches (runtime/control/stopping.py), locally or on a cluster; a third
    one terminates it. If this process dies, the job is sent SIGTERM: it stops between batches."""
    from sensorscript.runtime.control.session import output_writer, pass_on, spark_log_level
    from sensorscript.runtime.control.stopping import StopOnSignals

    if environment is None:  # local Spark binds to the loopback address (and says nothing about the host name)
        environment = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    environment = {**environment, "PYTHONUNBUFFERED": "1"}  # progress lines as they come, not when a pipe's buffer fills
    apart = spark_log is not None and not spark_log_level()
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE if apart else subprocess.STDOUT,
                               text=True, bufsize=1, start_new_session=job_out is not None,
                               preexec_fn=_stop_with_parent if job_out is not None else None)
    if apart:
        threading.Thread(target=pass_on, args=(process.stderr, output_writer(spark_log)), name="spark-output",
                         daemon=True).start()

    def terminate() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)

    stops = StopOnSignals(job_out, echo, last_resort=terminate) if job_out is not None else contextlib.nullcontext()
    with stops:
        try:
            for line in process.stdout:
                line = line.rstrip("\n")
                if line.strip():
                    echo(line)
        except KeyboardInterrupt:
            process.terminate()
        return process.wait()


def _stop_with_parent() -> None:
    """In the child, before it runs: SIGTERM it when its parent dies (Linux; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop(out: Path, mode: str, timeout: float, echo=print) -> str:
    """`sscript stop OUT`: ask the job running in OUT to stop (`boundary`, `drain` or `now`), and
    wait until it has; returns how it ended (stopped or ended)."""
    import time

    from sensorscript.runtime.output.status import describe_state, run_state
    from sensorscript.runtime.control.stopping import request_stop

    out = Path(out)
    status = job_status(out)
    if run_state(status) != "running":
        raise SensorScriptError([Diagnostic("error", f"no job is running in {out}; its last run: {describe_state(status)}")])
    request_stop(out, mode)
    echo("asked the job to " + {"boundary": "stop after the batch it is writing",
                                "drain": "end its input, emit every window and pending match, and stop",
                                "now": "stop at once"}[mode] + " ...")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = job_status(out)
        state = run_state(status)
        if state != "running":
            if state == "killed":
                raise SensorScriptError([Diagnostic("error", f"the job in {out} died while stopping: "
                                                             f"{describe_state(status)}")])
            echo(f"the job in {out} {describe_state(status)}")
            return state
        time.sleep(0.25)
    raise SensorScriptError([Diagnostic("error", f"the job in {out} has not stopped within {timeout:g} s; "
                                                 f"it will at its next batch boundary ('sscript stop {out} --now' "
                                                 f"stops it at once)")])


def await_version(out: Path, number: int, timeout: float, echo=print, streams=None) -> None:
    """After `sscript update`: wait until the job running in OUT runs version `number` of its plan
    and say so, then (within the same time) until its first batch on that version, and say from
    when each of `streams` (the added and changed output streams) is written whole; a job that is
    not running takes the version when it next runs."""
    import time

    from sensorscript.runtime.output.status import describe_state, describe_version, run_state

    out = Path(out)
    status = job_status(out) if (out / "status.json").exists() else None
    if status is None or run_state(status) != "running":
        echo(f"no job is running in {out}: 'sscript run {out} --input DATA' continues from its checkpoint with "
             f"plan version {number}")
        return
    echo(f"the job in {out} switches to plan version {number} after the batch it is writing ...")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = job_status(out)
        if status.get("plan_version") == number:
            echo(f"the job in {out} runs {describe_version(status)}")
            _await_exact(out, status, deadline, echo, streams)
            return
        if run_state(status) != "running":
            echo(f"the job in {out} is no longer running ({describe_state(status)}); its next run switches "
                 f"to plan version {number}")
            return
        time.sleep(0.25)
    echo(f"the job in {out} has not switched within {timeout:g} s; it will at its next batch boundary "
         f"('sscript status {out}' shows the version it runs)")


def _await_exact(out: Path, status: dict, deadline: float, echo, streams) -> None:
    """After the switch: the first batch on the new version reports from when its streams are whole."""
    import time

    from sensorscript.runtime.output.status import describe_exact, run_state

    after = status.get("plan_after_batch")
    while (status.get("last_batch") is None or after is not None and status["last_batch"] <= after) \
            and run_state(status) == "running" and time.monotonic() < deadline:
        time.sleep(0.25)
        status = job_status(out)
    lines = describe_exact(status, streams)
    if streams and not lines:
        lines = [f"from when the new streams are written whole: 'sscript status {out}' says once the job has "
                 f"run a batch on the new version"]
    for line in lines:
        echo(line)


def submit(settings: RunSettings, echo=print, extra: list[str] | None = None) -> int:
    """spark-submit OUT/job.py to the Spark cluster of `settings.cluster`; returns spark-submit's exit code."""
    import pyspark

    settings = dataclasses.replace(settings, out=settings.out.resolve())
    _check_job(settings)
    secret = None
    if cluster_security.needs_secret(settings.cluster):
        try:
            secret = cluster_security.read_secret(settings.cluster_secret, settings.cluster_unauthenticated)
        except ValueError as exc:
            raise SensorScriptError([Diagnostic("error", str(exc))]) from None
    _check_master(settings.cluster)
    spark_home = Path(pyspark.__file__).resolve().parent
    # The executors' Python libraries travel with the job (shipping.py): a worker needs Java,
    # Spark and a Python of the driver's minor version, nothing of the project.
    command = [str(spark_home / "bin" / "spark-submit"), "--master", settings.cluster,
               *shipping.arguments(settings.out, echo), "--conf", f"spark.pyspark.driver.python={sys.executable}",
               "--conf", "spark.ui.enabled=false", *_jars(), *(extra or []),
               str(settings.out / "job.py"), *settings.job_arguments()]
    environment = {**os.environ, "SPARK_HOME": str(spark_home), "PATH": shipping.driver_path()}
    environment.pop(cluster_security.SECRET_VARIABLE, None)
    if secret is not None:  # the job's session takes it (runtime/control/session.py)
        environment[cluster_security.SECRET_VARIABLE] = secret
    echo(f"submitting {settings.out / 'job.py'} to {settings.cluster}"
         + (" (authenticated by its secret, encrypted)" if secret else
            " (a cluster that authenticates no one: --cluster-unauthenticated)" if settings.cluster_unauthenticated
            else ""))
    return run_quietly(command, echo, environment, job_out=settings.out, spark_log=settings.out / SPARK_LOG)


def _jars() -> list[str]:
    """spark-submit's --jars for the jars the job hands to Spark (Spark's Kafka connector): on the
    driver's class path from its start (a session's spark.jars comes too late for the driver that
    spark-submit started) and shipped to the executors."""
    from sensorscript.runtime.control import jars

    given = jars.spark_options().get("spark.jars")
    return ["--jars", given] if given else []


def correct_now(out: Path):
    """`sscript correct OUT`: run a correction of late data now, in a child process (Spark's start-up
    chatter filtered); returns what it did."""
    from sensorscript.runtime.control.correction import Correction

    out = Path(out)
    load_job(out)  # a clear error if there is no job
    status = job_status(out)
    if not status["late_policy"].startswith("correct"):
        raise SensorScriptError([Diagnostic("error", f"the job in {out} ran with late policy "
                                                     f"'{status['late_policy']}': corrections need --late correct")])
    found: list[str] = []
    code = run_quietly([sys.executable, "-m", "sensorscript.runtime.control.correction", str(out)],
                       lambda line: found.append(line))
    report = [line for line in found if line.startswith("{")]
    if code or not report:
        raise SensorScriptError([Diagnostic("error", "the correction failed: " + (found[-1] if found else "no output"))])
    return Correction(**json.loads(report[-1]))


def show_results(out: Path, streams: list[str] | None, all_versions: bool, limit: int, tz=None):
    """`sscript results OUT`: the newest version of each result row (or every version), times in
    `tz` (UTC when None); its lines, one by one (a SQLite or PostgreSQL sink's stream after stream,
    never all its rows at once)."""
    from sensorscript.runtime.control.correction import newest
    from sensorscript.runtime.output.postgres_sink import PostgresSink, is_postgres
    from sensorscript.runtime.output.sinks import read_results, sqlite_result_groups
    from sensorscript.runtime.output.status import result_groups, result_lines, results_spec
    from sensorscript.times import UTC

    out = Path(out)
    compiled_job(out)  # a clear error for a folder that holds no job
    status = job_status(out) if (out / "status.json").exists() else {}
    # With --sink kafka://: read back from the topic, by a local Spark (runtime/output/kafka_sink.py).
    spec = results_spec(out, status) if status else f"sqlite:{out / 'results.db'}"
    try:
        if is_postgres(spec):  # selected per stream by PostgreSQL
            return _said(result_lines(PostgresSink(spec).result_groups(streams, all_versions, limit), tz or UTC))
        if spec.startswith("sqlite:"):  # and by SQLite
            groups = sqlite_result_groups(Path(spec[len("sqlite:"):]), streams, all_versions, limit)
            return _said(result_lines(groups, tz or UTC))
        if status.get("results_topic"):  # the job loaded for its session only then
            from sensorscript.runtime.control.session import read_back_session

            read_back_session(out, status, load_job(out).JOB)
        rows = read_results(spec, streams)
    except (ValueError, ConnectionError) as exc:
        raise SensorScriptError([Diagnostic("error", str(exc))]) from None
    if not all_versions:
        rows = newest(rows)
        rows = rows[rows["value"].notna()]
    return result_lines(result_groups(rows, limit), tz or UTC)


def _said(lines):
    """Lines read from a sink as they are printed: an error meanwhile in one sentence."""
    try:
        yield from lines
    except (ValueError, ConnectionError) as exc:
        raise SensorScriptError([Diagnostic("error", str(exc))]) from None


def job_status(out: Path) -> dict:
    from sensorscript.runtime.output.status import read_status

    try:
        return read_status(out)
    except OSError as exc:  # read_status words a missing file itself
        message = f"{exc.filename}: cannot read the job's status: {file_problem(exc)}" if exc.filename else str(exc)
    except ValueError as exc:  # JSON cut short
        message = f"{Path(out) / 'status.json'}: the job's status is unreadable ({exc})"
    raise SensorScriptError([Diagnostic("error", message)])


# Checks of `sscript run`'s arguments, made before Spark starts: a mistake costs no start-up.

def _check_job(settings: RunSettings) -> None:
    load_job(settings.out)  # a clear error if there is no job
    _check_input(settings.input)
    _check_sink(settings.sink, settings.out)


def _check_input(source: str) -> None:
    from sensorscript.runtime.ingest.source import STREAMS_HELP, streamed

    if streamed(source):
        return
    if not Path(source).exists():
        raise SensorScriptError([Diagnostic("error", f"{source}: no such input folder")])
    if not Path(source).is_dir():
        raise SensorScriptError([Diagnostic("error", f"{source}: a file; --input takes a folder of CSV or JSON-lines "
                                                     f"files (or {STREAMS_HELP})")])


def _check_sink(sink: str | None, out: Path) -> None:
    from sensorscript.runtime.output.sinks import check_sink

    try:
        check_sink(sink or f"sqlite:{Path(out) / 'results.db'}")  # None: the job's default
    except ValueError as exc:
        raise SensorScriptError([Diagnostic("error", str(exc))]) from None


MASTER_TIMEOUT_S = 5.0


def _check_master(master: str) -> None:
    """A spark://HOST:PORT master (or a list of them: standby masters) must answer before spark-submit
    starts; for a closed port spark-submit retries for minutes and ends in a Java stack trace. Other
    masters (local[N], yarn, k8s://...) are spark-submit's to check."""
    if not master.startswith("spark://"):
        return
    addresses = []
    for item in master[len("spark://"):].split(","):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SensorScriptError([Diagnostic("error", f"'{master}' is not a Spark master URL; write "
                                                         f"spark://HOST:PORT, e.g. spark://10.0.0.5:7077")])
        addresses.append((host.strip("[]"), int(port)))  # [::1]: an IPv6 address
    failures = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=MASTER_TIMEOUT_S):
                return
        except OSError as exc:
            failures.append(f"{host}:{port} ({_network_problem(exc)})")
    raise SensorScriptError([Diagnostic("error", f"cannot reach the Spark master at {', '.join(failures)}; "
                                                 f"is the cluster running, and is the address right?")])


def _network_problem(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return f"no answer within {MASTER_TIMEOUT_S:g} s"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    return exc.strerror or str(exc)


def check_backfill(out: Path) -> None:
    """A backfill reads the archive that late policy `correct` keeps: refuse it, before anything
    changes, for a job that keeps none."""
    out = Path(out)
    if (out / "status.json").exists():
        policy, source = job_status(out)["late_policy"], "ran with"
    else:
        policy, source = load_job(out).JOB.late, "is compiled with"
    if not policy.startswith("correct"):
        raise SensorScriptError([Diagnostic("error", f"--backfill reads the archive of every reading that late policy "
                                                     f"'correct' keeps, and the job in {out} {source} late policy "
                                                     f"'{policy}': run it with --late correct (sscript run "
                                                     f"{out} --late correct ...) to keep one from then on")])


def backfill_now(out: Path, timeout: float, echo=print, after_update: bool = False):
    """`sscript backfill OUT` (and `sscript update --backfill` once it has switched): wait until the
    newest version's backfill can run (runtime/control/backfill.py `Readiness`), then run it in a child
    process (Spark's start-up chatter filtered), saying how far it got; returns it, or None when
    `after_update` and the job is not running (it runs with `sscript backfill OUT` later)."""
    import time

    from sensorscript.runtime.control import backfill as backfills
    from sensorscript.runtime.output.status import run_state
    from sensorscript.runtime.plan import versions
    from sensorscript.times import human_time

    out = Path(out)
    found = backfills.newest(out)
    if found is None:
        raise SensorScriptError([Diagnostic("error", f"no backfill was asked for in {out}: 'sscript backfill {out} "
                                                     f"--since SINCE' asks for one of the newest version")])
    if found.alive:
        raise SensorScriptError([Diagnostic("error", f"the backfill of plan version {found.version} is running "
                                                     f"(process {found.pid}); 'sscript status {out}' shows how far")])
    check_backfill(out)
    job, _ = versions.load(out, found.version)
    if not (out / "status.json").exists():  # never run: nothing switched, nothing archived yet
        return _not_now(after_update, echo, f"the job in {out} has not run yet: the backfill of plan version "
                                            f"{found.version} runs once it has run on it ('sscript backfill {out}' then)")
    deadline, said, readiness = time.monotonic() + timeout, None, backfills.Readiness(out, found, job)
    while True:
        status = job_status(out)
        ends, why = readiness.check(status)
        if ends is not None:
            break
        if run_state(status) != "running":
            return _not_now(after_update, echo, f"the backfill of plan version {found.version} cannot run yet ({why}), "
                                                f"and no job is running in {out}: once it has run on the new version, "
                                                f"'sscript backfill {out}' runs it")
        if time.monotonic() > deadline:
            return _not_now(after_update, echo, f"the backfill has not started within {timeout:g} s ({why}): "
                                                f"'sscript backfill {out}' waits for it again and runs it")
        if why != said:
            echo(f"the backfill waits: {why} ...")
            said = why
        time.sleep(0.5)
    echo(f"backfilling {', '.join(sorted(ends))} from "
         + ("the start of the archive" if found.since is None else human_time(found.since)) + " ...")
    lines: list[str] = []

    def take(line: str) -> None:
        lines.append(line)
        if line.startswith("backfill: "):
            echo(line)

    code = run_quietly([sys.executable, "-m", "sensorscript.runtime.control.backfill", str(out)], take)
    report = [line for line in lines if line.startswith("{")]
    if code or not report:
        problem = next((line for line in reversed(lines) if line.startswith("not ready: ")), lines[-1] if lines else "")
        raise SensorScriptError([Diagnostic("error", f"the backfill failed: {problem or 'no output'}; "
                                                     f"'sscript backfill {out}' runs it again, writing nothing twice")])
    done = backfills.Backfill(**json.loads(report[-1]))
    for line in done.describe(out):
        echo(line)
    return done


def _not_now(after_update: bool, echo, message: str) -> None:
    """The backfill cannot run now: after `sscript update` that is said (the update itself is done);
    for `sscript backfill` it is an error."""
    if not after_update:
        raise SensorScriptError([Diagnostic("error", message)])
    echo(message)



# `sscript alerts ...`: silences and delivery of what waits, with the settings the job keeps in OUT.

def silence(out: Path, what: str, seconds: float, comment: str = "") -> str:
    """`sscript alerts silence OUT WORKFLOW|STREAM --for DURATION`: hold back the incidents of that
    workflow or stream (WORKFLOW.NAME) that begin before it ends; says what it did."""
    from sensorscript.runtime.output.alarms import alarm_kinds
    from sensorscript.runtime.output.alerts import Outbox
    from sensorscript.times import human_time

    out = Path(out)
    job = load_job(out).JOB
    streams = alarm_kinds(job)
    workflows = sorted({s.rsplit(".", 1)[0] for s in streams})
    if what not in streams and what not in workflows:
        raise SensorScriptError([Diagnostic("error", f"'{what}' is neither a workflow with alarms nor a stream with "
                                                     f"alarms of the job in {out} (workflows: {', '.join(workflows)}; "
                                                     f"streams: {', '.join(streams)})")])
    if seconds <= 0:
        raise SensorScriptError([Diagnostic("error", f"--for {seconds:g} s: a silence lasts a while (30min, 2h, 1d)")])
    outbox = Outbox(out)
    try:
        number = outbox.silence(what, seconds, comment)
        until = next(s["until"] for s in outbox.silences() if s["id"] == number)
    finally:
        outbox.close()
    return (f"silence {number}: the alarms of {what} that begin before {human_time(until * 1000)} are held back (their "
            f"updates and resolutions too; incidents already sent still resolve); 'sscript alerts expire {out} "
            f"{number}' ends it sooner")


def expire_silence(out: Path, number: int) -> str:
    from sensorscript.runtime.output.alerts import Outbox

    outbox = Outbox(Path(out))
    try:
        if not outbox.expire(number):
            raise SensorScriptError([Diagnostic("error", f"no silence {number} in force in {out} "
                                                         f"('sscript alerts silences {out}' lists them)")])
    finally:
        outbox.close()
    return f"silence {number} ended: what begins from now on is sent"


def silences(out: Path, tz=None) -> list[str]:
    from sensorscript.runtime.output.alerts import Outbox
    from sensorscript.times import UTC, human_time

    outbox = Outbox(Path(out))
    try:
        found = outbox.silences()
    finally:
        outbox.close()
    return [f"{s['id']}: {s['what']} until {human_time(s['until'] * 1000, tz or UTC)}"
            + (f" ({s['comment']})" if s["comment"] else "") for s in found] or ["no silence in force"]


def deliver_alarms(out: Path, timeout_s: float | None, echo=print, strict: bool = True) -> None:
    """`sscript alerts deliver OUT`, and the end of `sscript correct` and `sscript backfill`: what
    waits in the outbox, sent to the targets kept in OUT, unless the job runs (its threads send it).
    Not `strict` (after a command whose own work is done): a target that cannot be reached from
    here is a warning, not a failure."""
    from sensorscript.runtime.output.alerts import deliver
    from sensorscript.runtime.output.alerts.pipeline import running_elsewhere

    out = Path(out)
    if running_elsewhere(out):
        echo(f"alarms: the job running in {out} sends what waits in its outbox")
        return
    try:
        if deliver(out, timeout_s, echo) is None:
            echo(f"alarms: none are delivered from {out} (no run on it was given --alerts)")
    except ValueError as exc:  # a kept target that cannot be reached from here (an env: not set in this shell)
        said = (f"alarms not delivered now, they wait in {out}/alerts/outbox.db: {exc} (in the settings "
                f"{out}/alerts/settings.json keeps)")
        if strict:
            raise SensorScriptError([Diagnostic("error", said)]) from None
        echo(f"warning: {said}")


def status_text(out: Path, tz=None) -> str:
    """What `sscript status OUT` prints: the job's status in sentences, its alarms counted from the
    outbox now, and the newest backfill's progress (SensorScriptError when status.json is unreadable)."""
    from sensorscript.runtime.control import backfill as backfills
    from sensorscript.runtime.output.status import describe
    from sensorscript.times import UTC

    tz = UTC if tz is None else tz
    lines = [describe(alarms_now(job_status(Path(out)), Path(out)), tz)]
    found = backfills.newest(Path(out))
    lines += [f"  {line}" for line in (found.describe(Path(out), tz) if found else ())]
    return "\n".join(lines)


def alarms_now(status: dict, out: Path) -> dict:
    """The status with its alarms' counts read from the outbox now (a silence made, or what a
    command delivered, since the run last wrote status.json)."""
    from sensorscript.runtime.output.alerts import Outbox
    from sensorscript.runtime.output.alerts.outbox import FOLDER, OUTBOX

    import sqlite3

    if not (Path(out) / FOLDER / OUTBOX).exists():
        return status
    try:
        outbox = Outbox(Path(out), status.get("alerts", {}).get("limit", 100_000), read_only=True)
    except sqlite3.Error:
        return status
    try:
        return {**status, "alerts": outbox.counts()}
    except sqlite3.Error:  # an outbox of an earlier version, which the next run brings up to date
        return status
    finally:
        outbox.close()
