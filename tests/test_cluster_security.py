"""The secret a job on a standalone cluster proves itself with (runtime/control/cluster_security.py):
where `sscript run --cluster-secret` takes it from, and what it refuses. The cluster that checks it:
tests/test_cluster.py (refused without it, the job with it) and tests/test_cluster_hosts.py."""

import os

import pytest

from sensorscript.runtime.control import cluster_security
from sensorscript.runtime.control.cluster_security import read_secret


def test_a_secret_from_a_file_of_yours_alone_or_the_environment(tmp_path, monkeypatch):
    secret = tmp_path / "secret"
    secret.write_text("  0123abcd\n")
    secret.chmod(0o600)
    assert read_secret(str(secret), False) == "0123abcd"
    monkeypatch.setenv("CLUSTER_KEY", "from-the-environment")
    assert read_secret("env:CLUSTER_KEY", False) == "from-the-environment"
    assert read_secret(None, True) is None  # --cluster-unauthenticated, said so explicitly


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_secret_file_others_may_read_or_write_is_refused(tmp_path, mode):
    secret = tmp_path / "secret"
    secret.write_text("0123abcd\n")
    secret.chmod(mode)
    with pytest.raises(ValueError, match=r"others may read it \(mode -rw.*chmod 600"):
        read_secret(str(secret), False)


def test_an_empty_missing_or_many_lined_secret_is_refused(tmp_path, monkeypatch):
    for text, said in (("\n", "it is empty"), ("one\ntwo\n", "more than one line")):
        (tmp_path / "s").write_text(text)
        (tmp_path / "s").chmod(0o600)
        with pytest.raises(ValueError, match=said):
            read_secret(str(tmp_path / "s"), False)
    monkeypatch.setenv("CLUSTER_KEY", " ")
    with pytest.raises(ValueError, match="CLUSTER_KEY is not set or empty"):
        read_secret("env:CLUSTER_KEY", False)
    with pytest.raises(ValueError, match="give the secret its master and workers were started with"):
        read_secret(None, False)


def test_the_job_takes_the_secret_out_of_its_environment(monkeypatch):
    """What the job's session is given (session.py), once: the processes the job starts do not inherit it."""
    monkeypatch.setenv(cluster_security.SECRET_VARIABLE, "s3cret")
    assert cluster_security.from_environment() == {
        "spark.authenticate": "true", "spark.authenticate.secret": "s3cret", "spark.network.crypto.enabled": "true",
        "spark.io.encryption.enabled": "true"}
    assert cluster_security.SECRET_VARIABLE not in os.environ
    assert cluster_security.from_environment() == {}
    assert cluster_security.needs_secret("spark://10.0.0.5:7077")
    assert not any(map(cluster_security.needs_secret, ("local[2]", "yarn", "k8s://https://10.0.0.5:6443")))
