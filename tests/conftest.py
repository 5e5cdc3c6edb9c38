"""Shared fixtures. Spark fixtures (one local[2] session per run) are added by the Spark tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import costs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from repeat_tests import ungrouped  # noqa: E402  (a test's id without the group xdist appends to it)
EXAMPLES = sorted((ROOT / "workflows").glob("*.ss"))


@pytest.fixture
def write_scripts(tmp_path):
    """Write {name: text} as NAME.ss files (dbt-style fixture strings); returns their paths."""

    def write(scripts: dict[str, str]) -> list[str]:
        paths = []
        for name, text in scripts.items():
            path = tmp_path / f"{name}.ss"
            path.write_text(text)
            paths.append(str(path))
        return paths

    return write


def need(reason: str | None, tests: str) -> None:
    """A test's first line where it needs a peer the machine may lack (`reason`: why it cannot run,
    None when it can): skip, but fail in CI (CI=true), where a missing peer must not quietly turn
    `tests` into skips."""
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {tests} cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def need_browser() -> None:
    """A browser test's first line (chromium drives the dashboard's browser tests): see `need`."""
    from sensorscript.dashboard.browser import why_no_browser

    need(why_no_browser(), "the browser tests")


@pytest.fixture
def browser_here():
    """For a test that drives chromium: see `need_browser`."""
    need_browser()


GOLDEN = ROOT / "tests" / "golden"


def pytest_addoption(parser):
    costs.add_options(parser)
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden files under tests/golden/ from the current output")


@pytest.fixture
def golden(request):
    """Compare text with tests/golden/NAME, or rewrite it with --update-golden."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--update-golden"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), f"no golden file {path}; run pytest --update-golden and review the diff"
        assert text == path.read_text(), f"{name} differs from its golden file; if intended, run " \
                                         f"pytest --update-golden and review the diff"

    return check


# Files whose tests make test hosts (a bridge with an address and veth pairs on this machine: scripts/
# netns.py) or drive chromium. A bridge coming up changes this machine's addresses, and chromium then
# fails its requests in flight (net::ERR_NETWORK_CHANGED; the CI of 1ac26d6 failed so once): they no
# longer meet, as a browser holds a lock shared that test hosts take exclusively while they change the
# network (sensorscript/dashboard/browser.py), so they may run on both workers at once.
NETWORK_FILES = {"test_hosts.py", "test_cluster_hosts.py", "test_dashboard.py", "test_dashboard_auth.py",
                 "test_scripts.py"}
# The groups that take longest, started first, longest first (scripts/test.sh passes --no-loadscope-reorder,
# so xdist hands out groups in the order of the tests): the scripts' smoke runs, the suite's SparkSession,
# the test hosts, the brokers, the standalone clusters, the kills (the wall times of the costs table,
# docs/TESTING.md). Started last, one of them would keep one worker busy long after the other ran out.
FIRST = ("test_scripts.py", "spark-session", "test_cluster_hosts.py", "test_kafka.py", "test_cluster.py",
         "test_postgres.py", "test_update_spark.py", "test_restart.py", "test_report.py", "test_hosts.py")


def pytest_configure(config):
    costs.register(config)  # where the suite's time goes, printed at the end of every run (tests/costs.py)


# The tiers (docs/TESTING.md): a test that needs a JVM or a server (Spark, a broker, a database, a
# browser, test hosts) is marked `server`, and the quick tier (scripts/test.sh --quick) runs the others.
# A test is marked by the fixtures it uses, by its file, or by hand (pytest.mark.server); one that starts
# a server unmarked fails (tests/costs.py), so the quick tier cannot quietly grow slow.
SERVER_FIXTURES = {"spark", "kafka", "broker", "postgres", "postgres_server", "browser_here", "hosts", "cluster"}
SERVER_MARKS = {"spark", "cluster", "server"}
SERVER_FILES = NETWORK_FILES


def needs_server(item) -> bool:
    return (bool(SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))) or item.path.name in SERVER_FILES
            or any(item.get_closest_marker(mark) for mark in SERVER_MARKS))


# The quick tier (scripts/test.sh --quick sets SSCRIPT_QUICK=1) draws a fifth of each random test's
# examples, ten at least; the full tier, which CI runs, draws them all.
QUICK_SHARE = 5


def quick_examples(items) -> None:
    """Under SSCRIPT_QUICK=1, each hypothesis test of `items` draws QUICK_SHARE times fewer examples
    (its explicit @example cases all the same)."""
    from hypothesis import settings

    for item in items:
        test = getattr(item, "function", None)
        drawn = getattr(test, "_hypothesis_internal_use_settings", None)
        if drawn is not None and not getattr(test, "_sscript_quick", False):
            test._hypothesis_internal_use_settings = settings(drawn, max_examples=max(10, drawn.max_examples
                                                                                   // QUICK_SHARE))
            test._sscript_quick = True


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks `server` (see SERVER_FIXTURES). Under pytest-xdist (scripts/test.sh runs two workers,
    `--dist loadgroup`): every test of the suite's one SparkSession runs on one worker, so that a run
    has one session, and the other tests go a file at a time (a module's fixtures, a cluster or a
    compiled fleet, are made once), the groups of FIRST first.

    First among the hooks: xdist reads a test's group in a hook of its own on each worker, and a group
    marked after that is ignored (`pytest_xdist_node_collection_finished` checks that it was not)."""
    for item in items:
        if needs_server(item):
            item.add_marker(pytest.mark.server)
        item.add_marker(pytest.mark.xdist_group(group(item)))
    items.sort(key=lambda item: FIRST.index(group(item)) if group(item) in FIRST else len(FIRST))
    if os.environ.get("SSCRIPT_QUICK") == "1":
        quick_examples(items)


def group(item) -> str:
    """The xdist group of a test: the suite's SparkSession for a test that uses it, else its file."""
    return "spark-session" if "spark" in getattr(item, "fixturenames", ()) else item.path.name


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """On the controller, under `--dist loadgroup`: stop the run unless xdist took each test's group (a
    worker sends it as a suffix of the test's id, "@GROUP"). When it does not, every test is scheduled
    alone: a module's cluster, broker or test hosts are made on both workers and the suite's one
    SparkSession becomes two, silently (pytest 9.2 drops the suffix: pytest-dev/pytest-xdist#1386)."""
    if node.config.getoption("dist") != "loadgroup":
        return
    lost = [nodeid for nodeid in ids if ungrouped(nodeid) == nodeid]
    if lost:
        pytest.exit(f"pytest-xdist did not take the group of {len(lost)} of {len(ids)} tests (the first: {lost[0]}): "
                    f"with pytest {pytest.__version__}, --dist loadgroup would schedule every test alone; install "
                    f"the versions pyproject.toml pins (scripts/setup.sh)", returncode=4)


@pytest.fixture(autouse=True)
def operators_registered_by_the_test_only(monkeypatch):
    """Pattern operators a test registers (its operators file, loaded by the compiler) are gone after it:
    the registry is the process's, and a test that expects a name unknown must not see one an earlier
    test of the same worker registered. A copy for the test, put back by monkeypatch (as
    tests/test_reference.py empties it for one test)."""
    from sensorscript.runtime.state.cep import operators

    monkeypatch.setattr(operators, "_registered", dict(operators._registered))


@pytest.fixture(scope="session")
def spark():
    """One local[2] Spark session for the whole test run, fitted like the jobs' own sessions."""
    import os
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sensorscript.runtime.control import jars
    from sensorscript.runtime.control.session import ARROW_BATCHES, extra_jvm_options

    session = (SparkSession.builder.master("local[2]").appName("sensorscript-tests")
               .config(map=jars.spark_options())  # Spark's Kafka connector: tests/test_kafka.py
               .config("spark.driver.extraJavaOptions", extra_jvm_options())
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
               .config(map=ARROW_BATCHES)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()


from tests.brokers import broker, kafka, postgres, postgres_server  # noqa: E402,F401  (real brokers and PostgreSQL: tests/brokers.py)
