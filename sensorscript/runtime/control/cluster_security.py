"""A job on a Spark standalone cluster admits only its own: the driver, the master, the workers and
the executors prove to each other that they hold one shared secret (Spark's `spark.authenticate`),
and what they send each other (the job's plan, the sinks' passwords inside it, the shuffle) and the
files they spill are encrypted. A standalone cluster without it runs whatever anyone who reaches its
master submits, as the worker's user, who can write OUT.

`sscript run --cluster spark://...` reads the secret from a file only its user may read, or from an
environment variable (never the command line, which `ps` shows to everyone), and hands it to the job
it submits in the environment (SECRET_VARIABLE), which the job's session takes it from (session.py).
The master and workers take the same settings from a properties file (scripts/standalone.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sensorscript.runtime.plan.loading import anothers

SECRET_VARIABLE = "SSCRIPT_CLUSTER_SECRET"  # sscript run -> the job it submits
ENV = "env:"


def settings(secret: str) -> dict[str, str]:
    """Spark's settings for a driver, master or worker whose cluster shares `secret`: RPC
    authenticated and encrypted (AES, keys from the secret), shuffle and spill files encrypted."""
    return {"spark.authenticate": "true", "spark.authenticate.secret": secret,
            "spark.network.crypto.enabled": "true", "spark.io.encryption.enabled": "true"}


def from_environment() -> dict[str, str]:
    """The settings of the secret `sscript run --cluster` handed this job (taken out of the
    environment, so that the processes the job starts do not inherit it), or none."""
    secret = os.environ.pop(SECRET_VARIABLE, None)
    return settings(secret) if secret else {}


def needs_secret(master: str) -> bool:
    """Whether the cluster at `master` is one whose secret the user gives: a standalone master
    (YARN and Kubernetes make a secret per application themselves)."""
    return master.startswith("spark://")


def read_secret(given: str | None, unauthenticated: bool) -> str | None:
    """The secret of `--cluster-secret FILE|env:NAME`, or None with `--cluster-unauthenticated`;
    ValueError in the user's words for a secret missing, empty or that others may read."""
    if given and unauthenticated:
        raise ValueError("--cluster-secret and --cluster-unauthenticated contradict each other: give one")
    if unauthenticated:
        return None
    if not given:
        raise ValueError("a Spark standalone cluster runs whatever anyone who reaches its master submits: give the "
                         "secret its master and workers were started with, --cluster-secret FILE (a file only you may "
                         "read; scripts/standalone.py writes one) or --cluster-secret env:NAME, or run on a cluster "
                         "that admits anyone with --cluster-unauthenticated")
    if given.startswith(ENV):
        name = given[len(ENV):]
        secret = os.environ.get(name, "").strip()
        if not secret:
            raise ValueError(f"--cluster-secret {given}: the environment variable {name} is not set or empty")
        return secret
    path = Path(given)
    try:
        found = path.stat()
        text = path.read_text(encoding="utf-8", errors="strict").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--cluster-secret {given}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if anothers(found):
        raise ValueError(f"--cluster-secret {given}: it belongs to another user, not to you")
    if found.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"--cluster-secret {given}: others may read it (mode {stat.filemode(found.st_mode)}); "
                         f"make it yours alone (chmod 600 {given})")
    if not text or "\n" in text:
        raise ValueError(f"--cluster-secret {given}: " + ("it is empty" if not text else "it holds more than one line"))
    return text
