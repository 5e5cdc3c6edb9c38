"""The compiled job in OUT: OUT/job.py (or OUT/naive_job.py) found and imported as a module.

A job.py holds its plan as data (`JOB`) and `build_query`; the CLI, corrections, the report and the
dashboard all load it the same way.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sensorscript.errors import Diagnostic, SensorScriptError


def compiled_job(out: Path, name: str = "job.py") -> Path:
    """OUT/job.py (or OUT/naive_job.py); a clear error when OUT holds none (never compiled, missing)."""
    path = Path(out) / name
    if not path.is_file():
        flag = " --naive" if name == "naive_job.py" else ""
        raise SensorScriptError([Diagnostic("error", f"{path}: no compiled job here; run "
                                                     f"'sscript compile WORKFLOWS... -o {out}{flag}' first")])
    return path


def load_job(out: Path, name: str = "job.py"):
    """Import OUT/job.py as a module (it holds JOB and build_query), or OUT/naive_job.py (`run`)."""
    path = compiled_job(out, name)
    spec = importlib.util.spec_from_file_location(f"sensorscript_job_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a job.py cut short, edited by hand, or from another version of sscript
        first = next(iter(str(exc).splitlines()), "")
        raise SensorScriptError([Diagnostic("error", f"{path}: the compiled job does not load ({type(exc).__name__}"
                                                     f"{': ' + first if first else ''}); compile it again")]) from None
    return module
