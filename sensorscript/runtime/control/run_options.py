"""A run's options, declared once.

Each field of `RunSettings` is one option of a run: its name (`max_files_per_trigger` is
`--max-files-per-trigger`), its type (the field's annotation: a flag for `bool`, repeatable for a
tuple), its default, its help and how it reaches the job (`to_job`). From these entries are made
`sscript run`'s command line (cli.py), the job's own arguments (`job_parser`: job.py's `main`), and
the arguments `sscript run` gives the job, run with python or through spark-submit
(`RunSettings.job_arguments`, running.py). The run loop takes the settings as one object. As Spark
declares each configuration once (`SQLConf.buildConf`: its doc, type and default), an option
spelled here is spelled nowhere else.

What this module imports at its top stays small: the command line is made from it when `sscript`
starts. The checks of a value (a policy, a duration) import their modules when called.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# How an option reaches the job.
ARGUMENT = "argument"  # `sscript run` takes it and gives it to the job under its name (left out at its default)
PATH = "path"  # the same, an existing file, given as an absolute path: the job may run in another folder
SPARK_SUBMIT = "spark-submit"  # `sscript run`'s only: the job is submitted to this master, whose session it takes
JOB_ONLY = "job only"  # the job's own: `sscript run` has no such option, and the job takes its default

# A live query is stopped between two batches and started again after this many batches. Spark's
# RocksDB state store writes each batch's snapshot with the database's MANIFEST, which grows by a
# record a batch while the database stays open (186 bytes a batch, measured: at a batch a second a
# snapshot would hold 16 MB more of it every day, times the 100 snapshots kept, for each store);
# a new query opens every store anew from its last snapshot, and RocksDB writes a new, small
# MANIFEST. A start costs about a second (docs/BENCHMARKS.md, a year on one disk).
REFRESH_AFTER = 1_000

WATERMARK_HELP = ("Watermark policy per partition: fixed:DELAY (e.g. fixed:5s), adaptive:MAX_DELAY (waits up to "
                  "MAX_DELAY while the feed is out of order) or quality:EPS,DELTA (a buffer sized so that window "
                  "coverage meets the error bound); each may add ,ahead=DURATION (default 10min).")
LATE_HELP = ("Late readings: drop (counted only), log (kept in the late store beside the results) or "
             "correct[:GAMMA] (logged, every reading archived, and the results they touched recomputed and "
             "written again with a higher version once the pending late readings span GAMMA, default 5s).")
RETAIN_HELP = ("How long a store is kept: archive (raw readings for corrections, default 7d of event time: a late "
               "reading older than that is kept in the late store as too late to correct), late (30d), metrics "
               "(per batch, 1d of wall time, then per minute), metrics-minutes (90d), results (kept; e.g. "
               "results=365d expires them). DURATION: 30s, 15min, 12h, 7d or forever. Repeat for each store.")


def _alert_url(given: str) -> str:
    """The address an --alerts target names (what an env:VARIABLE or file:PATH holds), or the target
    as given where it cannot be read (the alarms' own check says why)."""
    from sensorscript.runtime.output.alerts.settings import Target

    try:
        return Target.parse(given).url
    except ValueError:
        return given


def check_template(given: str) -> str:
    """A built-in template's name, or an existing file's absolute path (the job may run in another folder)."""
    from sensorscript.runtime.output.alerts.templates import BUILT_IN

    if given in BUILT_IN:
        return given
    if not Path(given).is_file():
        raise ValueError(f"--alerts-template {given}: no such file, nor a built-in template ({', '.join(BUILT_IN)})")
    return str(Path(given).resolve())


def check_watermark(text: str) -> str:
    from sensorscript.runtime.state.watermark import parse_policy

    parse_policy(text)
    return text


def check_late(text: str) -> str:
    from sensorscript.runtime.state.watermark import parse_late_policy

    parse_late_policy(text)
    return text


def check_retain(text: str) -> str:
    from sensorscript.runtime.plan import retention

    retention.parse([text])
    return text


def check_input_cleanup(text: str) -> str:
    from sensorscript.runtime.ingest.source import check_input_cleanup

    return check_input_cleanup(text)


def check_kafka_start(text: str) -> str:
    from sensorscript.runtime.ingest.kafka import check_start

    return check_start(text)


def check_kafka_option(text: str) -> str:
    from sensorscript.runtime.ingest.kafka import check_option

    return check_option(text)


def option(default, help: str, *, to_job: str = ARGUMENT, metavar: str | None = None, choices: tuple[str, ...] = (),
           minimum: int | None = None, check: Callable[[str], str] | None = None, required: bool = False,
           positional: bool = False):
    """A field of `RunSettings` that is an option of the run (`RunOption` says what each part means)."""
    entry = dict(help=help, to_job=to_job, metavar=metavar, choices=choices, minimum=minimum, check=check,
                 required=required, positional=positional)
    return field(default=default, metadata={"option": entry})


@dataclass(frozen=True)
class RunSettings:
    """One run's settings: every option of `sscript run` and of the job, one field each."""

    out: Path | None = option(None, "The folder of the compiled job: its checkpoint, status and default results "
                                    "(the job's default: its own folder).", positional=True)
    input: str | None = option(None, "A folder of CSV/JSON-lines files, socket://HOST:PORT, "
                                     "mqtt://[USER@]HOST:PORT/TOPIC (mqtts:// for TLS; the password in the environment "
                                     "variable SSCRIPT_MQTT_PASSWORD) or kafka://HOST:PORT[,...]/TOPIC[,...].", required=True)
    once: bool = option(False, "Process what is there, emit every window, and stop.")
    fresh: bool = option(False, "Start afresh (the results are written anew) instead of continuing from the "
                                "checkpoint of the last run on OUT.")
    sink: str | None = option(None, "sqlite:PATH (default OUT/results.db), csv:PATH, parquet:PATH, console, or "
                                    "kafka://HOST:PORT[,...]/TOPIC (written by the executors; quarantine, late readings "
                                    "and metrics stay in OUT/results.db).")
    cluster: str | None = option(None, "Submit to a Spark cluster, e.g. spark://HOST:7077.", to_job=SPARK_SUBMIT,
                                 metavar="MASTER_URL")
    cluster_secret: str | None = option(None, "The secret a standalone cluster's master and workers were started "
                                              "with: a file only you may read, or env:NAME (never the secret "
                                              "itself). The driver and the cluster authenticate each other, and "
                                              "their traffic and spill files are encrypted.", to_job=SPARK_SUBMIT,
                                        metavar="FILE|env:NAME")
    cluster_unauthenticated: bool = option(False, "Submit to a standalone cluster that authenticates no one (whoever "
                                                  "reaches its master runs code as its workers' user; refused "
                                                  "otherwise).", to_job=SPARK_SUBMIT)
    master: str | None = option(None, "The Spark master (default: local[2], or the one spark-submit gives).",
                                to_job=JOB_ONLY, metavar="MASTER_URL")
    trigger_seconds: float = option(1.0, "The micro-batch interval when streaming, in seconds.", to_job=JOB_ONLY,
                                    metavar="SECONDS")
    max_files_per_trigger: int | None = option(None, "Bound each micro-batch to this many new files (a replay: files "
                                                     "are taken in modification-time order).", minimum=1, metavar="N")
    watermark: str | None = option(None, "This run's watermark policy instead of the compiled one. " + WATERMARK_HELP,
                                   metavar="POLICY", check=check_watermark)
    late: str | None = option(None, "This run's late policy instead of the compiled one. " + LATE_HELP,
                              metavar="drop|log|correct[:GAMMA]", check=check_late)
    retain: tuple[str, ...] = option((), "Instead of the compiled horizon; kept in the checkpoint for later runs. "
                                         + RETAIN_HELP, metavar="STORE=DURATION", check=check_retain)
    replay_order: str = option("time", "The order a folder's files are read in: time (Spark's file source, by "
                                       "modification time) or name (sets their modification times in name order "
                                       "first).", choices=("time", "name"))
    input_cleanup: str | None = option(
        None, "What becomes of a folder's files once the batch that read them is committed: kept, deleted, or moved "
              "under DIR (outside the folder). Default: delete without --once (a live feed's drop folder would grow "
              "for ever, and Spark lists it at every trigger), keep with --once (a replay of a folder, read again by "
              "the next --once run). To replay a folder you keep without --once, give keep.",
        metavar="keep|delete|archive:DIR", check=check_input_cleanup)
    refresh_after: int = option(REFRESH_AFTER, f"Start the query anew between two batches after this many (default "
                                               f"{REFRESH_AFTER:,}: bounds the state store's snapshots).",
                                to_job=JOB_ONLY, minimum=1, metavar="BATCHES")
    sensor_from_topic: int | None = option(None, "An MQTT source whose payloads carry only time and value (CSV "
                                                 "ts,value or JSON): the sensor id is this level of the message's "
                                                 "topic (1: the first, -1: the last).", metavar="LEVEL")
    kafka_start: str | None = option(None, "Where a Kafka source starts when the job starts afresh (a checkpoint's "
                                           "offsets win): earliest (default: every message the broker keeps), latest, "
                                           "or a time (2026-11-28T06:00:00Z, or milliseconds since 1970).",
                                     metavar="earliest|latest|TIME", check=check_kafka_start)
    max_readings_per_batch: int | None = option(None, "Bound each micro-batch of a Kafka source to about this many "
                                                      "readings (default 1,000,000; in messages: N over the readings "
                                                      "a message holds, as the full batches measure them): a job back "
                                                      "after an outage catches up in batches of that size.", minimum=1,
                                                metavar="N")
    kafka_option: tuple[str, ...] = option((), "A setting of the Kafka client (repeatable), e.g. "
                                               "security.protocol=SASL_SSL; a secret only as KEY=env:NAME (read "
                                               "from that environment variable).", metavar="KEY=VALUE",
                                           check=check_kafka_option)
    kafka_plain_password: bool = option(False, "Send a SASL PLAIN password over security.protocol=SASL_PLAINTEXT "
                                               "to a Kafka broker on another host, where anyone on the way reads it "
                                               "(refused otherwise: use SASL_SSL).")
    sensor_from_key: bool = option(False, "A Kafka source whose messages carry only time and value (CSV ts,value "
                                          "or JSON, a line or several): the message's key is the sensor id.")
    mqtt_ca: str | None = option(None, "The CA certificate that signed the MQTT broker's (TLS; with mqtts:// the "
                                       "system's CAs otherwise).", to_job=PATH, metavar="FILE")
    mqtt_cert: str | None = option(None, "A client certificate for a broker that asks for one (TLS), with --mqtt-key.",
                                   to_job=PATH, metavar="FILE")
    mqtt_key: str | None = option(None, "The client certificate's private key.", to_job=PATH, metavar="FILE")
    mqtt_plain_password: bool = option(False, "Send an MQTT password (the source's, the alarms') over plain mqtt:// "
                                              "to a broker on another host, where anyone on the way reads it "
                                              "(refused otherwise: use mqtts://).")
    alerts: tuple[str, ...] = option(
        (), "Deliver alarms (pattern matches, flags turning on and off, as incidents) to a webhook (http(s)://..., "
            "a JSON POST a group), an MQTT topic (mqtt(s)://[USER@]HOST[:PORT]/TOPIC, QoS 1; the password in "
            "SSCRIPT_ALERTS_MQTT_PASSWORD), env:VARIABLE or file:PATH (the URL in that environment variable or file, "
            "out of `ps`: a URL with a credential is refused here); repeat for several. At least once, from a durable "
            "outbox in OUT/alerts/. Kept in OUT: later runs without --alerts deliver to the same targets; "
            "--alerts none stops that.", metavar="URL")
    alerts_for: tuple[str, ...] = option((), "Deliver the alarms of these workflows only (default: every workflow's).",
                                         metavar="WORKFLOW,...")
    alerts_timeout: str | None = option(None, "With --once, how long the run waits for its alarms to be delivered "
                                              "(default 60s); what is left waits in the outbox for the next run.",
                                        metavar="DURATION")
    alerts_template: str | None = option(None, "A webhook's body: a built-in template (alertmanager, pagerduty, "
                                               "slack, teams, ntfy) or a Jinja2 file of your own (docs/ALARMS.md).",
                                         metavar="NAME|FILE", check=check_template)
    alerts_group_by: str | None = option(None, "Alarms of one workflow (default), of one stream, or all (none) go "
                                               "together in one request.", choices=("workflow", "stream", "none"))
    alerts_group_wait: str | None = option(None, "How long a group's first alarm waits for others to go with it "
                                                 "(default 2s; 0s: at once).", metavar="DURATION")

    def __post_init__(self):
        # As the command lines give them: a folder's name, repeated values in a list.
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))
        for entry in OPTIONS:
            if entry.repeated:
                object.__setattr__(self, entry.dest, tuple(getattr(self, entry.dest) or ()))

    @property
    def sink_spec(self) -> str:
        """Where the results go: the sink given, or OUT/results.db (with a Kafka sink, what the
        driver writes: quarantine, late readings, metrics and the ledger of batches written)."""
        from sensorscript.runtime.output.kafka_sink import is_topic

        return self.sink if self.sink and not is_topic(self.sink) else f"sqlite:{self.out / 'results.db'}"

    @property
    def results_topic(self):
        """With --sink kafka://...: the topic the executors write the results to, else None."""
        from sensorscript.runtime.output.kafka_sink import ResultsTopic, is_topic

        return ResultsTopic.of(self.sink, self.kafka_option) if is_topic(self.sink) else None

    @property
    def kafka_settings(self) -> tuple:
        """The Kafka source's settings as the job carries them (runtime/ingest/kafka.py, `Settings`)."""
        return (self.kafka_start, self.max_readings_per_batch, self.kafka_option, self.sensor_from_key)

    @property
    def tls(self):
        """The MQTT TLS files (runtime/ingest/mqtt.py), for the source and the alarms alike."""
        from sensorscript.runtime.ingest.mqtt import Tls

        return Tls(self.mqtt_ca, self.mqtt_cert, self.mqtt_key)

    @property
    def mqtt_login(self):
        """The MQTT source's password (runtime/ingest/mqtt.py)."""
        from sensorscript.runtime.ingest.mqtt import Login

        return Login(plain=self.mqtt_plain_password)

    @property
    def alert_settings(self):
        """Where the alarms go (runtime/output/alerts.py), or None without --alerts."""
        from sensorscript.runtime.output.alerts import AlertSettings

        return AlertSettings.of(self.alerts, self.alerts_for, self.alerts_timeout, self.alerts_template,
                                self.tls, self.mqtt_plain_password, self.alerts_group_by,
                                self.alerts_group_wait, self.kafka_option) if self.alerts else None

    def policies_for(self, job):
        """The job with this run's watermark and late policies (checked) instead of the compiled ones."""
        if self.watermark is not None:
            job = dataclasses.replace(job, watermark=check_watermark(self.watermark))
        if self.late is not None:
            job = dataclasses.replace(job, late=check_late(self.late))
        return job

    def check(self, job=None) -> None:
        """The options taken together, checked before Spark starts (ValueError in the user's words);
        with the job, also the workflows the alarms name."""
        from sensorscript.runtime.ingest.source import check_feed, input_cleanup

        input_cleanup(self.input_cleanup, self.input, self.once)
        if (self.cluster_secret or self.cluster_unauthenticated) and not self.cluster:
            raise ValueError("--cluster-secret and --cluster-unauthenticated go with --cluster spark://HOST:PORT")
        from sensorscript.runtime.ingest.kafka import PREFIX

        feed_settings = self.kafka_settings
        alert_urls = [_alert_url(given) for given in self.alerts]
        to_kafka = self.results_topic is not None or any(a.startswith(PREFIX) for a in alert_urls)
        if not self.input.startswith(PREFIX) and to_kafka:  # --kafka-option for the sink or the alarms
            feed_settings = (*feed_settings[:2], (), *feed_settings[3:])
        check_feed(self.input, self.sensor_from_topic, self.mqtt_login, feed_settings)
        from sensorscript.runtime.ingest.kafka import check_plain_password

        check_plain_password([u for u in (self.input, self.sink or "", *alert_urls) if u.startswith(PREFIX)],
                             self.kafka_option, self.kafka_plain_password)
        alert_options = (self.alerts_for, self.alerts_timeout, self.alerts_template, self.alerts_group_by,
                         self.alerts_group_wait)
        if not self.alerts or self.alerts == ("none",):
            if any(alert_options):
                raise ValueError("--alerts-for, --alerts-timeout, --alerts-template and --alerts-group-by/-wait go "
                                 "with --alerts URL")
            if self.alerts or self.out is None:
                return
        from sensorscript.runtime.output.alerts import AlertSettings

        settings = self.alert_settings if self.alerts else AlertSettings.load(self.out)  # given, or kept in OUT
        if settings is None:
            return
        if self.sink == "console":
            raise ValueError("--alerts delivers alarms from the results written: use a sqlite, csv, parquet or kafka:// sink"
                             + ("" if self.alerts else f" (the alarms' targets are kept in {self.out}/alerts/; "
                                                       f"--alerts none stops them)"))
        try:
            settings.check(job)
        except ValueError as exc:
            if self.alerts:
                raise
            raise ValueError(f"{exc} (the alarms' settings kept in {self.out}/alerts/settings.json by an earlier "
                             f"run; --alerts none stops them)") from None

    def job_arguments(self) -> list[str]:
        """The job's command line for these settings (after `job.py`), locally or through spark-submit."""
        arguments = []
        for entry in OPTIONS:
            value = getattr(self, entry.dest)
            if entry.to_job not in (ARGUMENT, PATH) or value == entry.default:
                continue
            for one in value if entry.repeated else (value,):
                if entry.kind is bool:
                    arguments.append(entry.flag)
                else:
                    arguments += [entry.flag, str(Path(one).resolve()) if entry.to_job == PATH else str(one)]
        return arguments


@dataclass(frozen=True)
class RunOption:
    """One field of `RunSettings` as an option."""

    dest: str  # the field
    kind: type  # bool (a flag), int, float, str or Path
    repeated: bool  # given once per value (a tuple)
    default: object
    help: str
    to_job: str  # ARGUMENT, PATH, SPARK_SUBMIT or JOB_ONLY
    metavar: str | None  # how the help names its value
    choices: tuple[str, ...]
    minimum: int | None
    check: Callable[[str], str] | None  # a value's check (ValueError in the user's words), made when given
    required: bool
    positional: bool  # on `sscript run`'s command line an argument (OUT), the job's an option (--out)

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def on_command_line(self) -> bool:
        """Whether `sscript run` takes it."""
        return self.to_job != JOB_ONLY

    @property
    def for_job(self) -> bool:
        """Whether the job takes it."""
        return self.to_job != SPARK_SUBMIT

    def value(self, text: str):
        """A value given as text, converted and checked (ValueError in the user's words)."""
        try:
            value = self.kind(text)
        except ValueError:
            raise ValueError(f"{self.flag} {text}: not a {'whole ' if self.kind is int else ''}number") from None
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{self.flag} {text}: at least {self.minimum}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.flag} {text}: one of {', '.join(self.choices)}")
        if self.to_job == PATH and not Path(value).is_file():
            raise ValueError(f"{self.flag} {text}: no such file")
        return self.check(value) if self.check else value


def _options() -> tuple[RunOption, ...]:
    hints = typing.get_type_hints(RunSettings)
    found = []
    for each in dataclasses.fields(RunSettings):
        kind = hints[each.name]
        repeated = typing.get_origin(kind) is tuple
        kinds = typing.get_args(kind) if repeated or typing.get_origin(kind) is not None else (kind,)
        kind = next(k for k in kinds if k is not type(None) and k is not Ellipsis)
        found.append(RunOption(each.name, kind, repeated, each.default, **each.metadata["option"]))
    return tuple(found)


OPTIONS = _options()


def job_parser(description: str, out: Path) -> argparse.ArgumentParser:
    """The job's own arguments (`python job.py --help`); `out`: its folder, the default of --out."""
    parser = argparse.ArgumentParser(prog="job.py", description=description)
    for entry in OPTIONS:
        if not entry.for_job:
            continue
        named = dict(help=entry.help, metavar=entry.metavar, default=str(out) if entry.positional else entry.default,
                     required=entry.required, choices=entry.choices or None)
        if entry.kind is bool:
            parser.add_argument(entry.flag, action="store_true", help=entry.help)
            continue
        if entry.repeated:
            named.update(action="append", default=None)
        parser.add_argument(entry.flag, type=_argparse_type(entry), **named)
    return parser


def _argparse_type(entry: RunOption):
    def convert(text: str):
        try:
            return entry.value(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = entry.flag  # argparse names a value it cannot convert by its type's name
    return convert


def job_settings(argv: list[str] | None, description: str, out: Path) -> RunSettings:
    """The settings a job was started with (`python job.py ARGUMENTS` or spark-submit's)."""
    return RunSettings(**vars(job_parser(description, out).parse_args(argv)))
