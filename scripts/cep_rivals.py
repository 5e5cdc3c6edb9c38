"""The same pattern-matching workload on two rival CEP engines, Esper and Flink SQL MATCH_RECOGNIZE,
so that our matcher's throughput and matches can be compared one by one.

    .venv/bin/python scripts/cep_rivals.py --fetch                       # once: jars, javac (needs network)
    .venv/bin/python scripts/cep_rivals.py --make-events out/ev.csv      # 40 sensors x 10,000 readings, seed 38
    .venv/bin/python scripts/cep_rivals.py --engine esper --events out/ev.csv --pattern ab --within-ms 1000 [--check]
    .venv/bin/python scripts/cep_rivals.py --engine flink --events out/ev.csv --pattern ab --within-ms 60000 \
        [--parallelism 2] [--check]
    .venv/bin/python scripts/cep_rivals.py --selftest                    # a tiny hand-made example, every pattern

`run_rival(engine, events_csv, pattern, within_ms, cache)` returns {"matches": sorted [(sensor, a_ts,
last_ts)], "events_per_s", "seconds", "peak_rss_mib", ...}. The events CSV has lines
`sensor,ts_ms,value` (a header line is dropped) in event-time order, many sensors interleaved.
Patterns, per sensor, strategy skip-till-next-match, one match per a at most:

  ab   a (value > 9), then b: the EARLIEST later event with b.value > a.value + 0.95 and
       b.ts - a.ts < within_ms
  neg  ab, and no event n with n.value > 9.9 strictly between a and b (an n before the first
       qualifying b: no match for that a)
  akc  a (value > 9), then b+ (every later event with value < 5, at least one), then c: the first
       event after the first b with c.value > a.value + 0.95, which ends the closure;
       c.ts - a.ts < within_ms. An event before the first b that would be a c is skipped (it does not
       fit the state "waiting for b").

Esper 8.9.0 (the EPL in scripts/rivals/EsperBench.java) runs on an external timer advanced to each
event's ts, so timer:within is in event time; its time is the send loop alone (events parsed before).
Flink 2.3.0 (scripts/rivals/FlinkBench.java: the Table API in a local mini cluster, streaming mode,
rowtime = ts, watermark 1 s behind) reads the CSV itself; its `seconds` run from submitting the
query to the last row collected (job start-up and CSV parsing included; `net_seconds` is Flink's
own job runtime). Flink's jars come from PyPI's apache-flink-libraries (the jars PyFlink ships) in a
venv under the cache; Esper's from Maven Central through `mvn dependency:copy-dependencies`.
Peak RSS is the JVM's VmHWM read by the JVM itself at the end.

Flink's cost is quadratic in the rows a partial match skips: every condition that reads A (Z's and
B's `> A.value + 0.95`) makes its NFA extract the whole partial match from the shared buffer
(NFA.extractCurrentMatches) for each row and each open match. Fine at within 1 s (<= 9 rows skipped),
about 100 events/s at within 1 min (600 rows): the 400,000-event run would take over an hour.

The module uses the standard library and numpy only; the engines run as `java` subprocesses.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SOURCES = Path(__file__).resolve().parent / "rivals"
DEFAULT_CACHE = ROOT / ".cache" / "rivals"
ESPER_VERSION = "8.9.0"  # no esper in the registry list we have; 8.9.0 is the newest we know of
FLINK_VERSION = "2.3.0"  # the same Flink the project's bench_flink*.py pin (runs on Java 17)
ENGINES = ("esper", "flink")
PATTERNS = ("ab", "neg", "akc")

ESPER_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.sensorscript</groupId><artifactId>cep-rivals-esper</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>com.espertech</groupId><artifactId>esper-common</artifactId><version>{ESPER_VERSION}</version></dependency>
    <dependency><groupId>com.espertech</groupId><artifactId>esper-compiler</artifactId><version>{ESPER_VERSION}</version></dependency>
    <dependency><groupId>com.espertech</groupId><artifactId>esper-runtime</artifactId><version>{ESPER_VERSION}</version></dependency>
  </dependencies>
</project>
"""

# What Flink's own config.yaml passes to its JVMs on Java 17 (reflection into the JDK).
FLINK_JVM_OPTS = [
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text",
        "java.time", "java.util", "java.util.concurrent", "java.util.concurrent.atomic",
        "java.util.concurrent.locks")),
]


# ---------------------------------------------------------------------------------------- setup

def _need(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"cep_rivals: `{tool}` not found ({hint})")
    return path


def _esper_lib(cache: Path) -> Path:
    return cache / "esper" / "lib"


def _flink_lib(cache: Path) -> Path | None:
    found = sorted(glob.glob(str(cache / "flink-venv" / "lib" / "python*" / "site-packages" / "pyflink" / "lib")))
    return Path(found[-1]) if found else None


def _classpath(lib: Path, classes: Path) -> str:
    return f"{lib}/*{os.pathsep}{classes}"


def _compile(cache: Path, engine: str) -> Path:
    """javac scripts/rivals/<Engine>Bench.java (and Shared.java) into the cache (again when a source changed)."""
    source = SOURCES / ("EsperBench.java" if engine == "esper" else "FlinkBench.java")
    shared = SOURCES / "Shared.java"
    lib = _esper_lib(cache) if engine == "esper" else _flink_lib(cache)
    classes = cache / "classes" / engine
    digest = hashlib.sha256(source.read_bytes() + shared.read_bytes()).hexdigest()[:16]
    stamp = classes / f".source-{digest}"
    if not stamp.exists():
        shutil.rmtree(classes, ignore_errors=True)
        classes.mkdir(parents=True)
        done = subprocess.run([_need("javac", "apt-get install openjdk-17-jdk-headless"), "-nowarn", "-cp",
                               f"{lib}/*", "-d", str(classes), str(source), str(shared)], capture_output=True, text=True)
        if done.returncode:
            shutil.rmtree(classes, ignore_errors=True)
            raise RuntimeError(f"javac {source.name} failed:\n{done.stdout}\n{done.stderr}")
        stamp.touch()
    return classes


def fetch(cache: Path = DEFAULT_CACHE) -> None:
    """Download everything both engines need into `cache` and compile the two Java programs.
    Idempotent: a second call only checks the stamps. Needs `mvn`, `java`, `javac` and the registries."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    ignore = cache / ".gitignore"  # the repository's .gitignore does not cover .cache/: keep the cache out of git
    if not ignore.exists():
        ignore.write_text("# created by scripts/cep_rivals.py: nothing in this cache belongs in git\n*\n")
    _need("java", "apt-get install openjdk-17-jdk-headless")

    esper = cache / "esper"
    stamp = esper / f".esper-{ESPER_VERSION}"
    if not stamp.exists():
        esper.mkdir(parents=True, exist_ok=True)
        (esper / "pom.xml").write_text(ESPER_POM)
        shutil.rmtree(esper / "lib", ignore_errors=True)
        done = subprocess.run([_need("mvn", "apt-get install maven"), "-B", "-q", "-f", str(esper / "pom.xml"),
                               "dependency:copy-dependencies", f"-DoutputDirectory={esper / 'lib'}",
                               "-DincludeScope=runtime"], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"mvn could not fetch Esper {ESPER_VERSION}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        for old in esper.glob(".esper-*"):
            old.unlink()
        stamp.touch()

    venv = cache / "flink-venv"
    stamp = venv / f".apache-flink-libraries-{FLINK_VERSION}"
    if not stamp.exists() or _flink_lib(cache) is None:
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        # Only the jars are needed (the Java program replaces PyFlink): apache-flink-libraries alone,
        # without apache-flink's Python dependencies (Beam, ...).
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-deps", f"apache-flink-libraries=={FLINK_VERSION}"], check=True)
        for old in venv.glob(".apache-flink-libraries-*"):
            old.unlink()
        stamp.touch()

    _compile(cache, "esper")
    _compile(cache, "flink")


# ---------------------------------------------------------------------------------------- events

def make_events(path: Path, sensors: int = 40, readings: int = 10_000, period_ms: int = 100, seed: int = 38) -> int:
    """`sensors` sensors x `readings` readings each, ts = i * period_ms (the same ts for every sensor),
    values uniform in [0, 10); lines `sensor,ts_ms,value` in time order, sensors interleaved.
    Values are written with repr, so every reader parses the same doubles."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.0, 10.0, size=(readings, sensors))
    names = [f"s{k:02d}" for k in range(sensors)]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for i in range(readings):
            ts = i * period_ms
            out.write("".join(f"{names[k]},{ts},{float(values[i, k])!r}\n" for k in range(sensors)))
    return sensors * readings


def load_events(path: Path) -> list[tuple[str, int, float]]:
    rows = []
    with Path(path).open() as lines:
        for line in lines:
            parts = line.strip().split(",")
            if len(parts) != 3:
                continue
            try:
                rows.append((parts[0], int(parts[1]), float(parts[2])))
            except ValueError:  # a header
                continue
    return rows


def _headerless(events_csv: Path, cache: Path) -> tuple[Path, int]:
    """The CSV as the engines read it (no header line) and its number of events."""
    with events_csv.open() as f:
        first = f.readline()
    parts = first.strip().split(",")
    header = len(parts) == 3 and not parts[1].strip().lstrip("-").isdigit()
    if not header:
        with events_csv.open("rb") as f:
            count = sum(1 for line in f if line.strip())
        return events_csv, count
    copy = cache / "inputs" / f"{events_csv.stem}-{hashlib.sha256(str(events_csv.resolve()).encode()).hexdigest()[:8]}.csv"
    copy.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with events_csv.open() as src, copy.open("w") as dst:
        src.readline()
        for line in src:
            if line.strip():
                dst.write(line)
                count += 1
    return copy, count


# ---------------------------------------------------------------------------------------- reference

def reference(events, pattern: str, within_ms: int) -> list[tuple[str, int, int]]:
    """Brute force, event by event, of the three patterns' semantics (module docstring)."""
    by_sensor: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for sensor, ts, value in events:
        by_sensor[sensor].append((int(ts), float(value)))
    matches = []
    for sensor, rows in by_sensor.items():
        n = len(rows)
        for i, (a_ts, a_value) in enumerate(rows):
            if not a_value > 9:
                continue
            bound = a_value + 0.95
            seen_b = False
            for j in range(i + 1, n):
                ts, value = rows[j]
                if ts - a_ts >= within_ms:
                    break
                if pattern == "ab":
                    if value > bound:
                        matches.append((sensor, a_ts, ts))
                        break
                elif pattern == "neg":
                    if value > bound:
                        matches.append((sensor, a_ts, ts))
                        break
                    if value > 9.9:  # an n before the first b
                        break
                elif pattern == "akc":
                    if not seen_b:
                        seen_b = value < 5
                    elif value > bound:
                        matches.append((sensor, a_ts, ts))
                        break
                else:
                    raise ValueError(f"unknown pattern {pattern!r}")
    return sorted(matches)


def reference_ab(events, within_ms: int = 1000) -> list[tuple[str, int, int]]:
    """The "ab" pattern by brute force: per sensor, every a with a.value > 9 and the earliest later b
    of its sensor with b.value > a.value + 0.95 and b.ts - a.ts < within_ms. `events`: (sensor, ts,
    value) rows in time order (load_events reads the CSV)."""
    return reference(events, "ab", within_ms)


# ---------------------------------------------------------------------------------------- run

def _run_java(cmd: list[str], timeout: float) -> tuple[dict, float, float]:
    """Run one JVM; its RESULT line, its wall time and its peak RSS in MiB from wait4 (the fallback
    when the JVM could not read its own VmHWM)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise RuntimeError(f"timed out after {timeout:.0f} s: {' '.join(cmd[-6:])}")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    line = next((line for line in stdout.splitlines() if line.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"the JVM failed (exit {proc.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return json.loads(line[len("RESULT "):]), wall, usage.ru_maxrss / 1024


def run_rival(engine: str, events_csv: Path, pattern: str, within_ms: int, cache: Path = DEFAULT_CACHE, *,
              parallelism: int = 2, jvm_opts: tuple[str, ...] = (), timeout: float = 3600) -> dict:
    """Run `pattern` over `events_csv` on `engine` ("esper" or "flink"). Returns the matches (sorted
    (sensor, a_ts, last_ts)), events_per_s (events / the matching time measured inside the JVM),
    seconds (that time), peak_rss_mib (the JVM's peak RSS) and a few details (setup time, the wall time
    of the whole process, the EPL or SQL run). `parallelism` is Flink's (Esper runs on one thread)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    if pattern not in PATTERNS + ("ab_any",) or (pattern == "ab_any" and engine != "flink"):
        raise ValueError(f"pattern must be one of {PATTERNS}, not {pattern!r}")
    cache = Path(cache)
    fetch(cache)
    events_csv, count = _headerless(Path(events_csv).resolve(), cache)
    classes = _compile(cache, engine)
    java = _need("java", "apt-get install openjdk-17-jdk-headless")
    runs = cache / "runs"
    runs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=runs) as work:
        out = Path(work) / "matches.csv"
        if engine == "esper":
            cmd = [java, *jvm_opts, "-cp", _classpath(_esper_lib(cache), classes), "EsperBench",
                   str(events_csv), pattern, str(int(within_ms)), str(out)]
        else:
            cmd = [java, *FLINK_JVM_OPTS, *jvm_opts, "-cp", _classpath(_flink_lib(cache), classes), "FlinkBench",
                   str(events_csv), pattern, str(int(within_ms)), str(int(parallelism)), str(out)]
        result, wall, rss_wait4 = _run_java(cmd, timeout)
        matches = []
        for line in out.read_text().splitlines():
            sensor, a_ts, last_ts = line.split(",")
            matches.append((sensor, int(a_ts), int(last_ts)))
    matches.sort()
    seconds = float(result["seconds"])
    rss = result.get("peak_rss_kib", -1)
    report = {
        "matches": matches,
        "events_per_s": count / seconds if seconds > 0 else float("inf"),
        "seconds": seconds,
        "peak_rss_mib": rss / 1024 if rss and rss > 0 else rss_wait4,
        "engine": engine,
        "version": ESPER_VERSION if engine == "esper" else FLINK_VERSION,
        "pattern": pattern,
        "within_ms": int(within_ms),
        "events": count,
        "setup_seconds": result.get("setup_seconds"),
        "process_seconds": wall,
    }
    if engine == "esper":
        report["load_seconds"] = result.get("load_seconds")
        report["query"] = result.get("epl")
    else:
        report["parallelism"] = int(parallelism)
        report["net_seconds"] = result.get("net_seconds")
        report["query"] = result.get("sql")
    return report


# ---------------------------------------------------------------------------------------- self-test

TINY = """\
s1,0,9.2
s2,0,9.0
s3,0,9.01
s1,100,3.0
s2,100,9.96
s3,100,10.0
s1,200,9.5
s3,200,10.5
s1,300,10.0
s3,300,9.03
s3,400,1.0
s3,500,9.95
s3,900,10.0
s2,1100,9.99
s3,1100,10.0
s1,1200,10.2
s1,1300,9.1
s3,1300,9.1
s1,1400,1.0
s1,1500,9.95
s1,2000,10.1
s3,2300,10.5
"""


def selftest(cache: Path) -> bool:
    """Every pattern on both engines (and Flink's `A Z*? B` form of ab) over a tiny hand-made input
    with the cases that separate the semantics: a second qualifying b after the earliest one (s3 at
    0: 100, not 200), the window's edge (s3 at 1300: its only b is exactly 1000 ms later, out), an n
    before b (s1 at 1300, s3 at 300), a b that is also an n (s3 at 0), c-like events before the
    first b (s3 at 0: 100 and 200 are skipped, c is 900)."""
    ok = True
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "tiny.csv"
        path.write_text(TINY)
        events = load_events(path)
        for pattern in PATTERNS:
            want = reference(events, pattern, 1000)
            for engine, variant in (("esper", pattern), ("flink", pattern)) + ((("flink", "ab_any"),) if pattern == "ab" else ()):
                got = run_rival(engine, path, variant, 1000, cache, parallelism=1)["matches"]
                same = got == want
                ok &= same
                print(f"{engine:5} {variant:6} {'same' if same else 'DIFFERENT'}  got {got}  reference {want}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=ENGINES)
    parser.add_argument("--events", type=Path)
    parser.add_argument("--pattern", choices=PATTERNS + ("ab_any",), default="ab")
    parser.add_argument("--within-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2, help="Flink's (default 2)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--check", action="store_true", help="also compare with the brute-force reference")
    parser.add_argument("--fetch", action="store_true", help="download and compile everything, then exit")
    parser.add_argument("--make-events", type=Path, metavar="CSV", help="write the seed-38 events, then exit")
    parser.add_argument("--selftest", action="store_true", help="the tiny example on both engines, then exit")
    args = parser.parse_args()
    if args.fetch:
        fetch(args.cache)
        print(f"ready in {args.cache}")
        return
    if args.make_events:
        print(f"{make_events(args.make_events):,} events in {args.make_events}")
        return
    if args.selftest:
        sys.exit(0 if selftest(args.cache) else 1)
    if args.engine is None or args.events is None:
        parser.error("--engine and --events are needed")
    report = run_rival(args.engine, args.events, args.pattern, args.within_ms, args.cache, parallelism=args.parallelism)
    if args.check:
        started = time.perf_counter()
        want = reference(load_events(args.events), "ab" if args.pattern == "ab_any" else args.pattern, args.within_ms)
        report["reference_matches"] = len(want)
        report["reference_seconds"] = time.perf_counter() - started
        report["same_as_reference"] = report["matches"] == want
    print(json.dumps(report))


if __name__ == "__main__":
    main()
