"""What the run is told about its alarms (`sscript run --alerts URL... --alerts-for ...
--alerts-timeout ... --alerts-template ... --alerts-group-by ... --alerts-group-wait ...`): where they
go (`Target`: webhooks at http(s)://, MQTT topics at mqtt(s)://, Kafka topics at kafka://, a
PostgreSQL database's `alarms` table at postgresql://, or env:VARIABLE / file:PATH naming a variable
or a file that holds one), for which workflows and how grouped, checked before the run
starts. The settings are part of the job: kept in OUT/alerts/settings.json (`save`, `load`), so a run
without --alerts, `sscript correct`, `sscript backfill` and `sscript alerts deliver` deliver to the
targets the last run named (`--alerts none` forgets them).

A URL on the command line shows in `ps` and the shell's history, so one holding a credential (a
user or password, a token in its query) is refused: secrets come from env: or file:. A target is
shown and stored by its `key` alone, which never holds a secret (redaction.redacted).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from sensorscript.redaction import redacted, redacted_text
from sensorscript.runtime.ingest import kafka, mqtt
from sensorscript.runtime.output.alerts.payload import example
from sensorscript.runtime.output.alerts.templates import load_template, render, routing_key
from sensorscript.runtime.output.postgres_sink import PREFIXES as POSTGRES, Address as PostgresAddress
from sensorscript.runtime.plan.loading import not_yours
from sensorscript.runtime.plan.program import Job

LIMIT = 100_000  # alarms waiting at most; beyond, new ones are counted, not kept
TIMEOUT_S = 60.0  # --once: how long the run waits for its alarms to be delivered (--alerts-timeout)
GROUP_BY, GROUPINGS = "workflow", ("workflow", "stream", "none")  # --alerts-group-by
GROUP_WAIT_S = 2.0  # --alerts-group-wait: how long a group's first alarm waits for others to go with it
NONE = "none"  # --alerts none: the targets kept in OUT are forgotten
SETTINGS = "settings.json"  # OUT/alerts/settings.json
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
        return ("mqtt" if self.url.startswith(("mqtt://", "mqtts://")) else
                "kafka" if self.url.startswith(kafka.PREFIX) else
                "postgresql" if self.url.startswith(POSTGRES) else "http")

    @staticmethod
    def key_of(given: str) -> str:
        """A target's key as given, without reading what an env: or file: names."""
        return given if given.startswith((ENV, FILE)) else redacted(given)

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
        return Target(Target.key_of(given), url)


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
        doubt = not_yours(Path(path))
        if doubt:
            raise ValueError(f"--alerts {given}: {doubt}; whoever can change it decides where the alarms go")
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
    elif url.startswith(kafka.PREFIX):
        address = kafka.Address.parse(url)
        if len(address.topics) != 1:
            raise ValueError(f"alarms are produced to one topic, not {len(address.topics)}")
    elif url.startswith(POSTGRES):
        try:  # the sink's own rules: a user, never a password (PGPASSWORD, ~/.pgpass)
            PostgresAddress.parse(url)
        except ValueError as exc:
            raise ValueError(str(exc).replace(f"--sink {url}: ", "").replace("--sink: ", "")
                             .replace("a PostgreSQL sink", "a PostgreSQL target")
                             .replace("[USER@]HOST[:PORT]", "HOST")) from None
    elif url.startswith(("http://", "https://")):
        if not urlsplit(url).hostname:
            raise ValueError("the host is missing")
    else:
        raise ValueError("alarms go to http(s)://... (a webhook), mqtt(s)://HOST[:PORT]/TOPIC, "
                         "kafka://HOST:PORT/TOPIC, postgresql://[USER@]HOST[:PORT]/DB (its alarms table), or env:VARIABLE or file:PATH naming an environment variable or a "
                         "file that holds one")


@dataclass(frozen=True)
class AlertSettings:
    """`--alerts URL... [--alerts-for WORKFLOW,...] [--alerts-timeout 60s] [--alerts-template NAME|FILE]
    [--alerts-group-by workflow|stream|none] [--alerts-group-wait 2s]`; `tls`: the MQTT TLS files (the
    run's --mqtt-ca/--mqtt-cert/--mqtt-key)."""

    targets: tuple[str, ...]
    workflows: tuple[str, ...] = ()  # none: every workflow's alarms
    timeout_s: float = TIMEOUT_S
    template: str | None = None  # a built-in template's name (templates.BUILT_IN) or a file's absolute path
    tls: mqtt.Tls = mqtt.Tls()
    limit: int = LIMIT
    plain_password: bool = False  # the run's --mqtt-plain-password: a broker's password may cross in plain
    group_by: str = GROUP_BY
    group_wait_s: float = GROUP_WAIT_S
    kafka_options: tuple[str, ...] = ()  # the run's --kafka-option (a secret as env:NAME): kafka:// targets

    @property
    def login(self) -> mqtt.Login:
        """The alarms' brokers' password: a variable of their own, not the source's."""
        return mqtt.Login(mqtt.ALERTS_PASSWORD_VARIABLE, self.plain_password)

    @staticmethod
    def of(targets, workflows=(), timeout: str | None = None, template: str | None = None,
           tls: mqtt.Tls = mqtt.Tls(), plain_password: bool = False, group_by: str | None = None,
           group_wait: str | None = None, kafka_options: tuple[str, ...] = ()) -> "AlertSettings":
        """From the command line: --alerts (repeated), --alerts-for (comma-separated, repeated),
        --alerts-timeout and --alerts-group-wait (durations: 60s, 5min, 0s), --alerts-template,
        --alerts-group-by."""
        from sensorscript.runtime.output.alerts.templates import BUILT_IN
        from sensorscript.times import duration_ms

        names = tuple(sorted({w.strip() for given in workflows or () for w in given.split(",") if w.strip()}))
        seconds = duration_ms(timeout, "--alerts-timeout") / 1000 if timeout else TIMEOUT_S
        if group_by is not None and group_by not in GROUPINGS:
            raise ValueError(f"--alerts-group-by {group_by}: one of {', '.join(GROUPINGS)}")
        wait = duration_ms(group_wait, "--alerts-group-wait") / 1000 if group_wait else GROUP_WAIT_S
        if template is not None and template not in BUILT_IN:
            template = str(Path(template).resolve())  # kept in OUT: it must mean the same file from elsewhere
        targets = [FILE + str(Path(t[len(FILE):]).resolve()) if t.startswith(FILE) else t for t in targets]
        tls = mqtt.Tls(*(str(Path(f).resolve()) if f else f for f in (tls.ca, tls.cert, tls.key)))
        return AlertSettings(tuple(targets), names, seconds, template, tls, plain_password=plain_password,
                             group_by=group_by or GROUP_BY, group_wait_s=wait, kafka_options=tuple(kafka_options))

    def save(self, out: Path) -> None:
        """Kept in OUT: the targets as given (env:, file: or a URL that holds no secret), never a secret."""
        from sensorscript.atomic import write_text

        folder = Path(out) / "alerts"
        folder.mkdir(parents=True, exist_ok=True)
        fields = asdict(self)
        fields["tls"] = asdict(self.tls)
        write_text(folder / SETTINGS, json.dumps(fields, indent=1) + "\n")

    @staticmethod
    def load(out: Path) -> "AlertSettings | None":
        """The settings the last run with --alerts kept in OUT, or None."""
        path = Path(out) / "alerts" / SETTINGS
        if not path.exists():
            return None
        fields = json.loads(path.read_text())
        fields["targets"], fields["workflows"] = tuple(fields["targets"]), tuple(fields["workflows"])
        fields["kafka_options"] = tuple(fields.get("kafka_options", ()))
        fields["tls"] = mqtt.Tls(**fields["tls"])
        return AlertSettings(**fields)

    @staticmethod
    def forget(out: Path) -> None:
        (Path(out) / "alerts" / SETTINGS).unlink(missing_ok=True)

    def check(self, job: Job | None = None, environ=os.environ) -> list[Target]:
        """The targets, or ValueError in the user's words: before the run starts."""
        targets = [Target.parse(t, environ) for t in self.targets]
        keys = [t.key for t in targets]
        if len(set(keys)) < len(keys):
            raise ValueError("--alerts: a target is given twice")
        for target in targets:
            if target.kind == "kafka":
                kafka.producer_options(self.kafka_options, environ)
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
            template = load_template(self.template)
            render(template, example(), {"workflow": "pier_alarms"}, "workflow=pier_alarms",
                   routing_key(template, environ))  # a template that cannot render fails now
        return targets
