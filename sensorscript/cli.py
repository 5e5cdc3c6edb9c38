"""`sscript`: the command line. Each command parses its options and calls one stage."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import click

import sensorscript
from sensorscript.errors import Diagnostic, SensorScriptError, file_problem, render_all
from sensorscript.redaction import redacted_text
from sensorscript.runtime.control.run_options import (LATE_HELP, OPTIONS, PATH, RETAIN_HELP, WATERMARK_HELP,
                                                      RunOption, RunSettings, check_late, check_watermark)

INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in sscript, not a mistake in the scripts or arguments
INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C


def _fail(exc: SensorScriptError) -> None:
    click.echo(exc.render(), err=True)
    errors = sum(d.is_error for d in exc.diagnostics)
    click.echo(f"{errors} error{'s' if errors != 1 else ''}", err=True)
    sys.exit(1)


def _compiled(compile_call):
    """What `sscript compile` or `update` compiled; its errors end the command (exit 1), its
    warnings are shown."""
    try:
        compiled = compile_call()
    except SensorScriptError as exc:
        _fail(exc)
    if compiled.warnings:
        click.echo(render_all(compiled.warnings, compiled.sources), err=True)
    return compiled


def _unwritable(path: Path, what: str, exc: OSError) -> SensorScriptError:
    return SensorScriptError([Diagnostic("error", f"{exc.filename or path}: cannot write {what} there: "
                                                  f"{file_problem(exc)}")])


def _known_sensors(sensors: str | None):
    if sensors is None:
        return None
    from sensorscript.registry import SensorRegistry

    return SensorRegistry.open(sensors).ids()


class _Commands(click.Group):
    """The top-level group. A mistake in scripts or arguments is one sentence and exit code 1 (each
    command says it); an exception no command expected is a bug: it too is one sentence, with the
    traceback saved to a file, and exit code 70. SSCRIPT_DEBUG=1 lets it through (tests, debugging)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise  # click's own ending (usage errors, exit codes); a closed pipe, which click quietens
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)  # on a line of its own, after the terminal's ^C
            raise click.exceptions.Exit(INTERRUPTED) from None
        except Exception as exc:
            if os.environ.get("SSCRIPT_DEBUG") == "1":
                raise
            first = next(iter(str(exc).splitlines()), "")
            click.echo(f"error: internal error in sscript (a bug, please report it): {type(exc).__name__}"
                       f"{': ' + first if first else ''}; {_save_crash(exc)}", err=True)
            raise click.exceptions.Exit(INTERNAL_ERROR) from None


def _save_crash(exc: Exception) -> str:
    """Write the traceback where a bug report can pick it up; say where (or why not). The file is the
    user's alone (a folder of its own under a random name, 0700, the file 0600), and the command line
    in it shows addresses without their secrets."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"sscript-crash-{time.strftime('%Y%m%d-%H%M%S')}-"))
        path = folder / "crash.txt"
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(f"sscript {sensorscript.__version__}, Python {sys.version.split()[0]}\n"
                       f"command: {redacted_text(' '.join(sys.argv))}\n\n"
                       + redacted_text("".join(traceback.format_exception(exc))))
    except OSError as problem:
        return f"the details could not be saved ({problem.strerror or problem})"
    return f"details in {path}"


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sensorscript")
def main() -> None:
    """SensorScript: compile sensor-monitoring scripts into one PySpark Structured Streaming job."""
    from sensorscript.runtime.plan.loading import keep_private

    keep_private()  # OUT and all in it: the owner's alone (results, alarms, status, the job)


_operators = click.option("--operators", "operators", multiple=True, type=click.Path(dir_okay=False, exists=True),
                          metavar="FILE.py", help="A Python file registering pattern operators (repeatable).")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--sensors", metavar="DB_OR_CSV", help="Sensor registry (sensors.db or a CSV) to check names against.")
@click.option("--show", is_flag=True, help="Also print what the compiler understood of each workflow.")
@_operators
def check(files: tuple[str, ...], sensors: str | None, show: bool, operators: tuple[str, ...]) -> None:
    """Report errors and warnings in workflow FILES; exit 1 on any error."""
    from sensorscript.compiler import load_operator_files
    from sensorscript.parser import load
    from sensorscript.parser.printer import describe

    try:
        load_operator_files(operators)
        loaded = load(files, _known_sensors(sensors))
    except SensorScriptError as exc:
        _fail(exc)
        return
    if loaded.warnings:
        click.echo(render_all(loaded.warnings, loaded.sources), err=True)
    if show:
        for workflow in loaded.workflows:
            defined = {s.name for s in workflow.statements}
            click.echo(f"{workflow.name} ({workflow.path}): {len(workflow.statements)} statements; "
                       f"outputs {', '.join(workflow.outputs)}")
            for statement in workflow.statements:
                click.echo(f"  {statement.span.line:>3}  {statement.name:<12} {describe(statement, defined)}")
    statements = sum(len(w.statements) for w in loaded.workflows)
    click.echo(f"ok: {len(loaded.workflows)} workflow(s), {statements} statements, "
               f"{len(loaded.warnings)} warning(s)")


_files = click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
_sensors = click.option("--sensors", metavar="DB_OR_CSV",
                        help="Sensor registry: a SQLite sensors.db or a CSV (default: ./sensors.db if present).")
_partitions = click.option("--partitions", "-n", default=2, show_default=True, type=click.IntRange(1, 4096),
                           help="Number of partitions (Spark tasks) to place sensors on.")


def _balance(command):
    """--balance B (the bound on the most loaded partition over the average), and the older
    --epsilon E (the same bound as B = 1 + E, hidden), as the command's `epsilon` argument."""

    def bound(ctx, param, value):
        older = ctx.params.pop("epsilon_given", None)
        if older is not None:
            if ctx.get_parameter_source("epsilon") == click.core.ParameterSource.COMMANDLINE:
                raise click.BadParameter("give --balance or the older --epsilon, not both", param_hint="--epsilon")
            return older
        return value - 1

    command = click.option(
        "--balance", "epsilon", default=1.1, show_default=True, type=click.FloatRange(1, 11), metavar="B",
        callback=bound, help="The balance bound: no partition may carry more than B x the average load (summed "
                             "sensor frequencies). A higher B lets the placement keep more of what workflows "
                             "share on one partition, so fewer tuples cross.")(command)
    return click.option("--epsilon", "epsilon_given", type=click.FloatRange(0, 10), hidden=True, is_eager=True,
                        help="The same bound as --balance 1+EPSILON (the older name).")(command)



def _checked(parse):
    """A click callback that checks a policy with `parse` (watermark or late), wording its error."""

    def check(ctx, param, value):
        if value is not None:
            try:
                parse(value)
            except ValueError as exc:
                raise click.BadParameter(str(exc)) from None
        return value

    return check


def _check_watermark(ctx, param, value):
    return _checked(check_watermark)(ctx, param, value)


def _check_late(ctx, param, value):
    return _checked(check_late)(ctx, param, value)


def _check_retain(ctx, param, value):
    """--retain STORE=DURATION, repeated: {store: duration text}, checked."""
    from sensorscript.runtime.plan import retention

    try:
        return retention.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command(name="compile")
@_files
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), help="Output folder.")
@_sensors
@_partitions
@_balance
@click.option("--naive", is_flag=True, help="Also write OUT/naive_job.py: the same workflows written the naive way "
                                            "in PySpark (for benchmarks and `sscript report`).")
@_operators
@click.option("--pattern-limit", default=10_000, show_default=True, type=click.IntRange(1, 1_000_000_000), metavar="N",
              help="Partial matches a pattern keeps per key and operator (a pattern's `limit N` overrides it); "
                   "what the limit cuts is counted and reported.")
@click.option("--watermark", default="fixed:0", show_default=True, metavar="POLICY", callback=_check_watermark,
              help=WATERMARK_HELP)
@click.option("--late", default="log", show_default=True, metavar="drop|log|correct[:GAMMA]", callback=_check_late,
              help=LATE_HELP)
@click.option("--retain", multiple=True, metavar="STORE=DURATION", callback=_check_retain, help=RETAIN_HELP)
@click.option("--timings", is_flag=True, help="Also print how long each phase of the compile took.")
@click.option("--no-partials", is_flag=True,
              help="Send a sensor's readings to another partition that reads them, never the partials of its "
                   "slices (to compare; by default partials cross where only windows read the readings there "
                   "and they are fewer).")
def compile_command(files, out, sensors, partitions, epsilon, naive, operators, pattern_limit, watermark,
                    late, retain, timings, no_partials) -> None:
    """Compile workflow FILES into one job: OUT/job.py, OUT/plan.json and OUT/plan.txt."""
    from sensorscript.compiler import compile_workflows

    compiled = _compiled(lambda: compile_workflows(files, out, sensors, partitions, epsilon, watermark, naive=naive,
                                                   operators=operators, pattern_limit=pattern_limit, late=late,
                                                   retention=retain, partials=not no_partials))
    plan = compiled.plan
    cost = plan.cost
    click.echo(f"compiled {len(plan.graph.workflows)} workflow(s) into {compiled.out}/: "
               f"{len(plan.graph)} nodes ({len(plan.graph.shared())} shared), {plan.partitions.count} partitions, "
               f"balance {plan.partitions.balance:.3f}, {cost.ours:,.0f} tuples/min cross the network "
               f"(lower bound {cost.lower_bound:,.0f}; {cost.summed:,.0f} with stage 0 sending slice partials)")
    for name in sorted(p.name for p in compiled.out.iterdir() if p.is_file()):
        click.echo(f"  {compiled.out / name}")
    if timings:
        click.echo(f"timings:\n{compiled.timings}")


def _run_options(command):
    """`sscript run`'s arguments and options, made from their one declaration (runtime/control/run_options.py)."""
    for entry in reversed([entry for entry in OPTIONS if entry.on_command_line]):
        command = _click_option(entry)(command)
    return command


def _click_option(entry: RunOption):
    if entry.positional:
        return click.argument(entry.dest, type=click.Path(file_okay=False))
    if entry.kind is bool:
        return click.option(entry.flag, is_flag=True, help=entry.help)
    return click.option(entry.flag, type=_click_type(entry), default=entry.default, multiple=entry.repeated,
                        required=entry.required, metavar=entry.metavar, callback=_click_check(entry), help=entry.help,
                        show_default=entry.default not in (None, ()))


def _click_type(entry: RunOption):
    if entry.choices:
        return click.Choice(entry.choices)
    if entry.minimum is not None:
        return click.IntRange(min=entry.minimum)
    if entry.to_job == PATH:
        return click.Path(exists=True, dir_okay=False)
    return entry.kind


def _click_check(entry: RunOption):
    """The option's own check of a value (of each, when repeated), as a click callback."""
    if entry.check is None:
        return None
    one = _checked(entry.check)
    return (lambda ctx, param, values: tuple(one(ctx, param, value) for value in values)) if entry.repeated else one


@main.command(name="run")
@_run_options
def run_command(**given) -> None:
    """Run the job compiled into OUT on local Spark (local[2]) or on a cluster.

    A run continues from the checkpoint of the last run on OUT (its windows, partial matches and
    the files it read), unless that run ended its input (--once, sscript stop --drain) or --fresh
    is given. Without --once it runs until stopped: sscript stop OUT [--drain], Ctrl-C or SIGTERM
    stop it between two batches."""
    from sensorscript import running

    settings = RunSettings(**given)
    try:
        settings.check()  # before Spark starts
    except ValueError as exc:
        _fail(SensorScriptError([Diagnostic("error", str(exc))]))
        return
    try:
        code = (running.submit if settings.cluster else running.run_process)(settings, echo=click.echo)
    except SensorScriptError as exc:
        _fail(exc)
        return
    sys.exit(code)


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--drain", is_flag=True, help="End the job's input first: every window and pending match is emitted "
                                            "(a new run then starts afresh).")
@click.option("--now", is_flag=True, help="Stop at once instead of after the batch being written (the batch cut "
                                          "short is done again by the next run).")
@click.option("--timeout", default=600, show_default=True, type=click.FloatRange(min=0), metavar="SECONDS",
              help="How long to wait for the job to stop.")
def stop(out, drain, now, timeout) -> None:
    """Stop the job running in OUT between two batches; the checkpoint keeps its state, and
    `sscript run OUT --input DATA` continues from it. --drain ends its input first."""
    from sensorscript import running

    if drain and now:
        raise click.BadParameter("--drain and --now exclude each other", param_hint="--now")
    try:
        running.stop(Path(out), "drain" if drain else "now" if now else "boundary", timeout, echo=click.echo)
    except SensorScriptError as exc:
        _fail(exc)


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
@_files
@_sensors
@_operators
@click.option("--mode", type=click.Choice(["clear", "dual"]), default="clear", show_default=True,
              help="An output stream the update computes differently: clear (the new computation's windows start "
                   "empty at the switch) or dual (the old one keeps running beside it, and writes the stream "
                   "until the new one's windows have filled).")
@click.option("--force", is_flag=True, help="Apply an update that restarts computations both versions have "
                                            "(their windows start empty); without it such an update is refused.")
@click.option("--rebalance", is_flag=True, help="Place every computation anew (the partitions' balance drifted): "
                                                "those that move restart, and are listed.")
@click.option("--pattern-limit", default=10_000, show_default=True, type=click.IntRange(1, 1_000_000_000),
              metavar="N", help="Partial matches a pattern keeps per key and operator.")
@click.option("--backfill", "backfill", is_flag=False, flag_value="start", default=None, metavar="[SINCE]",
              callback=lambda ctx, param, value: _check_since(value),
              help="Also compute what the update adds or changes over the archived readings (late policy correct) "
                   "from SINCE (a date and time, UTC unless it names an offset; default: the start of the archive) "
                   "up to where the running job writes it whole: no gap in its history.")
@click.option("--timeout", default=120, show_default=True, type=click.FloatRange(min=0), metavar="SECONDS",
              help="How long to wait for a running job to switch (and, with --backfill, for the backfill to start).")
def update(out, files, sensors, operators, mode, force, rebalance, pattern_limit, backfill, timeout) -> None:
    """Change the workflows of the job in OUT to FILES, keeping the state of what the old and new
    versions compute alike. A running job switches between two batches; the version goes to
    OUT/versions/N/ (with changes.txt) and becomes OUT/job.py."""
    from sensorscript import running
    from sensorscript.runtime.control import backfill as backfills
    from sensorscript.update import update_workflows

    if backfill is not None:
        try:
            running.check_backfill(Path(out))
        except SensorScriptError as exc:
            _fail(exc)
    updated = _compiled(lambda: update_workflows(files, out, sensors, force, rebalance, operators, pattern_limit,
                                                 mode))
    if backfill is not None:
        backfills.request(Path(out), updated.version, backfill[1])
    plan = updated.plan
    click.echo(f"plan version {updated.version} of {out}: {len(plan.graph.workflows)} workflow(s), "
               f"{len(plan.graph)} nodes, balance {plan.partitions.balance:.3f}, "
               f"{plan.cost.ours:,.0f} tuples/min cross the network (lower bound {plan.cost.lower_bound:,.0f})")
    for line in updated.changes.describe():
        click.echo(f"  {line}")
    streams = {*updated.changes.outputs_added, *updated.changes.outputs_changed}
    running.await_version(Path(out), updated.version, timeout, echo=click.echo, streams=streams)
    if backfill is not None:
        try:
            running.backfill_now(Path(out), timeout, echo=click.echo, after_update=True)
        except SensorScriptError as exc:
            _fail(exc)


def _check_since(value):
    """--backfill's SINCE: ("start", None) for the start of the archive, else (text, epoch ms)."""
    from sensorscript.times import parse_time

    if value is None or value == "start":
        return None if value is None else (value, None)
    try:
        return value, parse_time(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command(name="backfill")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--since", default=None, metavar="SINCE", callback=lambda ctx, param, value: _check_since(value),
              help="Ask for a backfill of the newest version from SINCE ('start': the start of the archive); "
                   "without it, the backfill asked for last runs (again).")
@click.option("--timeout", default=3600, show_default=True, type=click.FloatRange(min=0), metavar="SECONDS",
              help="How long to wait for the backfill to be able to start.")
def backfill_command(out, since, timeout) -> None:
    """Compute what the newest update of the job in OUT added or changed over the archived readings
    (late policy correct), so its streams are complete from SINCE with no gap at the switch. Run
    again after a kill, it writes nothing twice."""
    from sensorscript import running
    from sensorscript.runtime.control import backfill as backfills
    from sensorscript.runtime.plan import versions

    try:
        if since is not None:
            running.check_backfill(Path(out))
            numbers = versions.numbers(Path(out))
            if len(numbers) < 2:
                raise SensorScriptError([Diagnostic("error", f"the job in {out} has had no update: a backfill "
                                                             f"computes what an update (sscript update) added")])
            backfills.request(Path(out), numbers[-1], since[1])
        running.backfill_now(Path(out), timeout, echo=click.echo)
        running.deliver_alarms(Path(out), None, click.echo, strict=False)
    except SensorScriptError as exc:
        _fail(exc)


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
def correct(out) -> None:
    """Correct the results of the job in OUT now (late policy correct): recompute what its pending late
    readings touched from the archive, and write the rows that changed with a higher version."""
    from sensorscript import running

    try:
        click.echo(running.correct_now(Path(out)).describe())
        running.deliver_alarms(Path(out), None, click.echo, strict=False)
    except SensorScriptError as exc:
        _fail(exc)


def _check_tz(ctx, param, value):
    from sensorscript.times import time_zone

    try:
        return time_zone(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_tz = click.option("--tz", default="UTC", show_default=True, metavar="ZONE", callback=_check_tz,
                   help="The time zone times are shown in: UTC or an IANA name such as Europe/Zurich.")


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--stream", "streams", multiple=True, metavar="WORKFLOW.NAME", help="Only this stream (repeatable).")
@click.option("--all-versions", is_flag=True, help="Every version of every row, not only the newest.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="Rows per stream (the newest; 0: all).")
@_tz
def results(out, streams, all_versions, limit, tz) -> None:
    """The results of the job in OUT, newest version of each row (corrections of late data
    replace earlier versions), with times people read."""
    from sensorscript import running

    try:
        for line in running.show_results(Path(out), list(streams) or None, all_versions, limit, tz):
            click.echo(line)
    except SensorScriptError as exc:
        _fail(exc)


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
@_tz
def status(out, tz) -> None:
    """Where the job in OUT stands: its policies, totals, and per partition the watermark, its lag,
    coverage, latency and state size (from OUT/status.json, kept after every batch)."""
    from sensorscript import running

    try:
        click.echo(running.status_text(Path(out), tz))
    except SensorScriptError as exc:
        _fail(exc)


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--port", default=8050, show_default=True, type=click.IntRange(0, 65535),
              help="The port to serve on (0: a free one the system picks; the line printed at the start says which).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to serve on (127.0.0.1: this machine only; 0.0.0.0: every network interface, "
                   "which asks for a login).")
@click.option("--auth-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="The logins the page asks for: lines USER:PASSWORD (basic auth) and/or Bearer TOKEN; a file only "
                   "its owner may read (chmod 600). Or set SSCRIPT_DASHBOARD_PASSWORD (user SSCRIPT_DASHBOARD_USER, "
                   "default admin) or SSCRIPT_DASHBOARD_TOKEN.")
@click.option("--no-auth", is_flag=True,
              help="Serve on an address other than loopback without a login: anyone who reaches the port sees every "
                   "result, alarm and the job's health.")
@click.option("--server-name", "server_names", multiple=True, metavar="NAME",
              help="A name the page is reached by (a reverse proxy's, this machine's in DNS; repeatable): it answers "
                   "only to loopback names, --host and these (a request naming another gets 421: DNS rebinding).")
@click.option("--trusted-proxy", "proxies", multiple=True, metavar="ADDR",
              help="A reverse proxy's address or network (repeatable): a request from it is the client's the proxy "
                   "names last in X-Forwarded-For, for counting and slowing failed logins per client.")
@click.option("--cert", type=click.Path(dir_okay=False), metavar="FILE",
              help="Serve over HTTPS with this certificate (PEM; its chain after it), with --key.")
@click.option("--key", type=click.Path(dir_okay=False), metavar="FILE", help="The certificate's private key (PEM).")
@_tz
def dashboard(out, port, host, auth_file, no_auth, server_names, proxies, cert, key, tz) -> None:
    """Serve a live page of the job in OUT: its results per workflow, alarms, health and plan,
    refreshed every few seconds, while the job runs or after it ended, and /metrics for Prometheus
    (Ctrl-C stops it)."""
    from sensorscript.dashboard import Dashboard, check_out
    from sensorscript.dashboard.access import credentials, loopback, trusted_proxies

    try:
        if bool(cert) != bool(key):
            raise SensorScriptError([Diagnostic("error", "--cert FILE and --key FILE go together (HTTPS)")])
        check_out(Path(out))
        page = Dashboard(Path(out), tz, port, host, credentials(auth_file), no_auth, tuple(server_names),
                         tls=(cert, key) if cert else None, echo=lambda line: click.echo(line, err=True),
                         trusted_proxies=trusted_proxies(proxies))
    except SensorScriptError as exc:
        _fail(exc)
        return
    if no_auth and not loopback(host):
        click.echo(f"no login: anyone who reaches port {page.port} on {host} sees every result, alarm and the job's "
                   f"health", err=True)
    elif not cert and not loopback(host):
        click.echo(f"warning: plain HTTP on {host}: the login and every page cross the network readable by anyone on "
                   f"the way; give --cert FILE --key FILE (HTTPS), or serve on 127.0.0.1 behind a TLS proxy",
                   err=True)
    login = f", login from {' and '.join(page.credentials.sources)}" if page.credentials else ""
    click.echo(f"the dashboard of {out}: {page.url}  (metrics for Prometheus at {page.url}metrics{login}; Ctrl-C "
               f"stops it)")
    page.serve_forever()  # returns on Ctrl-C
    click.echo("\nstopped", err=True)


@main.command()
@_files
@_sensors
@_partitions
@_balance
@_operators
@click.option("--workflow", "workflow", metavar="NAME",
              help="Only this workflow's part of the plan (NAME: its file name without .ss): each statement's "
                   "computation, where it runs, which other workflows share it, its sensors, slices and crossings.")
def explain(files, sensors, partitions, epsilon, operators, workflow) -> None:
    """Print the plan for people: shared computations, slices, pattern operator trees, partitions, cost;
    with --workflow, one workflow's part of it."""
    from sensorscript.compiler import plan_workflows
    from sensorscript.graph.nodes import ScriptLines
    from sensorscript.partition.explain import explain as explain_plan, explain_workflow

    try:
        plan, warnings, sources = plan_workflows(files, sensors, partitions, epsilon, operators)
        text = explain_plan(plan) if workflow is None else explain_workflow(plan, workflow, ScriptLines(sources))
    except SensorScriptError as exc:
        _fail(exc)
        return
    if warnings:
        click.echo(render_all(warnings, sources), err=True)
    click.echo(text, nl=False)


@main.command()
@_files
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False),
              help="dag.svg, dag.png or dag.dot (Graphviz text).")
def graph(files, out) -> None:
    """Draw the shared DAG of FILES, workflows as clusters, shared nodes marked."""
    from sensorscript.graph.build import build_graph
    from sensorscript.graph.draw import draw
    from sensorscript.parser import load

    path = Path(out)
    if path.suffix not in (".svg", ".png", ".dot"):
        raise click.BadParameter("the drawing must end in .svg, .png or .dot", param_hint="--out")
    try:
        loaded = load(files)
    except SensorScriptError as exc:
        _fail(exc)
        return
    try:
        draw(build_graph(loaded.workflows), path)
    except OSError as exc:
        _fail(_unwritable(path, "the drawing", exc))
    click.echo(f"wrote {path}")


def _sizes(ctx, param, value: str) -> list[int]:
    """--generated N,N,...: whole numbers of workflows, at least 1."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not all(item.isdigit() and int(item) >= 1 for item in items):
        raise click.BadParameter(f"'{value}' is not a list of workflow counts such as 1,16,128")
    return [int(item) for item in items]


@main.command()
@_files
@_sensors
@_partitions
@_balance
@click.option("-o", "--out", default="report", show_default=True, type=click.Path(file_okay=False),
              help="Folder for report.md, report.html and the plots.")
@click.option("--measure", "data", metavar="DATA", type=click.Path(exists=True, file_okay=False),
              help="Also run, on local Spark over this folder of CSV readings, the compiled job, the same "
                   "workflows under the naive placements (hash by workflow, hash by sensor id) and the naive "
                   "PySpark job, and report the tuples that really crossed their shuffles.")
@click.option("--no-naive-run", is_flag=True, help="With --measure, do not run the naive PySpark job.")
@click.option("--measure-sweeps", "sweep_seconds", type=click.IntRange(min=1), metavar="SECONDS",
              help="Also run every point of the n and n_s sweeps on local Spark over SECONDS of generated "
                   "readings each, and plot the measured traffic beside the model (a few minutes).")
@click.option("--generated", default="1,16,128,1024", show_default=True, metavar="N,N,...", callback=_sizes,
              help="Sizes of the generated bridge workloads in the line-count table.")
def report(files, sensors, partitions, epsilon, out, data, no_naive_run, sweep_seconds, generated) -> None:
    """Lines saved and network traffic saved, for FILES: a Markdown report and an HTML page with plots."""
    from sensorscript import report as reporting

    try:
        built = reporting.build(list(files), sensors, partitions, data, Path(out) / "work", not no_naive_run,
                                echo=lambda m: click.echo(m, err=True), sizes=generated, sweep_seconds=sweep_seconds,
                                epsilon=epsilon)
    except SensorScriptError as exc:
        _fail(exc)
        return
    except reporting.MeasuringFailed as exc:  # its lines were shown above
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    try:
        md, page = reporting.write(built, Path(out))
    except OSError as exc:
        _fail(_unwritable(Path(out), "the report", exc))
    given = built.lines[0]
    click.echo(f"{given.workflows} workflow(s): {given.script} script lines -> {given.job} lines of generated job; "
               f"the naive PySpark job would be {given.naive or 'impossible'}"
               + (f" lines ({given.naive_per_script:.1f}x the script)" if given.naive_per_script
                  else " lines" if given.naive else ""))
    cost = built.cost
    click.echo(f"network: {cost.ours:,.0f} tuples/min under our plan, lower bound {cost.lower_bound:,.0f}, "
               f"{cost.summed:,.0f} with stage 0 sending slice partials; "
               f"hashing by sensor id {cost.naive_sensor_hash:,.0f} ({cost.versus('sensor')}), "
               f"hashing by workflow {cost.naive_workflow_hash:,.0f} ({cost.versus('workflow')})")
    click.echo(f"report: {md}  page: {page}")


@main.group()
def alerts() -> None:
    """The alarms of the job in OUT: silences, and delivery of what waits (to the targets its runs keep)."""


def _seconds(ctx, param, value):
    from sensorscript.times import duration_ms

    if value is None:
        return None
    try:
        return duration_ms(value, param.opts[0]) / 1000
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@alerts.command(name="silence")
@click.argument("out", type=click.Path(file_okay=False))
@click.argument("what", metavar="WORKFLOW|STREAM")
@click.option("--for", "seconds", required=True, metavar="DURATION", callback=_seconds,
              help="How long: 30min, 2h, 1d.")
@click.option("--comment", default="", help="Why (shown in status).")
def alerts_silence(out, what, seconds, comment) -> None:
    """Hold back the alarms of a workflow or a stream (WORKFLOW.NAME) whose incidents begin while the
    silence lasts, for every target (a running job honours it at once); status shows it."""
    from sensorscript import running

    try:
        click.echo(running.silence(Path(out), what, seconds, comment))
    except SensorScriptError as exc:
        _fail(exc)


@alerts.command(name="expire")
@click.argument("out", type=click.Path(file_okay=False))
@click.argument("number", type=int)
def alerts_expire(out, number) -> None:
    """End silence NUMBER now."""
    from sensorscript import running

    try:
        click.echo(running.expire_silence(Path(out), number))
    except SensorScriptError as exc:
        _fail(exc)


@alerts.command(name="silences")
@click.argument("out", type=click.Path(file_okay=False))
@_tz
def alerts_silences(out, tz) -> None:
    """The silences in force."""
    from sensorscript import running

    for line in running.silences(Path(out), tz):
        click.echo(line)


@alerts.command(name="deliver")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--timeout", "seconds", default=None, metavar="DURATION", callback=_seconds,
              help="How long to wait for the receivers (default: the --alerts-timeout kept, 60s).")
def alerts_deliver(out, seconds) -> None:
    """Send what waits in the outbox of OUT now, to the targets its last run with --alerts named
    (when the job runs, its own threads do)."""
    from sensorscript import running

    try:
        running.deliver_alarms(Path(out), seconds, click.echo)
    except SensorScriptError as exc:
        _fail(exc)


@main.group()
def sensors() -> None:
    """The sensor registry (SQLite): import from CSV, list."""


@sensors.command(name="import")
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--db", default="sensors.db", show_default=True, type=click.Path(dir_okay=False))
def sensors_import(csv_file, db) -> None:
    """Insert or update the sensors of CSV_FILE (sensor_id,frequency_hz[,type]) in the registry."""
    from sensorscript.registry import SensorRegistry, read_csv

    try:
        read = read_csv(csv_file)  # first: a bad CSV leaves no empty registry behind
        count = SensorRegistry.create(db).put(read)
    except SensorScriptError as exc:
        _fail(exc)
        return
    click.echo(f"imported {count} sensor(s) into {db}")


@sensors.command(name="list")
@click.option("--db", default="sensors.db", show_default=True, type=click.Path(dir_okay=False))
def sensors_list(db) -> None:
    """List the sensors of the registry."""
    from sensorscript.registry import SensorRegistry

    try:
        registry = SensorRegistry.open(db)
    except SensorScriptError as exc:
        _fail(exc)
        return
    rows = registry.sensors()
    click.echo(f"{'sensor_id':<20} {'Hz':>8}  type")
    for sensor in rows:
        click.echo(f"{sensor.sensor_id:<20} {sensor.frequency_hz:>8g}  {sensor.type}")
    click.echo(f"{len(rows)} sensor(s) in {db}")


if __name__ == "__main__":
    main()
