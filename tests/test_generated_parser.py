"""The committed ANTLR parser must match the grammar."""

import hashlib
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

GENERATED = ROOT / "sensorscript" / "parser" / "_generated"


def test_stamp_matches_grammar():
    digest = hashlib.sha256((ROOT / "grammar" / "SensorScript.g4").read_bytes()).hexdigest()
    assert (GENERATED / "GRAMMAR_SHA256").read_text().strip() == digest, (
        "grammar/SensorScript.g4 changed: run python scripts/generate_parser.py")


@pytest.mark.server  # runs the ANTLR tool, a JVM (the quick tier leaves it out)
@pytest.mark.skipif(shutil.which("java") is None, reason="regenerating needs Java")
def test_regenerating_gives_the_committed_files():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_parser.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_only_one_module_imports_the_generated_code():
    importers = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "sensorscript").rglob("*.py")
        if "_generated" not in p.parts and "parser._generated" in p.read_text())
    assert importers == ["sensorscript/parser/antlr.py"]
