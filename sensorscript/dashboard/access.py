"""Who may open the dashboard: the credentials it asks for (HTTP basic auth or a bearer token) and
the rule for when it must ask.

The secrets come from the environment or a file, never from the command line, where `ps` shows
them to every user of the machine:

    SSCRIPT_DASHBOARD_PASSWORD   a password for basic auth, for the user SSCRIPT_DASHBOARD_USER (admin)
    SSCRIPT_DASHBOARD_TOKEN      a bearer token (Prometheus, scripts: Authorization: Bearer TOKEN)
    --auth-file PATH             lines `USER:PASSWORD` and/or `Bearer TOKEN`; blank lines and
                                 `# comments` skipped; refused when others than its owner may read it

On an address other than loopback the dashboard serves nobody without one, unless told --no-auth;
on loopback none is needed, but one configured is asked for there too. Failed logins are counted
per client, logged and slowed (`Guesses`). Off loopback the login should cross the network in TLS
(`sscript dashboard --cert FILE --key FILE`; the command warns without).

Whatever the login, it answers only requests that name it (`ServedNames`): a page of another site
whose name was made to point at 127.0.0.1 (DNS rebinding) sends that name as Host and gets 421. And
every answer forbids framing, sniffing and scripts other than the page's own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import os
import re
import socket
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sensorscript.errors import Diagnostic, SensorScriptError
from sensorscript.hosts import loopback

PASSWORD, USER, TOKEN = "SSCRIPT_DASHBOARD_PASSWORD", "SSCRIPT_DASHBOARD_USER", "SSCRIPT_DASHBOARD_TOKEN"
DEFAULT_USER = "admin"
REALM = "SensorScript dashboard"
_BEARER_LINE = re.compile(r"bearer\s+(\S+)", re.IGNORECASE)


def _digest(secret: str) -> bytes:
    """Secrets are kept and compared as digests of equal length: hmac.compare_digest then takes the
    same time whatever the guess shares with the secret, and no secret stays in memory as text."""
    return hashlib.sha256(secret.encode()).digest()


@dataclass(frozen=True)
class Credentials:
    """The logins the dashboard accepts; `sources` says where they came from (for messages)."""

    users: tuple[tuple[bytes, bytes], ...]  # (digest of the user name, digest of the password)
    tokens: tuple[bytes, ...]  # digests of the bearer tokens
    sources: tuple[str, ...]

    def allow(self, authorization: str | None) -> bool:
        """An Authorization header that carries one of the credentials."""
        scheme, _, value = (authorization or "").strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "basic" and self.users:
            login = _basic(authorization)
            if login is None:
                return False
            given = (_digest(login[0]), _digest(login[1]))
            # Every entry compared, so the time taken says nothing of which user name was right.
            matches = [hmac.compare_digest(given[0], u) & hmac.compare_digest(given[1], p) for u, p in self.users]
            return any(matches)
        if scheme.lower() == "bearer" and self.tokens:
            given = _digest(value)
            return any([hmac.compare_digest(given, token) for token in self.tokens])
        return False

    def challenges(self) -> list[str]:
        """The WWW-Authenticate headers of a 401: basic auth first, which browsers ask a person for."""
        return ([f'Basic realm="{REALM}", charset="UTF-8"'] if self.users else []) + \
            ([f'Bearer realm="{REALM}"'] if self.tokens else [])


def credentials(auth_file: Path | str | None = None, environ=None) -> Credentials | None:
    """The credentials configured in the environment and `auth_file`, or None when there are none."""
    environ = os.environ if environ is None else environ
    users, tokens, sources = [], [], []
    if environ.get(PASSWORD):
        users.append((_digest(environ.get(USER) or DEFAULT_USER), _digest(environ[PASSWORD])))
        sources.append(PASSWORD)
    if environ.get(TOKEN):
        tokens.append(_digest(environ[TOKEN]))
        sources.append(TOKEN)
    if auth_file is not None:
        file_users, file_tokens = read_auth_file(Path(auth_file))
        users += file_users
        tokens += file_tokens
        sources.append(f"--auth-file {auth_file}")
    if not users and not tokens:
        return None
    return Credentials(tuple(users), tuple(tokens), tuple(sources))


def read_auth_file(path: Path) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """`USER:PASSWORD` and `Bearer TOKEN` lines. A file others than its owner may read is refused,
    as ssh refuses such a private key: its secrets are not secret. No message shows a line's text."""
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as exc:
        raise _error(f"{path}: cannot read the dashboard's logins: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise _error(f"{path}: others than its owner may read or change it (mode {stat.S_IMODE(mode):04o}), so its "
                     f"logins are not secret; make it private: chmod 600 {path}")
    users, tokens = [], []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        bearer = _BEARER_LINE.fullmatch(line)
        user, colon, password = line.partition(":")
        if bearer:
            tokens.append(_digest(bearer.group(1)))
        elif colon and user and password:
            users.append((_digest(user), _digest(password)))
        else:
            raise _error(f"{path}, line {number}: neither USER:PASSWORD nor Bearer TOKEN (a user name and a "
                         f"password, both not empty; or the word Bearer, a space and a token)")
    if not users and not tokens:
        raise _error(f"{path}: no login in it (lines USER:PASSWORD or Bearer TOKEN)")
    return users, tokens


def required(host: str, port: int, found: Credentials | None, no_auth: bool) -> Credentials | None:
    """The credentials the dashboard on host:port asks for (None: it asks for none), or why it
    refuses to start."""
    if no_auth and found is not None:
        raise _error(f"--no-auth and a login ({', '.join(found.sources)}) contradict each other: drop one")
    if found is None and not no_auth and not loopback(host):
        raise _error(f"the dashboard on {host} would show every result, alarm and the job's health to anyone who "
                     f"reaches port {port}: give it a login ({PASSWORD}, {TOKEN} or --auth-file PATH) or, to serve "
                     f"it to all, --no-auth")
    return found


class Guesses:
    """Failed logins per client (its address), in a row: past FREE of them, the client's next attempt
    is not even checked before a wait that doubles with each further failure (2 s, 4 s, ... at most
    MAX_WAIT_S), as sshd and fail2ban slow guessing. A login that succeeds, or QUIET_S without a
    failure, forgets a client's failures. At most CLIENTS clients are remembered (the longest quiet
    forgotten first)."""

    FREE = 5
    QUIET_S = 600.0
    MAX_WAIT_S = 300.0
    CLIENTS = 10_000

    def __init__(self, clock=time.monotonic, free: int = FREE):
        self.clock, self.free = clock, free
        self._failures: dict[str, tuple[int, float]] = {}  # client -> (failures in a row, time of the last)
        self._lock = threading.Lock()

    def _count(self, client: str, now: float) -> tuple[int, float]:
        count, last = self._failures.get(client, (0, now))
        if count and now - last > self.QUIET_S:
            del self._failures[client]
            return 0, now
        return count, last

    def wait(self, client: str) -> float:
        """Seconds before the client's next attempt is checked (0: now)."""
        with self._lock:
            now = self.clock()
            count, last = self._count(client, now)
            if count < self.free:
                return 0.0
            return max(0.0, last + min(2.0 ** (count - self.free + 1), self.MAX_WAIT_S) - now)

    def failed(self, client: str) -> int:
        """A failed login of `client`: its failures in a row, this one counted."""
        with self._lock:
            now = self.clock()
            count = self._count(client, now)[0] + 1
            self._failures.pop(client, None)
            self._failures[client] = (count, now)  # the newest last: the first in the dict is the longest quiet
            while len(self._failures) > self.CLIENTS:
                del self._failures[next(iter(self._failures))]
            return count

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)


def trusted_proxies(given) -> tuple:
    """--trusted-proxy ADDR (an address or a network, 10.0.0.0/8), each as an ip_network;
    SensorScriptError in one sentence for one that is neither."""
    import ipaddress

    found = []
    for text in given:
        try:
            found.append(ipaddress.ip_network(text.strip().strip("[]"), strict=False))
        except ValueError:
            raise _error(f"--trusted-proxy {text}: not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8)") from None
    return tuple(found)


def _among(address: str, networks) -> bool:
    import ipaddress

    try:
        found = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(found in network for network in networks)


def client_of(environ, trusted=()) -> str:
    """Who sent the request: its peer's address, or, where the peer is a trusted proxy, the last
    hop of X-Forwarded-For that is not one (each proxy appends the address it was reached from, so
    what a client wrote itself stays to the left of its own address), as nginx's real_ip_recursive."""
    peer = environ.get("REMOTE_ADDR") or "an unknown address"
    if not _among(peer, trusted):
        return peer
    hops = [hop.strip() for hop in environ.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _among(hop, trusted):
            return hop[:64]
    return hops[0][:64] if hops else peer


def _basic(authorization: str | None) -> tuple[str, str] | None:
    """The user and password of a basic-auth header, or None (another scheme, or not the base64 of
    UTF-8 `USER:PASSWORD`)."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, colon, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if colon else None


def _user_of(authorization: str) -> str:
    """The user name a basic-auth login tries (a bearer token or a malformed header: none), for
    counting its failures."""
    login = _basic(authorization)
    return login[0] if login else ""


class RequireLogin:
    """WSGI middleware: every request (the page, its scripts, its callbacks, /metrics) carries one of
    the credentials, or gets 401 and the challenges that make a browser ask for a login. A request
    that carries a wrong credential is a failed login: counted per client and the user name it tried
    (`guesses`) and per client whatever the name (`spraying`, SPRAY times as many free), forgotten
    by a login of the client's that succeeds, told to `echo` (the client's address and its count,
    never what it sent), and slowed (429 and Retry-After while the client must wait). The client is the request's peer, or behind a proxy of `trusted`
    (--trusted-proxy) the address that proxy was reached from (`client_of`): one client's guesses
    never lock out another."""

    SPRAY = 4  # a client's failures over every user name: this many times Guesses.FREE before it waits

    def __init__(self, app, accepted: Credentials, echo=print, guesses: Guesses | None = None, trusted=()):
        self.app, self.accepted, self.echo = app, accepted, echo
        self.guesses = guesses or Guesses()
        self.spraying = Guesses(clock=self.guesses.clock, free=self.guesses.free * self.SPRAY)
        self.trusted = tuple(trusted)

    def __call__(self, environ, start_response):
        authorization = environ.get("HTTP_AUTHORIZATION", "").strip()
        client = client_of(environ, self.trusted)
        if authorization:
            tried = f"{client}\n{_user_of(authorization)}"  # a client and the user name it tries
            wait = max(self.guesses.wait(tried), self.spraying.wait(client))
            if wait > 0:
                seconds = math.ceil(wait)
                return _answer(start_response, "429 Too Many Requests",
                               f"429: too many failed logins from {client}; try again in {seconds} s",
                               [("Retry-After", str(seconds))])
            if self.accepted.allow(authorization):
                self.guesses.succeeded(tried)
                self.spraying.succeeded(client)
                return self.app(environ, start_response)
            count = self.guesses.failed(tried)
            self.spraying.failed(client)
            wait = max(self.guesses.wait(tried), self.spraying.wait(client))
            then = f"; its next attempt waits {math.ceil(wait)} s" if wait else ""
            self.echo(f"dashboard: a failed login from {client} ({count} in a row{then})")
        return _answer(start_response, "401 Unauthorized",
                       "401: this dashboard asks for a login (basic auth, or a bearer token)",
                       [("WWW-Authenticate", c) for c in self.accepted.challenges()])


def _answer(start_response, status: str, text: str, headers) -> list[bytes]:
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store"), *headers])
    return [body]


def _error(message: str) -> SensorScriptError:
    return SensorScriptError([Diagnostic("error", message)])


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")


def served_names(host: str, server_names=()) -> frozenset[str]:
    """The Host names the dashboard on `host` answers to: loopback names, `host` itself, the names
    given with --server-name, and on every interface (0.0.0.0) this machine's names too."""
    names = {*LOOPBACK_NAMES, host, *server_names}
    if host in _WILDCARDS:
        names |= {socket.gethostname(), socket.getfqdn()}
    return frozenset(n.strip().strip("[]").lower() for n in names if n.strip())


def content_security_policy(script_hashes) -> str:
    """The page's own scripts (and Dash's one inline script, by its hash); Plotly sets inline styles
    and draws images from data: and blob: URLs."""
    return "; ".join([
        "default-src 'self'", f"script-src 'self' {' '.join(script_hashes)}".rstrip(),
        "style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:", "font-src 'self' data:",
        "connect-src 'self'", "object-src 'none'", "base-uri 'self'", "form-action 'self'",
        "frame-ancestors 'none'"])


class ServedNames:
    """WSGI middleware, outermost: 421 for a request whose Host is not one of `names`, and on every
    answer X-Frame-Options, X-Content-Type-Options and the Content-Security-Policy `policy`."""

    def __init__(self, app, names: frozenset[str], policy: str):
        self.app, self.names = app, names
        self.headers = [("X-Frame-Options", "DENY"), ("X-Content-Type-Options", "nosniff"),
                        ("Content-Security-Policy", policy), ("Referrer-Policy", "no-referrer")]

    def _name(self, host: str) -> str:
        host = host.strip().lower()
        if host.startswith("["):  # [::1]:8050
            return host[1:].split("]", 1)[0]
        return host.rsplit(":", 1)[0] if host.count(":") == 1 else host

    def __call__(self, environ, start_response):
        def with_headers(status, headers, exc_info=None):
            return start_response(status, [*headers, *self.headers], exc_info)

        if self._name(environ.get("HTTP_HOST", "")) in self.names:
            return self.app(environ, with_headers)
        body = (b"421: this dashboard does not serve that name; to reach it under another name, start it with "
                b"--server-name NAME\n")
        with_headers("421 Misdirected Request", [("Content-Type", "text/plain; charset=utf-8"),
                                                 ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return [body]
