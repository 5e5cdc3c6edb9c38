"""The sensor registry: sensor id, sampling frequency (Hz) and type, in SQLite.

    registry = SensorRegistry.open("sensors.db")       # or a CSV: read into memory
    registry.frequency("8MD1-AZ")                       # default for unknown sensors

A CSV has the header `sensor_id,frequency_hz,type` (`id` and `frequency` are
accepted too). `sscript sensors import FILE.csv --db sensors.db` stores one.
"""

from __future__ import annotations

import csv
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from sensorscript.errors import Diagnostic, SensorScriptError, file_problem

DEFAULT_DB = "sensors.db"
DEFAULT_FREQUENCY_HZ = 20.0  # the bridge of Zhou et al.: most sensors sample at 20 Hz or more

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sensors (
    sensor_id    TEXT PRIMARY KEY,
    frequency_hz REAL NOT NULL CHECK (frequency_hz > 0),
    type         TEXT NOT NULL DEFAULT ''
)
"""
_ID_COLUMNS = ("sensor_id", "id")
_FREQUENCY_COLUMNS = ("frequency_hz", "frequency", "hz")


@dataclass(frozen=True)
class Sensor:
    sensor_id: str
    frequency_hz: float
    type: str = ""


class SensorRegistry:
    def __init__(self, connection: sqlite3.Connection, path: str = ":memory:"):
        self._db = connection
        self.path = path
        self._db.execute(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(sensors)")}
        if not {"sensor_id", "frequency_hz", "type"} <= columns:  # another program's table of that name
            raise SensorScriptError([Diagnostic("error", f"{path}: not a sensor registry: its table 'sensors' "
                                                         f"has no columns sensor_id, frequency_hz and type")])

    # opening ----------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> "SensorRegistry":
        """A SQLite registry, or a CSV read into an in-memory one."""
        path = Path(path)
        if path.suffix.lower() == ".csv":
            registry = cls(sqlite3.connect(":memory:"), str(path))
            registry.import_csv(path)
            return registry
        if not path.exists():
            raise SensorScriptError([Diagnostic("error", f"{path}: no such sensor registry; create one with "
                                                         f"'sscript sensors import SENSORS.csv --db {path}'")])
        return cls._sqlite(path, create=False)

    @classmethod
    def create(cls, path: str | Path) -> "SensorRegistry":
        """The registry to import into: a new SQLite file, or the one there."""
        return cls._sqlite(Path(path), create=True)

    @classmethod
    def _sqlite(cls, path: Path, create: bool) -> "SensorRegistry":
        connection = None
        try:
            connection = sqlite3.connect(str(path))
            # Reading the table list is what fails on a file that is not SQLite.
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "sensors" not in tables and not create:  # another program's database: leave it as it is
                raise SensorScriptError([Diagnostic("error", f"{path}: not a sensor registry: it has no table "
                                                             f"'sensors' (sscript sensors import SENSORS.csv --db "
                                                             f"{path} makes one)")])
            return cls(connection, str(path))
        except sqlite3.Error as exc:
            if connection is not None:
                connection.close()
            if not path.exists():  # sqlite3 creates a missing file: its folder is what failed
                message = f"cannot create a sensor registry there: {exc}"
            else:
                message = f"not a sensor registry: {'it is a folder' if path.is_dir() else exc}"
            raise SensorScriptError([Diagnostic("error", f"{path}: {message}")]) from None
        except SensorScriptError:
            connection.close()
            raise

    @classmethod
    def of(cls, sensors: Iterable[Sensor]) -> "SensorRegistry":
        registry = cls(sqlite3.connect(":memory:"))
        registry.put(sensors)
        return registry

    # reading ----------------------------------------------------------------
    def ids(self) -> frozenset[str]:
        return frozenset(row[0] for row in self._db.execute("SELECT sensor_id FROM sensors"))

    def sensors(self) -> list[Sensor]:
        rows = self._db.execute("SELECT sensor_id, frequency_hz, type FROM sensors ORDER BY sensor_id")
        return [Sensor(*row) for row in rows]

    def frequencies(self) -> dict[str, float]:
        return dict(self._db.execute("SELECT sensor_id, frequency_hz FROM sensors"))

    def frequency(self, sensor_id: str) -> float:
        row = self._db.execute("SELECT frequency_hz FROM sensors WHERE sensor_id = ?", (sensor_id,)).fetchone()
        return row[0] if row else DEFAULT_FREQUENCY_HZ

    # writing ----------------------------------------------------------------
    def put(self, sensors: Iterable[Sensor]) -> int:
        rows = [(s.sensor_id, s.frequency_hz, s.type) for s in sensors]
        with self._db:
            self._db.executemany(
                "INSERT INTO sensors (sensor_id, frequency_hz, type) VALUES (?, ?, ?) "
                "ON CONFLICT(sensor_id) DO UPDATE SET frequency_hz = excluded.frequency_hz, type = excluded.type",
                rows)
        return len(rows)

    def import_csv(self, path: str | Path) -> int:
        """Insert or update the sensors of a CSV; every bad row is reported with its line."""
        return self.put(read_csv(path))

    def close(self) -> None:
        self._db.close()


def read_csv(path: str | Path) -> list[Sensor]:
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise SensorScriptError([Diagnostic("error", f"{path}: cannot read: {file_problem(exc)}")]) from None
    with handle:
        try:
            return _read_rows(path, csv.DictReader(handle))
        except (UnicodeDecodeError, csv.Error) as exc:  # a binary file, NUL bytes
            reason = file_problem(exc) if isinstance(exc, UnicodeDecodeError) else str(exc)
            raise SensorScriptError([Diagnostic("error", f"{path}: not a CSV of sensors: {reason}")]) from None


def _read_rows(path: Path, reader: csv.DictReader) -> list[Sensor]:
    """The sensors of a CSV; every bad row is reported with its line."""
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    id_col = next((c for c in _ID_COLUMNS if c in header), None)
    freq_col = next((c for c in _FREQUENCY_COLUMNS if c in header), None)
    if id_col is None or freq_col is None:
        raise SensorScriptError([Diagnostic(
            "error", f"{path}:1: the header must name the columns sensor_id,frequency_hz[,type]; "
                     f"found {','.join(header) or 'nothing'}")])
    reader.fieldnames = header
    problems: list[Diagnostic] = []
    sensors: list[Sensor] = []
    for line, row in enumerate(reader, start=2):
        sensor_id = (row.get(id_col) or "").strip()
        raw = (row.get(freq_col) or "").strip()
        try:
            frequency = float(raw)
        except ValueError:
            frequency = math.nan
        if not sensor_id:
            problems.append(Diagnostic("error", f"{path}:{line}: empty sensor id"))
        elif not (math.isfinite(frequency) and frequency > 0):
            problems.append(Diagnostic("error", f"{path}:{line}: frequency of '{sensor_id}' must be a "
                                                f"positive number of Hz, not '{raw}'"))
        else:
            sensors.append(Sensor(sensor_id, frequency, (row.get("type") or "").strip()))
    if problems:
        raise SensorScriptError(problems)
    return sensors
