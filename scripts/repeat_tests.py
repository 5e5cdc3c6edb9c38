#!/usr/bin/env python3
"""Run tests K times, each time in a fresh pytest process, and print each test's pass rate.

    .venv/bin/python scripts/repeat_tests.py 10 tests/test_dashboard.py tests/test_restart.py::test_kill
    .venv/bin/python scripts/repeat_tests.py 10 tests/test_alerts.py -- -k delivery

A test that passes in some runs and fails in others is flaky: a defect of the test or of the product,
never of the machine (CI runs on a loaded 2-core machine too). Each run is one pytest process over all
the tests named (one SparkSession, as CI has); what each run said of each test is read from pytest's
JUnit XML. The table (markdown) goes to standard output, a line per run to standard error; the exit
code is 1 when any test failed in any run. With `--ci` each run has CI=true (a missing peer fails).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ungrouped(test: str) -> str:
    """A test's id without the group pytest-xdist appends under --dist loadgroup ("...::test_y@GROUP")."""
    head, bracket, tail = test.rpartition("]")
    return head + bracket + tail.rpartition("@")[0] if "@" in tail.rpartition("::")[2] else test


def outcomes(report: Path) -> dict[str, str]:
    """test id -> passed, failed or skipped, from pytest's JUnit XML."""
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        name = ungrouped(f"{module}.py::{case.get('name')}" if module else case.get("name", ""))
        if case.find("failure") is not None or case.find("error") is not None:
            found[name] = "failed"
        elif case.find("skipped") is not None:
            found[name] = "skipped"
        else:
            found[name] = "passed"
    return found


def repeat(times: int, tests: list[str], extra: list[str], ci: bool) -> tuple[dict[str, dict[str, int]], list[float]]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seconds = []
    env = dict(os.environ, CI="true") if ci else dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="repeat-tests-") as scratch:
        for run in range(1, times + 1):
            report = Path(scratch) / f"run{run}.xml"
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                                   *extra, *tests], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
            seconds.append(time.monotonic() - started)
            said = outcomes(report) if report.exists() else {}
            for test, outcome in said.items():
                counts[test][outcome] += 1
            failed = sorted(t for t, o in said.items() if o == "failed")
            print(f"run {run}/{times}: {len(said)} tests, {len(failed)} failed, {seconds[-1]:.0f} s"
                  + (f": {', '.join(failed)}" if failed else ""), file=sys.stderr, flush=True)
            if not said:
                print(done.stdout[-3000:], file=sys.stderr)
    return counts, seconds


def table(counts: dict[str, dict[str, int]], times: int) -> str:
    lines = ["| test | passed | failed | skipped |", "|---|---|---|---|"]
    for test in sorted(counts):
        c = counts[test]
        lines.append(f"| `{test}` | {c['passed']}/{times} | {c['failed']} | {c['skipped']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("times", type=int, help="how many fresh runs")
    parser.add_argument("tests", nargs="+", help="pytest node ids or files")
    parser.add_argument("--ci", action="store_true", help="run with CI=true (a missing browser or broker fails)")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    counts, seconds = repeat(args.times, args.tests, extra, args.ci)
    print(table(counts, args.times))
    print(f"\n{args.times} runs, {min(seconds):.0f}-{max(seconds):.0f} s each")
    flaky = [t for t, c in counts.items() if c["failed"]]
    return 1 if flaky or not counts else 0


if __name__ == "__main__":
    sys.exit(main())
