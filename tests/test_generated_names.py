"""Names that reach the generated job (issue #39, finding 1): workflow file names, sensor ids and
other strings of the scripts, operator file names. Each is written into job.py only as an escaped
literal or as comment and docstring text that cannot end its comment or docstring, so loading the
job as `run` does runs nothing the compiler did not mean to, and every name comes back unchanged."""

import ast
import os
import sys

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sensorscript.compiler import compile_workflows
from sensorscript.runtime.plan.loading import load_job

MARKER = "PWNED"
# What would end a docstring, a comment or a string literal, in Python or in an editor's eyes.
HOSTILE = ['"', '"""', "'", "'''", "\\", "\\n", "\n", "\r", "\u2028", "\u2029", "\x0b", "\x0c", "\x85", "\t",
           "#", "{{", "}}", "{%", "\u202e", "é", "\U0001f600", f'+__import__("os").system("touch {MARKER}")+']
# A file name holds no / and no NUL, and Linux allows at most 255 bytes; a script string no line break.
hostile = st.lists(st.sampled_from(HOSTILE) | st.text("abz_-. ", max_size=3), min_size=1, max_size=8).map("".join)
file_names = hostile.map(lambda s: s.replace("/", "_")).filter(lambda s: s.strip(". ") and len(s.encode()) < 200)
sensor_ids = hostile.filter(lambda s: s.strip() == s and s and not any(c in s for c in "\r\n,"))


OPERATORS = ("from sensorscript.runtime.state.cep.operators import BinaryOperator, register\n"
             "@register('soon_after')\n"
             "class SoonAfter(BinaryOperator):\n"
             "    def Q(self, left, right):\n"
             "        return left.end < right.start <= left.end + 5\n")


def _script_string(text: str) -> str:
    """`text` as a script's quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stem=file_names, sensor=sensor_ids, operators=file_names)
@example(stem='x"""+__import__("os").system("touch PWNED")+"""', sensor='S"1\\", "text": "x',
         operators="ops\nimport os; os.system('touch PWNED')\n#")
def test_hostile_names_load_as_names(tmp_path_factory, stem, sensor, operators):
    folder = tmp_path_factory.mktemp("hostile")
    script = folder / f"{stem}.ss"
    script.write_text(f"out_M = max({_script_string(sensor)}, 10, 10);  // {sensor}\n", encoding="utf-8")
    operator_file = folder / f"{operators}.py"
    operator_file.write_text(OPERATORS)
    compiled = compile_workflows([str(script)], folder / "out", operators=[str(operator_file)])
    source = (compiled.out / "job.py").read_text(encoding="utf-8")
    tree = ast.parse(source)  # a comment or docstring cut open by a name fails here or below
    here = os.getcwd()
    os.chdir(folder)  # where `touch PWNED` would write
    try:
        job = load_job(compiled.out).JOB
    finally:
        os.chdir(here)
        sys.modules.pop(f"sensorscript_operators_{operators}", None)
    assert not (folder / MARKER).exists()
    assert job.name == stem and job.workflows == (stem,)
    assert list(job.sensors) == [sensor]
    assert job.operator_files == (f"operators/{operators}.py",)
    assert f"    {stem}.ss: 1 statement(s)" in ast.get_docstring(tree, clean=False)
    # Every line of the file is Python's line: no name adds one, in Python's eyes or an editor's.
    assert source.splitlines() == source.split("\n")[:-1]
