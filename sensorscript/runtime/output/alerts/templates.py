"""A webhook's body made by the user's Jinja template (`--alerts-template FILE`) from the alarm's
JSON object (`alarm.summary`, `alarm.events`, ...): Slack, Teams, ntfy (docs/alerts/*.j2). A template
that does not load or render is one sentence of the user's.

A template runs in Jinja's sandbox (no attributes of Python's internals), and what it prints is JSON:
`|tojson` as it is, a string as a JSON string's content, None, True and False as null, true, false.
So a sensor id holding quotes stays inside its string even in a template written without `|tojson`.
"""

from __future__ import annotations

import json
from pathlib import Path


def _json_safe(value):
    """What `{{ ... }}` prints."""
    from markupsafe import Markup

    if isinstance(value, Markup):  # |tojson: JSON already
        return value
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return json.dumps(value) if value == value and abs(value) != float("inf") else "null"
    return json.dumps(str(value))[1:-1]


def load_template(path: str):
    import jinja2

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"--alerts-template {path}: {exc.strerror or exc}") from None
    from jinja2.sandbox import SandboxedEnvironment

    try:
        return SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                                    finalize=_json_safe).from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"--alerts-template {path}, line {exc.lineno}: {exc.message}") from None


def render(template, alarm: dict) -> str:
    """A webhook's body from the template: `alarm` is the JSON object (alarm.summary, alarm.events, ...)."""
    import jinja2

    try:
        return template.render(alarm=alarm)
    except jinja2.TemplateError as exc:
        raise ValueError(f"--alerts-template: {exc}") from None
