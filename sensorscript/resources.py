"""Files that ship with the package: the templates (templates/ at the top of a source checkout,
sensorscript/templates/ inside the wheel), for the generated job and for alarms' bodies."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def templates_folder() -> Path:
    """Templates ship inside the package (wheel); in a source checkout they are at the top."""
    package, checkout = _HERE / "templates", _HERE.parent / "templates"
    return package if package.is_dir() else checkout
