"""A webhook's body made by a Jinja template (`--alerts-template NAME|FILE`) from the alarms of one
request: built in (templates/alerts/NAME.j2: alertmanager, pagerduty, slack, teams, ntfy) or the
user's file. A template that does not load or render is one sentence of the user's.

A template that names `alarms` renders a group (one request for up to MAX_GROUP of them, with
`group`: its labels, `group_key` and `status`: firing while any of them is not resolved); one that
names only `alarm` renders one alarm a request (PagerDuty's Events API takes one event a request).
`routing_key` is the environment's ROUTING_KEY_VARIABLE (PagerDuty's integration key: a secret).

A template runs in Jinja's sandbox (no attributes of Python's internals), and what it prints is JSON:
`|tojson` as it is, a string as a JSON string's content, None, True and False as null, true, false.
So a sensor id holding quotes stays inside its string even in a template written without `|tojson`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from sensorscript.resources import templates_folder
from sensorscript.runtime.plan.loading import not_yours

BUILT_IN = ("alertmanager", "pagerduty", "slack", "teams", "ntfy")  # templates/alerts/NAME.j2
ROUTING_KEY_VARIABLE = "SSCRIPT_ALERTS_ROUTING_KEY"
MAX_GROUP = 100  # alarms in one body a group template renders


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


@dataclass(frozen=True)
class Template:
    """A loaded template: `group` when it renders several alarms in one body (it names `alarms`)."""

    name: str
    jinja: object
    group: bool
    routing_key: bool  # it names `routing_key`


def template_path(name: str) -> Path:
    """A built-in template's file, or the user's file as given."""
    return templates_folder() / "alerts" / f"{name}.j2" if name in BUILT_IN else Path(name)


def load_template(name: str) -> Template:
    import jinja2
    from jinja2 import meta
    from jinja2.sandbox import SandboxedEnvironment

    try:
        path = template_path(name)
        doubt = None if name in BUILT_IN else not_yours(path)
        if doubt:
            raise ValueError(f"--alerts-template {name}: {doubt}; whoever can change it writes the alarms' bodies")
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"--alerts-template {name}: {exc.strerror or exc} (a file, or one of the built-in "
                         f"templates: {', '.join(BUILT_IN)})") from None
    environment = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                                       finalize=_json_safe)
    try:
        tree = environment.parse(text)
        names = meta.find_undeclared_variables(tree)
        jinja = environment.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"--alerts-template {name}, line {exc.lineno}: {exc.message}") from None
    if list(meta.find_referenced_templates(tree)):
        raise ValueError(f"--alerts-template {name}: a template is one file; {{% include %}}, {{% import %}} and "
                         f"{{% extends %}} would read others, which the job does not load")
    return Template(name, jinja, "alarms" in names, "routing_key" in names)


def routing_key(template: Template, environ=os.environ) -> str | None:
    """The routing key a template names, or ValueError when the environment holds none."""
    if not template.routing_key:
        return None
    key = environ.get(ROUTING_KEY_VARIABLE, "").strip()
    if not key:
        raise ValueError(f"--alerts-template {template.name}: the template sends a routing key (PagerDuty's "
                         f"integration key); set the environment variable {ROUTING_KEY_VARIABLE} to it")
    return key


def context(alarms: list[dict], group: dict, group_key: str, key: str | None = None) -> dict:
    """What a template sees of one request."""
    firing = any(alarm["state"] != "resolved" for alarm in alarms)
    return {"alarms": alarms, "alarm": alarms[0], "group": group, "group_key": group_key,
            "status": "firing" if firing else "resolved", "routing_key": key}


def render(template: Template, alarms: list[dict] | dict, group: dict | None = None, group_key: str = "",
           key: str | None = None) -> str:
    """A webhook's body from the template, for these alarms (one alarm: a list of one)."""
    import jinja2

    alarms = [alarms] if isinstance(alarms, dict) else alarms
    try:
        return template.jinja.render(**context(alarms, group or {}, group_key, key))
    except jinja2.TemplateError as exc:
        raise ValueError(f"--alerts-template: {exc}") from None
