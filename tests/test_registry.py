"""The SQLite sensor registry and its CSV import."""

import pytest
from click.testing import CliRunner

from sensorscript.cli import main
from sensorscript.errors import SensorScriptError
from sensorscript.registry import DEFAULT_FREQUENCY_HZ, Sensor, SensorRegistry


def test_import_and_read_back(tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("sensor_id,frequency_hz,type\n8MD1-AZ,20,displacement\n8WL3,0.5,water\n")
    registry = SensorRegistry.create(tmp_path / "sensors.db")
    assert registry.import_csv(csv) == 2
    registry.close()
    again = SensorRegistry.open(tmp_path / "sensors.db")
    assert again.sensors() == [Sensor("8MD1-AZ", 20.0, "displacement"), Sensor("8WL3", 0.5, "water")]
    assert again.frequency("8WL3") == 0.5
    assert again.frequency("unknown") == DEFAULT_FREQUENCY_HZ


def test_reimport_updates(tmp_path):
    registry = SensorRegistry.create(tmp_path / "sensors.db")
    registry.put([Sensor("S", 10.0)])
    registry.put([Sensor("S", 50.0, "vibration")])
    assert registry.sensors() == [Sensor("S", 50.0, "vibration")]


def test_bad_rows_are_reported_with_their_lines(tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("sensor_id,frequency_hz\nA,20\n,5\nB,fast\nC,-1\n")
    with pytest.raises(SensorScriptError) as raised:
        SensorRegistry.open(csv)
    messages = [d.message for d in raised.value.diagnostics]
    assert messages == [f"{csv}:3: empty sensor id",
                        f"{csv}:4: frequency of 'B' must be a positive number of Hz, not 'fast'",
                        f"{csv}:5: frequency of 'C' must be a positive number of Hz, not '-1'"]


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(SensorScriptError, match="no such sensor registry"):
        SensorRegistry.open(tmp_path / "nope.db")


def test_check_with_registry_warns_on_unknown_sensor(write_scripts, tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("sensor_id,frequency_hz\nS1,20\n")
    (path,) = write_scripts({"w": "X = avg(S1, 1s, 1s);\nY = avg(S2, 1s, 1s);"})
    result = CliRunner().invoke(main, ["check", "--sensors", str(csv), path])
    assert result.exit_code == 0
    assert "w.ss:2:9: warning: 'S2' is neither a stream of this workflow nor a sensor of the registry" in result.output
