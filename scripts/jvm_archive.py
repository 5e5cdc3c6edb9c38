"""A class-data-sharing archive of Spark's driver JVM, for the test suite's hundreds of short-lived JVMs.

    .venv/bin/python scripts/jvm_archive.py [--archive .venv/jvm/spark.jsa] [--check]

A Spark driver loads about 17,000 classes from some 250 jars at every start: about half of the CPU
a short job costs (a `sscript run --once` of the example fleet: 16 CPU seconds, 8 of them a bare
session's start). Java's class-data sharing maps them from one archive instead: the same run then
costs about 12 (docs/TESTING.md, "The JVMs' classes from an archive"). This script runs the example job once
with `-XX:DumpLoadedClassList`, reads the class path the driver JVM ran with, and has Java write the
archive (`-Xshare:dump`), about 40 s; `scripts/test.sh` then gives the suite's JVMs
`-XX:SharedArchiveFile=ARCHIVE` (through SSCRIPT_JVM_OPTIONS). A JVM whose class path differs (a
cluster's executors, another pyspark) uses no archive and runs as before: the archive only saves time.

Made again when pyspark or Java changes (a stamp beside the archive); `--check` says whether it is up
to date and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / ".venv" / "jvm" / "spark.jsa"


def stamp_text() -> str:
    """What the archive was made for: pyspark's version and Java's."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
    return f"pyspark {pyspark.__version__}; {' '.join(java)}\n"


def up_to_date(archive: Path) -> bool:
    stamp = archive.with_suffix(".stamp")
    return archive.exists() and stamp.exists() and stamp.read_text() == stamp_text()


def driver_class_path(process: subprocess.Popen, timeout: float = 120) -> tuple[str, list[str]]:
    """The class path and module options of the driver JVM the job (`process`) starts, read from its
    command line while it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                arguments = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            words = [a.decode() for a in arguments if a]
            # The driver has the option itself; spark-submit's launcher JVM only names it in an argument.
            if words and words[0].endswith("java") and any(w.startswith("-XX:DumpLoadedClassList=") for w in words):
                path = words[words.index("-cp") + 1]
                modules = [w for w in words if w.startswith("--add-modules")]
                return path, modules
        time.sleep(0.2)
    raise RuntimeError("the example job's driver JVM was not seen running")


def make(archive: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="sscript-jvm-archive-") as folder:  # the example job's, removed after
        _make(archive, Path(folder))


def _make(archive: Path, work: Path) -> None:
    classes = work / "classes.lst"
    out, data = work / "out", work / "data"
    python = sys.executable
    workflows = sorted(str(p) for p in (ROOT / "workflows").glob("*.ss"))
    subprocess.run([python, "-m", "sensorscript.cli", "compile", *workflows, "-o", str(out), "--sensors",
                    str(ROOT / "workflows" / "sensors.csv")], check=True, capture_output=True, cwd=ROOT)
    subprocess.run([python, str(ROOT / "scripts" / "generate_data.py"), str(data), "--seconds", "20", "--files", "1"],
                   check=True, capture_output=True, cwd=ROOT)
    options = f"{os.environ.get('SSCRIPT_JVM_OPTIONS', '')} -XX:DumpLoadedClassList={classes}".strip()
    job = subprocess.Popen([python, "-m", "sensorscript.cli", "run", str(out), "--input", str(data), "--once"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                           env={**os.environ, "SSCRIPT_JVM_OPTIONS": options, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        class_path, modules = driver_class_path(job)
    finally:
        code = job.wait(timeout=300)
    if code != 0:
        raise RuntimeError(f"the example job exited with {code}")
    archive.parent.mkdir(parents=True, exist_ok=True)
    made = archive.with_suffix(".tmp")
    dumped = subprocess.run(["java", "-Xshare:dump", f"-XX:SharedClassListFile={classes}",
                             f"-XX:SharedArchiveFile={made}", "-XX:+IgnoreUnrecognizedVMOptions", *modules,
                             "-cp", class_path], capture_output=True, text=True)
    if dumped.returncode or not made.exists():
        raise RuntimeError(f"java -Xshare:dump failed: {dumped.stdout[-2000:]}{dumped.stderr[-2000:]}")
    made.replace(archive)
    archive.with_suffix(".stamp").write_text(stamp_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=DEFAULT)
    parser.add_argument("--check", action="store_true", help="say whether the archive is up to date; write nothing")
    args = parser.parse_args()
    archive = args.archive.resolve()
    if up_to_date(archive):
        print(f"archive up to date: {archive}")
        return
    if args.check:
        print(f"archive missing or made for another pyspark or Java: {archive}")
        return
    started = time.monotonic()
    make(archive)
    print(f"archive made in {time.monotonic() - started:.0f} s: {archive} ({archive.stat().st_size / 2**20:,.0f} MiB)")


if __name__ == "__main__":
    main()
