"""The versions of a job's plan in its folder: what `sscript update` hands a running job.

    OUT/versions/1/        job.py, plan.json, plan.txt (and operators/) as compiled
    OUT/versions/2/        ... as the first update made them, with changes.txt
    OUT/versions/2/applied.json   written by the run that switched to version 2: after which
                                  batch, and the event time its new computations start at
    OUT/versions/2/backfill.json  its backfill (sscript update --backfill), and how far it got
    OUT/update-request.json       the newest version, for a running job to switch to

OUT/job.py, plan.json and plan.txt are always the newest version's, so `sscript run OUT` runs it:
a run whose checkpoint holds an earlier version's state switches when it starts. A running job
reads the request between batches, stops its query once the batch being written is committed,
and starts it again on the same checkpoint with the new version (run_loop.py); the state of each
partition is carried into it when its first batch arrives (`Engine.migrate`).
"""

from __future__ import annotations

import json
import runpy
import shutil
import time
from pathlib import Path
from sensorscript import atomic

VERSIONS = "versions"
REQUEST = "update-request.json"
APPLIED = "applied.json"
BACKFILL = "backfill.json"  # a backfill of what the version started (runtime/control/backfill.py)
FILES = ("job.py", "plan.json", "plan.txt")  # a version's plan; OUT holds a copy of the newest


def folder(out: Path, number: int) -> Path:
    return Path(out) / VERSIONS / str(number)


def numbers(out: Path) -> list[int]:
    """The versions kept in OUT, oldest first."""
    root = Path(out) / VERSIONS
    return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit()) if root.is_dir() else []


def keep_first(out: Path) -> None:
    """OUT's compiled plan as version 1 (a compile starts the history anew; `sscript update` on a job
    compiled before versions were kept adopts it the same way)."""
    first = folder(out, 1)
    shutil.rmtree(Path(out) / VERSIONS, ignore_errors=True)
    first.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(Path(out) / name, first / name)
    if (Path(out) / "operators").is_dir():
        shutil.copytree(Path(out) / "operators", first / "operators")


def load(out: Path, number: int):
    """Version `number`'s job.py, run as a module: (JOB, build_query)."""
    found = runpy.run_path(str(folder(out, number) / "job.py"), run_name=f"sensorscript_job_v{number}")
    return found["JOB"], found["build_query"]


def request(out: Path, number: int) -> None:
    """Ask a running job to switch to version `number` at its next batch boundary."""
    _write_json(Path(out) / REQUEST, {"version": number, "requested": time.time()})


def requested(out: Path) -> int | None:
    try:
        return int(json.loads((Path(out) / REQUEST).read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_request(out: Path) -> None:
    (Path(out) / REQUEST).unlink(missing_ok=True)


def applied(out: Path, number: int) -> dict | None:
    """How the run that switched to version `number` did it: {"after_batch", "switch_at", "at"}."""
    try:
        return json.loads((folder(out, number) / APPLIED).read_text())
    except (OSError, ValueError):
        return None


def record_applied(out: Path, number: int, after_batch: int | None, switch_at: int | None) -> None:
    _write_json(folder(out, number) / APPLIED, {"after_batch": after_batch, "switch_at": switch_at,
                                                "at": time.time()})


def _write_json(path: Path, value: dict) -> None:
    atomic.write_json(path, value)  # a reader never sees half a file


def started(out: Path, archived: dict[str, int]) -> dict[str, int]:
    """Node id -> the event time an update started it at (added, or restarted, by a version the
    job switched to; the latest such switch): what a computation of the job's now reads from. A
    version whose backfill was asked for (`backfilled_from`) started its nodes that early instead:
    the backfill writes their rows from there, but a sensor's readings not before `archived` says
    the archive holds them (sensor node id -> from when: runtime/ingest/archive.py `archived_from`)."""
    found: dict[str, int] = {}
    for number, switch_at, nodes, present in switches(out):
        begin = backfilled_from(out, number)
        found.update({node_id: switch_at if begin is None else
                      max(begin, archived.get(node_id, switch_at)) if present[node_id]["kind"] == "sensor" else begin
                      for node_id in nodes})
        found = {n: t for n, t in found.items() if n in present}
    return found


def switches(out: Path):
    """For each version the job switched to, oldest first: (number, switch_at, the node ids it
    started there, its plan's nodes by id as plan.json has them)."""
    before: dict[str, dict] | None = None  # the nodes of the version run before, by id
    for number in numbers(out):
        record = applied(out, number)
        if number > 1 and record is None:
            continue  # a version the job never ran (a newer one was requested before it switched)
        try:
            plan = json.loads((folder(out, number) / "plan.json").read_text())
        except (OSError, ValueError):
            continue
        nodes = {node["id"]: node for node in plan["nodes"]}
        if before is not None and record.get("switch_at") is not None:
            job, _ = load(out, number)
            restarted = {key for key, at in job.version.restarted.items() if at == number}
            yield number, record["switch_at"], {node_id for node_id, node in nodes.items()
                                                if node_id not in before
                                                or before[node_id]["partition"] != node["partition"]
                                                or node_id in restarted}, nodes
        else:
            yield number, None, set(), nodes
        before = nodes


def backfilled_from(out: Path, number: int) -> int | None:
    """The event time from which a backfill of version `number` (runtime/control/backfill.py) reads
    the archive, once it has been asked for and that time is known; else None."""
    try:
        return json.loads((folder(out, number) / BACKFILL).read_text()).get("read_start")
    except (OSError, ValueError, AttributeError):
        return None
