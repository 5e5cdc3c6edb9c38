"""What `sscript run --cluster` ships to the executors, so that a worker needs nothing of the
project: the sensorscript package (a zip for --py-files) and the Python libraries it runs on (an
archive for --archives, unpacked by Spark in each executor's folder).

The libraries are the distributions sensorscript requires (its installed metadata, from
pyproject.toml: the one list), with what they require in turn, as installed in the driver's
environment, but not pyspark and py4j: the cluster's Spark has its own, which must be the driver's
version anyway. An archive is built once for a set of distributions and versions and kept in the
environment (`.venv/shipped/`, or SSCRIPT_SHIPPED; an older one goes when a newer is built); the
next run of any job reuses it.

A worker needs a Python of the driver's minor version (`python3.11` on its PATH, or PYSPARK_PYTHON
as Spark reads it), Java and Spark: the compiled parts of the libraries (pyarrow, numpy) are built
for that Python. The job checks at its start that the executors run it (runtime/control/executors.py).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import os
import re
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import sensorscript

ARCHIVE_NAME = "sscript-libraries"  # the folder an executor unpacks the archive into (its fragment)
FROM_THE_CLUSTER = {"pyspark", "py4j"}  # the cluster's Spark brings its own


def package_zip(out: Path) -> Path:
    """The sensorscript package as a zip for spark-submit --py-files (the executors import the runtime)."""
    target = Path(out) / "sensorscript.zip"
    root = Path(sensorscript.__file__).resolve().parent
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, Path("sensorscript") / path.relative_to(root))
    return target


def arguments(out: Path, echo=print) -> list[str]:
    """What spark-submit is given so that the executors run the job (`sscript run --cluster`; a
    Python that starts its own session passes them in PYSPARK_SUBMIT_ARGS): the package, the
    libraries unpacked in each executor's folder and put on its Python's path, and that Python."""
    return ["--py-files", str(package_zip(out)),
            "--archives", f"{libraries_archive(echo)}#{ARCHIVE_NAME}",
            "--conf", f"spark.executorEnv.PYTHONPATH={ARCHIVE_NAME}",
            "--conf", f"spark.pyspark.python={executor_python()}"]


def driver_path() -> str:
    """PATH for the driver: this environment's bin/ first, so that the Python Spark starts on the
    driver to set up a stateful stage (the executors' `python3.11`, by name) is this one, with the
    libraries, whether or not the environment is activated."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])


def executor_python() -> str:
    """The Python the executors run: PYSPARK_PYTHON if the user set it (as Spark reads it), else
    `python3.11` (the driver's minor version) found on each worker's PATH."""
    return os.environ.get("PYSPARK_PYTHON") or f"python{sys.version_info.major}.{sys.version_info.minor}"


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> list[importlib.metadata.Distribution]:
    """The installed distributions sensorscript needs at run time (not its extras), each once, by name."""
    from packaging.requirements import Requirement

    def needed(lines, extras=()) -> list[Requirement]:  # those that hold here, for these extras
        return [r for r in map(Requirement, lines or [])
                if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("", *extras))]

    found: dict[str, importlib.metadata.Distribution] = {}
    wanted = needed(importlib.metadata.requires("sensorscript"))
    while wanted:
        requirement = wanted.pop()
        key = _key(requirement.name)
        if key in found or key in FROM_THE_CLUSTER:
            continue
        found[key] = importlib.metadata.distribution(requirement.name)
        wanted += needed(found[key].requires, requirement.extras)  # psycopg[binary]: psycopg-binary too
    return [found[key] for key in sorted(found)]


def cache() -> Path:
    return Path(os.environ.get("SSCRIPT_SHIPPED") or Path(sys.prefix) / "shipped")


def _check_yours(path: Path) -> None:
    """The archive runs on every executor as the job's own code: found by its name, it must be the
    user's (or root's) and no one else's to change, as OUT's job.py must (loading.not_yours)."""
    from sensorscript.errors import Diagnostic, SensorScriptError
    from sensorscript.runtime.plan.loading import not_yours

    if not path.exists():
        return
    why = not_yours(path)
    if why is not None:
        raise SensorScriptError([Diagnostic("error", f"{path}: {why}; the executors would run what the Python libraries' "
                                                     f"archive there holds: remove it (it is built again) or set "
                                                     f"SSCRIPT_SHIPPED to a folder of your own")])


def libraries_archive(echo=print) -> Path:
    """The archive of the libraries (built now if this set of them has none yet): a .tar.gz whose
    top holds what site-packages holds of them."""
    chosen = distributions()
    names = "\n".join(f"{_key(d.metadata['Name'])}=={d.version}" for d in chosen)
    tag = f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
    digest = hashlib.sha256(f"{tag}\n{names}".encode()).hexdigest()[:16]
    target = cache() / f"libraries-{tag}-{digest}.tar.gz"
    _check_yours(target.parent)
    if target.exists():
        _check_yours(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    echo(f"packing the Python libraries the executors need ({len(chosen)} distributions) into {target}, once")
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tarfile.open(temporary, "w:gz", compresslevel=1) as archive:
        for distribution in chosen:
            for file in distribution.files or []:
                path = Path(distribution.locate_file(file))
                if file.parts[0] != ".." and path.is_file():  # not the scripts in bin/
                    archive.add(path, arcname=str(file), recursive=False)
        listing = tarfile.TarInfo("SSCRIPT-LIBRARIES.txt")  # what it holds, for a reader
        listing.size = len(names.encode()) + 1
        archive.addfile(listing, io.BytesIO(names.encode() + b"\n"))
    os.replace(temporary, target)
    for older in cache().glob("libraries-*.tar.gz"):  # of versions this environment no longer has
        if older != target:
            older.unlink(missing_ok=True)
    return target
