"""Every option of `sscript run` reaches the running job, with the value given, whether the job
runs with python or through spark-submit; the job takes its own options; the command line's help
and the job's are one text (runtime/control/run_options.py declares each option once).

The values below are written here, not taken from the declaration: an option dropped or spelled
otherwise on its way (the command line, the job's arguments built by running.py, the job's parser)
fails these tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sensorscript import running
from sensorscript.cli import main, run_command
from sensorscript.compiler import compile_workflows
from sensorscript.registry import read_csv
from sensorscript.runtime.control.run_options import RunSettings, job_parser, job_settings
from sensorscript.workload import write_readings
from tests.conftest import EXAMPLES, ROOT

SENSORS = ROOT / "workflows" / "sensors.csv"


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Path:
    """A compiled job in OUT, a folder of input, the files the TLS and template options name."""
    place = tmp_path_factory.mktemp("options")
    compile_workflows([str(f) for f in EXAMPLES], place / "out", str(SENSORS), 2)
    (place / "data").mkdir()
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (place / name).write_text("not read before the run\n")
    (place / "body.j2").write_text('{"text": "{{ alarm.stream }}"}\n')
    return place


def folder_run(place: Path) -> tuple[list[str], dict]:
    """A replay of a folder: the command line after `sscript run`, and what the job must hold."""
    given = [str(place / "out"), "--input", str(place / "data"), "--once", "--fresh",
             "--sink", f"csv:{place / 'results.csv'}", "--max-files-per-trigger", "3",
             "--watermark", "fixed:5s", "--late", "correct:10s", "--retain", "archive=3d", "--retain", "results=365d",
             "--replay-order", "name", "--input-cleanup", f"archive:{place / 'read'}",
             "--alerts", "http://127.0.0.1:9/hook", "--alerts", "mqtt://127.0.0.1:1883/alarms",
             "--alerts-for", "bridge,pier", "--alerts-for", "fleet", "--alerts-timeout", "5min",
             "--alerts-template", "body.j2", "--alerts-group-by", "stream", "--alerts-group-wait", "5s"]
    expected = dict(input=str(place / "data"), once=True, fresh=True, sink=f"csv:{place / 'results.csv'}",
                    max_files_per_trigger=3, watermark="fixed:5s", late="correct:10s",
                    retain=("archive=3d", "results=365d"), replay_order="name",
                    input_cleanup=f"archive:{place / 'read'}",
                    alerts=("http://127.0.0.1:9/hook", "mqtt://127.0.0.1:1883/alarms"),
                    alerts_for=("bridge,pier", "fleet"), alerts_timeout="5min",
                    alerts_template=str((place / "body.j2").resolve()), alerts_group_by="stream",
                    alerts_group_wait="5s")
    return given, expected


def broker_run(place: Path) -> tuple[list[str], dict]:
    """An MQTT source with TLS whose topic names the sensor."""
    given = [str(place / "out"), "--input", "mqtts://127.0.0.1:8883/plant/+/reading", "--sensor-from-topic", "-2",
             "--mqtt-ca", "ca.pem", "--mqtt-cert", "cert.pem", "--mqtt-key", "key.pem", "--mqtt-plain-password"]
    expected = dict(input="mqtts://127.0.0.1:8883/plant/+/reading", sensor_from_topic=-2,
                    mqtt_ca=str((place / "ca.pem").resolve()), mqtt_cert=str((place / "cert.pem").resolve()),
                    mqtt_key=str((place / "key.pem").resolve()), mqtt_plain_password=True)
    return given, expected


def kafka_run(place: Path) -> tuple[list[str], dict]:
    """A Kafka source of two brokers and two topics, with its start, bound and client settings (a
    secret as env:NAME, passed on unread)."""
    given = [str(place / "out"), "--input", "kafka://k1:9092,k2:9093/bridge,pier", "--kafka-start",
             "2026-11-28T06:00:00Z", "--max-readings-per-batch", "50000", "--kafka-option", "security.protocol=SASL_SSL",
             "--kafka-option", "sasl.jaas.config=env:HOME", "--sensor-from-key", "--kafka-plain-password"]
    expected = dict(input="kafka://k1:9092,k2:9093/bridge,pier", kafka_start="2026-11-28T06:00:00Z",
                    max_readings_per_batch=50_000, kafka_option=("security.protocol=SASL_SSL", "sasl.jaas.config=env:HOME"),
                    sensor_from_key=True, kafka_plain_password=True)
    return given, expected


def job_argv(monkeypatch, place: Path, given: list[str]) -> list[str]:
    """The command `sscript run GIVEN` starts (its Spark never starts: the command is only kept)."""
    started = []
    monkeypatch.setattr(running, "run_quietly", lambda command, *args, **kwargs: started.append(command) or 0)
    monkeypatch.chdir(place)  # the files are given relative to here; the job gets them absolute
    result = CliRunner().invoke(main, ["run", *given])
    assert result.exit_code == 0, result.output
    (command,) = started
    return command


@pytest.mark.parametrize("mode", ["python", "spark-submit"])
@pytest.mark.parametrize("case", [folder_run, broker_run, kafka_run])
def test_every_option_of_sscript_run_reaches_the_job(monkeypatch, place, mode, case):
    given, expected = case(place)
    if mode == "spark-submit":
        given = [*given, "--cluster", "local[1]"]
    command = job_argv(monkeypatch, place, given)
    job = next(i for i, part in enumerate(command) if part.endswith("job.py"))
    if mode == "spark-submit":
        assert Path(command[0]).name == "spark-submit" and command[command.index("--master") + 1] == "local[1]"
    else:
        assert command[0] == sys.executable
    settings = job_settings(command[job + 1:], "a job", out=place / "elsewhere")
    assert settings.out.resolve() == (place / "out").resolve()
    default = RunSettings()
    for name, value in expected.items():
        assert getattr(settings, name) == value, name
    # and every other option is at its default (none is given that was not asked for)
    others = {name for name in vars(default) if name not in expected and name != "out"}
    assert {name: getattr(settings, name) for name in others} == {name: getattr(default, name) for name in others}


def test_the_cases_above_give_every_option_of_sscript_run():
    """A new option of `sscript run` needs a value in the cases above."""
    place = Path("p")
    given = {part for case in (folder_run, broker_run, kafka_run) for part in case(place)[0] if part.startswith("--")}
    options = {param.opts[0] for param in run_command.params if isinstance(param, click.Option)}
    assert options == given | {"--cluster", "--cluster-secret", "--cluster-unauthenticated"}


def test_the_job_takes_its_own_options(tmp_path):
    """The job's options that `sscript run` leaves at their defaults."""
    settings = job_settings(["--input", "data", "--master", "local[3]", "--trigger-seconds", "0.5",
                             "--refresh-after", "7"], "a job", out=tmp_path)
    assert (settings.master, settings.trigger_seconds, settings.refresh_after) == ("local[3]", 0.5, 7)
    assert settings.out == tmp_path
    options = {param.opts[0] for param in run_command.params if isinstance(param, click.Option)}
    assert not options & {"--master", "--trigger-seconds", "--refresh-after"}


def test_the_command_line_and_the_job_say_the_same_of_each_option(tmp_path):
    helps = {action.option_strings[0]: action.help for action in job_parser("a job", tmp_path)._actions
             if action.option_strings and action.option_strings[0] != "-h"}
    shared = [param for param in run_command.params if isinstance(param, click.Option) and param.opts[0] in helps]
    assert len(shared) == 26  # all but --cluster (spark-submit's --master) and OUT (the job's --out)
    for param in shared:
        assert param.help == helps[param.opts[0]], param.opts[0]


def test_a_value_the_job_cannot_take_is_refused_in_a_sentence(tmp_path, capsys):
    for wrong, said in ((["--max-files-per-trigger", "0"], "--max-files-per-trigger 0: at least 1"),
                        (["--refresh-after", "ten"], "--refresh-after ten: not a whole number"),
                        (["--late", "sometimes"], "--late"), (["--replay-order", "size"], "--replay-order")):
        with pytest.raises(SystemExit) as refused:
            job_settings(["--input", "data", *wrong], "a job", out=tmp_path)
        assert refused.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.spark
def test_a_run_on_spark_takes_the_options_given(place, tmp_path):
    """`sscript run` for real, in its own process: what the job did shows it took each option."""
    data, read = tmp_path / "data", tmp_path / "read"
    write_readings(read_csv(SENSORS), tmp_path / "gen", seconds=30, files=1)
    lines = (tmp_path / "gen" / "readings-000.csv").read_text().splitlines()
    data.mkdir()
    (data / "b.csv").write_text("\n".join(lines[len(lines) // 2:]) + "\n")
    (data / "a.csv").write_text("\n".join(lines[:len(lines) // 2]) + "\n")
    out = tmp_path / "out"
    compile_workflows([str(f) for f in EXAMPLES], out, str(SENSORS), 2)
    done = subprocess.run([sys.executable, "-m", "sensorscript.cli", "run", str(out), "--input", str(data), "--once",
                           "--sink", f"parquet:{tmp_path / 'results'}", "--max-files-per-trigger", "1",
                           "--watermark", "fixed:2s", "--late", "correct:1s", "--retain", "results=365d",
                           "--replay-order", "name", "--input-cleanup", f"archive:{read}"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "SSCRIPT_DEBUG": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout
    assert "replaying 2 files in name order" in said  # --replay-order name
    assert "batch 1:" in said and "batch 2:" not in said.split("batch 1:")[0]  # one file a batch
    status = json.loads((out / "status.json").read_text())
    assert (status["watermark"], status["late_policy"]) == ("fixed:2s", "correct:1s")
    assert status["sink_spec"] == f"parquet:{tmp_path / 'results'}"
    assert list((tmp_path / "results").glob("batch-*.parquet"))
    assert json.loads((out / "checkpoint" / "retention.json").read_text())["results"] == "365d"
    assert sorted(p.name for p in read.rglob("*.csv")) == ["a.csv", "b.csv"]  # --input-cleanup archive:DIR
