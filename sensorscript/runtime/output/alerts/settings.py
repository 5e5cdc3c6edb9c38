"""What the run is told about its alarms (`sscript run --alerts URL... --alerts-for ...
--alerts-timeout ... --alerts-template ...`): where they go (`Target`: webhooks at http(s)://, MQTT
topics at mqtt(s)://, or env:VARIABLE / file:PATH naming a variable or a file that holds one) and for
which workflows, checked before the run starts.

A URL on the command line shows in `ps` and the shell's history, so one holding a credential (a
user or password, a token in its query) is refused: secrets come from env: or file:. A target is
shown and stored by its `key` alone, which never holds a secret (redaction.redacted).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from sensorscript.redaction import redacted, redacted_text
from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts.payload import example
from sensorscript.runtime.output.alerts.templates import load_template, render
from sensorscript.runtime.plan.program import Job

LIMIT = 100_000  # alarms waiting at most; beyond, new ones are counted, not kept
TIMEOUT_S = 60.0  # --once: how long the run waits for its alarms to be delivered (--alerts-timeout)
ENV = "env:"  # --alerts env:VARIABLE: the URL is in that environment variable (a Slack URL is a secret)
FILE = "file:"  # --alerts file:PATH: the URL is in that file
# Query parameters that carry a credential (?token=, ?api_key=, ?sig=, ...).
_CREDENTIAL = re.compile(r"token|key|secret|pass|auth|sig|credential|session|code", re.IGNORECASE)


@dataclass(frozen=True)
class Target:
    """Where alarms go. `key` names it in the outbox, in status and in the run's output: env:VARIABLE
    or file:PATH, or the URL without its query (never a secret a variable, a file or a query holds)."""

    key: str
    url: str

    @property
    def kind(self) -> str:
        return "mqtt" if self.url.startswith(("mqtt://", "mqtts://")) else "http"

    @staticmethod
    def parse(given: str, environ=os.environ) -> "Target":
        if given.startswith((ENV, FILE)):
            url = _held(given, environ)
        else:
            url = given
            _refuse_credentials(given)
        try:
            _check_address(url)
        except ValueError as exc:  # the address may be a secret: say it redacted
            said = str(exc).removeprefix(f"{url}: ")
            raise ValueError(f"--alerts {redacted(given)}: {redacted_text(said)}") from None
        return Target(given if given.startswith((ENV, FILE)) else redacted(given), url)


def _held(given: str, environ) -> str:
    """The URL an env:VARIABLE or a file:PATH holds."""
    if given.startswith(ENV):
        name = given[len(ENV):]
        url = environ.get(name, "").strip()
        if not url:
            raise ValueError(f"--alerts {given}: the environment variable {name} is not set (it should hold the "
                             f"URL to deliver alarms to)")
        return url
    path = given[len(FILE):]
    try:
        url = Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--alerts {given}: cannot read the file ({getattr(exc, 'strerror', None) or exc})") from None
    if not url:
        raise ValueError(f"--alerts {given}: the file is empty (it should hold the URL to deliver alarms to)")
    return url


def _refuse_credentials(url: str) -> None:
    """A webhook's URL given on the command line holds no user, password or token (an MQTT address
    may name its user: the password comes from the environment, mqtt.PASSWORD_VARIABLE)."""
    if not url.startswith(("http://", "https://")):
        return
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return  # _check_address says what is wrong with it
    if parts.username is not None or parts.password is not None or any(_CREDENTIAL.search(k) for k, _ in query):
        raise ValueError(f"--alerts {redacted(url)}: a user, password or token in the URL shows in `ps`, the "
                         f"shell's history and the run's status; put the URL in an environment variable or a "
                         f"file readable by you alone and give --alerts env:VARIABLE or --alerts file:PATH")


def _check_address(url: str) -> None:
    if url.startswith(("mqtt://", "mqtts://")):
        address = mqtt.Address.parse(url, "an MQTT target for alarms")
        if "+" in address.topic or "#" in address.topic:
            raise ValueError(f"alarms are published to one topic; {address.topic} has a wildcard")
    elif url.startswith(("http://", "https://")):
        if not urlsplit(url).hostname:
            raise ValueError("the host is missing")
    else:
        raise ValueError("alarms go to http(s)://... (a webhook), mqtt(s)://HOST[:PORT]/TOPIC, or env:VARIABLE or "
                         "file:PATH naming an environment variable or a file that holds one")


@dataclass(frozen=True)
class AlertSettings:
    """`--alerts URL... [--alerts-for WORKFLOW,...] [--alerts-timeout 60s] [--alerts-template FILE]`;
    `tls`: the MQTT TLS files (the run's --mqtt-ca/--mqtt-cert/--mqtt-key)."""

    targets: tuple[str, ...]
    workflows: tuple[str, ...] = ()  # none: every workflow's alarms
    timeout_s: float = TIMEOUT_S
    template: str | None = None
    tls: mqtt.Tls = mqtt.Tls()
    limit: int = LIMIT
    plain_password: bool = False  # the run's --mqtt-plain-password: a broker's password may cross in plain

    @property
    def login(self) -> mqtt.Login:
        """The alarms' brokers' password: a variable of their own, not the source's."""
        return mqtt.Login(mqtt.ALERTS_PASSWORD_VARIABLE, self.plain_password)

    @staticmethod
    def of(targets, workflows=(), timeout: str | None = None, template: str | None = None,
           tls: mqtt.Tls = mqtt.Tls(), plain_password: bool = False) -> "AlertSettings":
        """From the command line: --alerts (repeated), --alerts-for (comma-separated, repeated),
        --alerts-timeout (a duration: 60s, 5min), --alerts-template."""
        from sensorscript.times import duration_ms

        names = tuple(sorted({w.strip() for given in workflows or () for w in given.split(",") if w.strip()}))
        seconds = duration_ms(timeout, "--alerts-timeout") / 1000 if timeout else TIMEOUT_S
        return AlertSettings(tuple(targets), names, seconds, template, tls, plain_password=plain_password)

    def check(self, job: Job | None = None, environ=os.environ) -> list[Target]:
        """The targets, or ValueError in the user's words: before the run starts."""
        targets = [Target.parse(t, environ) for t in self.targets]
        keys = [t.key for t in targets]
        if len(set(keys)) < len(keys):
            raise ValueError("--alerts: a target is given twice")
        for target in targets:
            if target.kind == "mqtt":
                try:
                    self.login.password(mqtt.Address.parse(target.url), environ)
                except ValueError as exc:
                    said = str(exc).split(": ", 1)[1]
                    raise ValueError(f"--alerts {target.key}: {said}") from None
        if job is not None:
            unknown = sorted(set(self.workflows) - set(job.workflows))
            if unknown:
                raise ValueError(f"--alerts-for {','.join(unknown)}: no such workflow in this job "
                                 f"(its workflows: {', '.join(job.workflows)})")
        if self.template is not None:
            render(load_template(self.template), example())  # a template that cannot render fails now
        return targets
