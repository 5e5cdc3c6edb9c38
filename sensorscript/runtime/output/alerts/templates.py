"""A webhook's body made by the user's Jinja template (`--alerts-template FILE`) from the alarm's
JSON object (`alarm.summary`, `alarm.events`, ...): Slack, Teams, ntfy (docs/alerts/*.j2). A template
that does not load or render is one sentence of the user's.
"""

from __future__ import annotations

from pathlib import Path


def load_template(path: str):
    import jinja2

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"--alerts-template {path}: {exc.strerror or exc}") from None
    try:
        return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False).from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"--alerts-template {path}, line {exc.lineno}: {exc.message}") from None


def render(template, alarm: dict) -> str:
    """A webhook's body from the template: `alarm` is the JSON object (alarm.summary, alarm.events, ...)."""
    import jinja2

    try:
        return template.render(alarm=alarm)
    except jinja2.TemplateError as exc:
        raise ValueError(f"--alerts-template: {exc}") from None
