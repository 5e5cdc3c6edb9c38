"""Generated jobs: golden files pin them; they are deterministic and valid Python."""

import ast
import subprocess
import sys

from sensorscript.codegen.job import render_job
from sensorscript.compiler import compile_workflows
from sensorscript.parser import load
from sensorscript.partition.plan import make_plan
from sensorscript.registry import SensorRegistry
from tests.conftest import ROOT

EXAMPLES = [ROOT / "workflows" / n for n in ("bridge.ss", "bridge_limits.ss", "deck_vibration.ss")]


def rendered(files, partitions: int) -> str:
    loaded = load([str(f) for f in files])
    plan = make_plan(loaded.workflows, SensorRegistry.open(ROOT / "workflows" / "sensors.csv"), partitions)
    sources = {str(f): f.read_text() for f in files}
    return render_job(plan, sources, "out/demo")


def test_golden_job_of_the_examples(golden):
    golden("jobs/examples.n2.job.py", rendered(EXAMPLES, 2))


PIER = [ROOT / "workflows" / n for n in ("pier_alarms.ss", "pier_report.ss")]


def test_golden_job_of_the_pier_patterns(golden):
    """Operator trees in the job: conditions with their text, shapes compared, the stream names of
    matches, a pattern partitioned by sensor running on both partitions."""
    golden("jobs/pier.n2.job.py", rendered(PIER, 2))


def test_golden_job_of_the_bridge_alone(golden):
    golden("jobs/bridge.n1.job.py", rendered([ROOT / "workflows" / "bridge.ss"], 1))


def test_jobs_are_deterministic_and_valid_python():
    first, second = rendered(EXAMPLES, 3), rendered(EXAMPLES, 3)
    assert first == second
    tree = ast.parse(first)
    names = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name)}
    assert {"SENSORS", "BUCKET_KEYS", "JOB", "PARTITION_0", "PARTITION_1", "PARTITION_2"} <= names
    assert max(len(line) for line in first.splitlines()) <= 160


def test_every_computation_names_its_script_lines():
    job = rendered(EXAMPLES, 2)
    for path in EXAMPLES:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("//")[0].strip()
            if "=" in code and not code.startswith(("/*", "*")):
                assert f"{path.name}:{number}  {code}" in job, (path.name, number)
    assert "(one computation, shared by 2 workflows)" in job


def test_job_help_works_on_its_own(tmp_path):
    compile_workflows([str(f) for f in EXAMPLES], tmp_path / "out")
    result = subprocess.run([sys.executable, str(tmp_path / "out" / "job.py"), "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--input" in result.stdout and "--once" in result.stdout


def test_no_line_of_the_job_grows_with_the_number_of_workflows():
    """At hundreds of workflows, job.py lists them one a line (as a formatter would), never all on one."""
    from sensorscript.workload import bridge_workload

    workload = bridge_workload(300, 200)
    texts = {f"{name}.ss": text for name, text in workload.workflows.items()}
    loaded = load(list(texts), texts=texts)
    job = render_job(make_plan(loaded.workflows, SensorRegistry.of(workload.sensors), 2), texts, "out/demo")
    assert max(len(line) for line in job.splitlines()) < 200
    assert '    workflows=(\n        "wf0000",\n        "wf0001",\n' in job
    ast.parse(job)
