"""Alarms POSTed to a webhook (http://, https://), a group a request: by default one JSON object
(`body`: the group's labels and its alarms), or the body a template renders (templates.py: a group,
or one alarm a request); a 2xx acknowledges. A 5xx, 408, 425, 429 or no answer is a failure to retry
(after the receiver's Retry-After, if it says one); any other 4xx is lasting (a wrong address, a token
refused, a template the receiver does not take).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request

from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure, Request
from sensorscript.runtime.output.alerts.payload import to_json
from sensorscript.runtime.output.alerts.settings import Target
from sensorscript.runtime.output.alerts.templates import MAX_GROUP, render

MOST = 500  # alarms in one request of the default body
FORMAT = "sensorscript/2"  # the default body's `version`


def body(request: Request) -> str:
    """The default body: {"version", "group_key", "group", "status", "alarms": [...]}."""
    firing = any(alarm["state"] != "resolved" for alarm in request.alarms)
    return to_json({"version": FORMAT, "group_key": request.group_key, "group": request.group,
                    "status": "firing" if firing else "resolved", "alarms": request.alarms})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed: urllib would turn the POST into a GET without its body, and a 2xx
    to that would acknowledge alarms nobody received."""

    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class Webhook:
    """The notifier of an http(s):// target: one POST a request, SEND_TIMEOUT_S at most."""

    def __init__(self, target: Target, template=None, routing_key: str | None = None):
        self.target, self.template, self.routing_key = target, template, routing_key
        self.most = MOST if template is None else MAX_GROUP if template.group else 1

    def send(self, request: Request) -> None:
        data = body(request) if self.template is None else render(self.template, request.alarms, request.group,
                                                                  request.group_key, self.routing_key)
        try:
            json.loads(data)
            content = "application/json"
        except ValueError:
            content = "text/plain; charset=utf-8"
        headers = {"Content-Type": content, "User-Agent": "sensorscript-alerts"}
        call = urllib.request.Request(self.target.url, data=data.encode(), method="POST", headers=headers)
        try:
            with _OPENER.open(call, timeout=SEND_TIMEOUT_S) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise Failure(f"HTTP {exc.code}: the webhook moved to {exc.headers.get('Location') or 'another URL'}; "
                              f"give that URL to --alerts", lasting=True) from None
            lasting = 400 <= exc.code < 500 and exc.code not in (408, 425, 429)
            raise Failure(f"HTTP {exc.code} {exc.reason}", lasting, retry_after=_seconds(exc.headers)) from None
        except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
            raise Failure(f"no answer ({reason})") from None

    def close(self) -> None:
        pass


def _seconds(headers) -> float | None:
    """Retry-After in seconds (its date form is left to the backoff)."""
    try:
        return float(headers.get("Retry-After")) if headers and headers.get("Retry-After") else None
    except ValueError:
        return None
