"""Shared fixtures. Spark fixtures (one local[2] session per run) are added by the Spark tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
