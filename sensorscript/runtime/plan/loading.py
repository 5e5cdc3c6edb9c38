"""The compiled job in OUT: OUT/job.py (or OUT/naive_job.py) found and imported as a module.

A job.py holds its plan as data (`JOB`) and `build_query`; the CLI, corrections, the report and the
dashboard all load it the same way.

Loading a job runs its code, so a job in a folder others may write to or own (or one others may
change or own: job.py, the operator files) is refused: whoever could write there would run code as the job. What
SensorScript writes into OUT is its owner's alone (`OWNER_ONLY`, the umask the CLI and the job set,
which Spark's JVM inherits for its checkpoint).
"""

from __future__ import annotations

import importlib.util
import os
import stat
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


OWNER_ONLY = 0o077  # the umask: folders 0700, files 0600


def keep_private() -> None:
    """Everything this process (and a JVM or Python worker it starts) creates is its owner's alone."""
    os.umask(OWNER_ONLY)


def check_private(out: Path, job: Path) -> None:
    """OUT, its job.py and its operator files belong to whoever runs the job (or to root) and may be
    changed by their owner only, or a clear error."""
    operators = Path(out) / "operators"
    for path in (Path(out), job, *([operators, *operators.iterdir()] if operators.is_dir() else [])):
        found = path.stat()
        if anothers(found):
            raise SensorScriptError([Diagnostic("error", f"{path}: belongs to {_user(found.st_uid)}, not to you, who "
                                                         f"would run its code; compile the job into a folder of your "
                                                         f"own")])
        mode = found.st_mode
        if _shared(found):
            raise SensorScriptError([Diagnostic("error", f"{path}: others may write to it (mode {stat.filemode(mode)}), "
                                                         f"so they could change the code the job runs; make it yours "
                                                         f"alone (chmod go-w {path}) and run again")])


def not_yours(path: Path) -> str | None:
    """Why a file the job reads as its own say (where its alarms go, their template) could be
    another's, by check_private's rules: it belongs to another user (not root), or others may write
    to it; None when it is yours alone."""
    found = Path(path).stat()
    if anothers(found):
        return f"it belongs to {_user(found.st_uid)}, not to you"
    if _shared(found):
        return f"others may write to it (mode {stat.filemode(found.st_mode)}): chmod go-w {path}"
    return None


def anothers(found: os.stat_result) -> bool:
    """Whether a file (its stat) belongs to another user than whoever runs the job (root's is no one else's)."""
    return found.st_uid not in (os.geteuid(), 0)


def _shared(found: os.stat_result) -> bool:
    return bool(found.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _user(uid: int) -> str:
    import pwd

    try:
        return f"the user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"the user id {uid}"


def load_job(out: Path, name: str = "job.py"):
    """Import OUT/job.py as a module (it holds JOB and build_query), or OUT/naive_job.py (`run`);
    refused when others may change it (check_private)."""
    path = compiled_job(out, name)
    check_private(out, path)
    spec = importlib.util.spec_from_file_location(f"sensorscript_job_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a job.py cut short, edited by hand, or from another version of sscript
        first = next(iter(str(exc).splitlines()), "")
        raise SensorScriptError([Diagnostic("error", f"{path}: the compiled job does not load ({type(exc).__name__}"
                                                     f"{': ' + first if first else ''}); compile it again")]) from None
    return module
