"""What the run is told about its alarms (`sscript run --alerts URL... --alerts-for ...
--alerts-timeout ... --alerts-template ...`): where they go (`Target`: webhooks at http(s)://, MQTT
topics at mqtt(s)://, or env:VARIABLE naming a variable that holds one) and for which workflows,
checked before the run starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from sensorscript.runtime.ingest import mqtt
from sensorscript.runtime.output.alerts.payload import example
from sensorscript.runtime.output.alerts.templates import load_template, render
from sensorscript.runtime.plan.program import Job

LIMIT = 100_000  # alarms waiting at most; beyond, new ones are counted, not kept
TIMEOUT_S = 60.0  # --once: how long the run waits for its alarms to be delivered (--alerts-timeout)
ENV = "env:"  # --alerts env:VARIABLE: the URL is in that environment variable (a Slack URL is a secret)


@dataclass(frozen=True)
class Target:
    """Where alarms go. `key` names it in the outbox and in status (the URL as given, or env:VARIABLE:
    never the secret a variable holds)."""

    key: str
    url: str

    @property
    def kind(self) -> str:
        return "mqtt" if self.url.startswith(("mqtt://", "mqtts://")) else "http"

    @staticmethod
    def parse(given: str, environ=os.environ) -> "Target":
        url = given
        if given.startswith(ENV):
            name = given[len(ENV):]
            url = environ.get(name, "")
            if not url:
                raise ValueError(f"--alerts {given}: the environment variable {name} is not set (it should hold the "
                                 f"URL to deliver alarms to)")
        if url.startswith(("mqtt://", "mqtts://")):
            address = mqtt.Address.parse(url, "an MQTT target for alarms")
            if "+" in address.topic or "#" in address.topic:
                raise ValueError(f"--alerts {given}: alarms are published to one topic; {address.topic} has a wildcard")
        elif url.startswith(("http://", "https://")):
            if not urlsplit(url).hostname:
                raise ValueError(f"--alerts {given}: the host is missing")
        else:
            raise ValueError(f"--alerts {given}: alarms go to http(s)://... (a webhook), mqtt(s)://HOST[:PORT]/TOPIC, "
                             f"or env:VARIABLE naming an environment variable that holds one")
        return Target(given, url)


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

    @staticmethod
    def of(targets, workflows=(), timeout: str | None = None, template: str | None = None,
           tls: mqtt.Tls = mqtt.Tls()) -> "AlertSettings":
        """From the command line: --alerts (repeated), --alerts-for (comma-separated, repeated),
        --alerts-timeout (a duration: 60s, 5min), --alerts-template."""
        from sensorscript.times import duration_ms

        names = tuple(sorted({w.strip() for given in workflows or () for w in given.split(",") if w.strip()}))
        seconds = duration_ms(timeout, "--alerts-timeout") / 1000 if timeout else TIMEOUT_S
        return AlertSettings(tuple(targets), names, seconds, template, tls)

    def check(self, job: Job | None = None, environ=os.environ) -> list[Target]:
        """The targets, or ValueError in the user's words: before the run starts."""
        targets = [Target.parse(t, environ) for t in self.targets]
        keys = [t.key for t in targets]
        if len(set(keys)) < len(keys):
            raise ValueError("--alerts: a target is given twice")
        if job is not None:
            unknown = sorted(set(self.workflows) - set(job.workflows))
            if unknown:
                raise ValueError(f"--alerts-for {','.join(unknown)}: no such workflow in this job "
                                 f"(its workflows: {', '.join(job.workflows)})")
        if self.template is not None:
            render(load_template(self.template), example())  # a template that cannot render fails now
        return targets
