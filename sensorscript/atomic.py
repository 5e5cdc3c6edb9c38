"""Files that a reader, or the next run after a kill, never sees half written: the text goes to a
temporary file beside the target and is renamed over it (a rename within a folder is atomic)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path


def write_text(path: Path | str, text: str) -> None:
    """Replace `path` with `text` at once: the old content or the new, never a part."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def write_json(path: Path | str, value, **dumps) -> None:
    """`value` as JSON (and a newline) in `path`, replaced at once; `dumps`: json.dumps' options."""
    write_text(path, json.dumps(value, **dumps) + "\n")
