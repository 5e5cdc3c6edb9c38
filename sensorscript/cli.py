"""`sscript`: the command line. Each command parses its options and calls one stage."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sensorscript.errors import SensorScriptError, render_all


def _fail(exc: SensorScriptError) -> None:
    click.echo(exc.render(), err=True)
    errors = sum(d.is_error for d in exc.diagnostics)
    click.echo(f"{errors} error{'s' if errors != 1 else ''}", err=True)
    sys.exit(1)


def _known_sensors(sensors: str | None):
    if sensors is None:
        return None
    from sensorscript.registry import SensorRegistry

    return SensorRegistry.open(sensors).ids()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sensorscript")
def main() -> None:
    """SensorScript: compile sensor-monitoring scripts into one PySpark Structured Streaming job."""


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--sensors", metavar="DB_OR_CSV", help="Sensor registry (sensors.db or a CSV) to check names against.")
@click.option("--show", is_flag=True, help="Also print what the compiler understood of each workflow.")
def check(files: tuple[str, ...], sensors: str | None, show: bool) -> None:
    """Report errors and warnings in workflow FILES; exit 1 on any error."""
    from sensorscript.parser import load
    from sensorscript.parser.printer import describe

    try:
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


if __name__ == "__main__":
    main()
