"""Fetch the Java parts a job hands to Spark (its Kafka connector) and the Kafka broker the tests and
the demo start, from Maven Central with Maven, into the project's cache (.venv/jars/, or SSCRIPT_JARS).

    .venv/bin/python scripts/fetch_jars.py [--check]

Idempotent: a part already fetched for the coordinates in sensorscript/runtime/control/jars.py is
left as it is. The connector's folder keeps only the jars the pyspark package lacks (Spark's own
Scala, Hadoop and logging jars are already on its class path, in the versions it was built with).
`--check` fetches nothing and says what is there (exit 1 if a part is missing).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sensorscript.runtime.control import jars

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sensorscript</groupId><artifactId>{part}</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
DEPENDENCY = "    <dependency><groupId>{0}</groupId><artifactId>{1}</artifactId><version>{2}</version></dependency>"
VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[\w.]*?(-[A-Za-z]\w*)?\.jar$")


def artifact(jar: str) -> str:
    """A jar file's artifact name without its version: kafka-clients-3.9.2.jar -> kafka-clients."""
    found = VERSIONED.match(jar)
    return found.group("artifact") if found else jar


def spark_jars() -> set[str]:
    """The artifacts the pyspark package ships."""
    import pyspark

    return {artifact(path.name) for path in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def fetch(part: str) -> int:
    """Fetch one part into its folder; returns the number of jars kept."""
    target = jars.folder(part)
    maven = shutil.which("mvn")
    if maven is None:
        raise SystemExit("fetch_jars.py: Maven (mvn) is needed to fetch the Kafka jars (apt-get install maven)")
    with tempfile.TemporaryDirectory(prefix="sscript-jars-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(POM.format(part=part, dependencies="\n".join(
            DEPENDENCY.format(*coordinate.split(":")) for coordinate in jars.PARTS[part])))
        copied = Path(work) / "jars"
        done = subprocess.run([maven, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                               f"-DoutputDirectory={copied}", "-DincludeScope=runtime"],
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"fetch_jars.py: Maven could not fetch {', '.join(jars.PARTS[part])}:\n"
                             f"{(done.stdout + done.stderr)[-3000:]}")
        found = sorted(copied.glob("*.jar"))
        if part == "kafka-connector":  # what Spark has already stays Spark's
            present = spark_jars()
            found = [jar for jar in found if artifact(jar.name) not in present]
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for jar in found:
            shutil.copy2(jar, target / jar.name)
    (target / jars.STAMP).write_text("\n".join(jars.PARTS[part]) + "\n")
    return len(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fetch nothing; say what is there")
    args = parser.parse_args()
    missing = 0
    for part in jars.PARTS:
        if jars.fetched(part):
            print(f"{part}: {len(jars.jars(part))} jars in {jars.folder(part)}")
        elif args.check:
            print(f"{part}: missing ({jars.why_no(part)})")
            missing += 1
        else:
            print(f"{part}: fetched {fetch(part)} jars into {jars.folder(part)}", flush=True)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
