"""The dashboard under a fuzzer (issue #39): hypothesis draws requests (methods, paths, headers,
bodies, Dash callbacks bent out of shape) and sends them, as raw HTTP, to a real server on this
machine, served as `sscript dashboard` serves it, with a login (on every interface, as off loopback)
and without (on loopback). Whatever comes: no answer carries a traceback or the server's insides, a
500 is at most a plain sentence, and with a login nothing but the 401 or 429 comes back without the
right credential. A bounded number of requests each (EXAMPLES_DRAWN), from a fixed seed, so a
failure is the same on every machine and every run."""

from __future__ import annotations

import base64
import http.client
import itertools
import json
import string

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from sensorscript.dashboard.access import PASSWORD, USER, credentials
from tests.test_dashboard_auth import out, serving  # noqa: F401  (out: a compiled job, the fixture)

EXAMPLES_DRAWN = 600  # drawn requests per server (about 2 s a hundred)
RIGHT = "Basic " + base64.b64encode(b"wall:fuzz-pw").decode()
RIGHTS = {RIGHT, RIGHT.replace("Basic", "basic"), RIGHT + " ", "  " + RIGHT}  # as a header's value is read
LEAKS = ("Traceback", "File \"/", "site-packages", "werkzeug.", "Exception:", "Error:", ".py\", line")

ROUTES = ["/", "/metrics", "/_dash-layout", "/_dash-dependencies", "/_dash-update-component", "/_reload-hash",
          "/assets/", "/_dash-component-suites/dash/dcc/dash_core_components.js", "/_favicon.ico", "/favicon.ico"]
METHODS = ["GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH", "TRACE", "CONNECT", "PROPFIND", "get", "X-Y"]

printable = st.text(alphabet=string.printable.replace("\r", "").replace("\n", ""), max_size=40)
path_parts = st.one_of(st.sampled_from(ROUTES),
                       st.text(alphabet=string.ascii_letters + string.digits + string.punctuation, max_size=40).map(
                           lambda t: "/" + t),
                       st.tuples(st.sampled_from(ROUTES), st.text(alphabet=string.punctuation + "az09", max_size=20)).map(
                           "".join),
                       st.sampled_from(["/..%2f..%2fetc%2fpasswd", "/%00", "/_dash-update-component?x=%ff",
                                        "//metrics", "/metrics/../metrics", "/" + "a" * 5000, "/%E2%80%A8", "*",
                                        "http://127.0.0.1/metrics", "/assets/../../etc/passwd"]))


def callback_body(bent) -> bytes:
    """A Dash callback request, some of its parts replaced by what hypothesis drew."""
    body = {"output": "plan-body.children", "outputs": {"id": "plan-body", "property": "children"},
            "inputs": [{"id": "tick", "property": "n_intervals", "value": 1}], "state": [],
            "changedPropIds": ["tick.n_intervals"]}
    for key, value in bent.items():
        body[key] = value
    return json.dumps(body).encode()


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | printable,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(printable, inner, max_size=4),
                           max_leaves=12)
bodies = st.one_of(st.just(b""), st.binary(max_size=300),
                   st.dictionaries(st.sampled_from(["output", "outputs", "inputs", "state", "changedPropIds"]),
                                   json_values, max_size=3).map(callback_body))
authorizations = st.one_of(st.none(), st.sampled_from(sorted(RIGHTS)), printable,
                           st.sampled_from(["Basic", "Basic !!!", "Bearer", "Bearer ", "Digest x",
                                            "Basic " + base64.b64encode(b"wall:fuzz-pX").decode(),
                                            "Basic " + base64.b64encode(b"\xff\xfe:\x00").decode(),
                                            "Basic " + "A" * 10000]))
extra_headers = st.dictionaries(st.sampled_from(["Content-Type", "Accept", "Accept-Encoding", "Cookie", "Origin",
                                                 "X-Forwarded-For", "Range", "If-None-Match", "Expect", "Referer"]),
                                printable, max_size=4)


def port_of(page) -> int:
    return int(page.url.rsplit(":", 1)[1].strip("/"))


CLIENTS = itertools.count(1)


def send(port: int, method: str, path: str, headers: dict, body: bytes) -> tuple[int, bytes]:
    """One request as raw HTTP/1.1 (http.client sends what it is given, checked only for line breaks),
    each from an address of its own (127.1.x.y): the server slows a client after a few failed logins,
    and each drawn request is to reach the page behind the login, not that wait."""
    n = next(CLIENTS)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60,
                                            source_address=(f"127.1.{n // 250 % 250}.{n % 250 + 1}", 0))
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value.encode("latin-1", "replace"))
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, answer.read()
    except (ConnectionError, http.client.RemoteDisconnected):
        return 0, b""  # the server may close a connection it will not read: no answer at all
    finally:
        connection.close()


def requests():
    return st.tuples(st.sampled_from(METHODS), path_parts, authorizations, extra_headers, bodies)


def check(port: int, drawn, login: bool) -> None:
    method, path, authorization, headers, body = drawn
    headers = {"Host": f"127.0.0.1:{port}", **headers}
    if authorization is not None:
        headers["Authorization"] = authorization
    status, answer = send(port, method, path, headers, body)
    text = answer.decode("utf-8", "replace")
    assert not any(leak in text for leak in LEAKS), (status, text[:500])
    if status >= 500:
        assert len(text) < 1000, text  # a sentence (or Flask's short page), not the server's insides
    if login and authorization not in RIGHTS:
        assert not 200 <= status < 300, (status, method, path, authorization)
    return status


def fuzzed(port: int, login: bool) -> list[int]:
    """The statuses of the answers: to every method on every route, without a credential and with a
    wrong one, then to the requests drawn."""
    statuses = [check(port, (method, route, authorization, {}, b""), login)
                for route in ROUTES for method in METHODS for authorization in (None, "Basic d2FsbDp4")]

    @seed(39)
    @settings(max_examples=EXAMPLES_DRAWN, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(requests())
    def run(drawn):
        statuses.append(check(port, drawn, login))

    run()
    return statuses


def test_with_a_login_nothing_without_the_right_credential(out):
    """On every interface (off loopback) with a login: whatever is sent without the right credential
    gets no 2xx, and no answer shows a traceback."""
    with serving(out, "0.0.0.0", credentials=credentials(environ={PASSWORD: "fuzz-pw", USER: "wall"}),
                 echo=lambda line: None) as page:
        port = port_of(page)
        statuses = fuzzed(port, login=True)
        assert 401 in statuses and any(200 <= s < 300 for s in statuses)  # the login asked for, and passed
        assert send(port, "GET", "/metrics", {"Host": f"127.0.0.1:{port}", "Authorization": RIGHT}, b"")[0] == 200


def test_without_a_login_no_traceback(out):
    with serving(out, "127.0.0.1") as page:
        port = port_of(page)
        statuses = fuzzed(port, login=False)
        assert {200, 404} <= set(statuses)
        assert send(port, "GET", "/metrics", {"Host": f"127.0.0.1:{port}"}, b"")[0] == 200
