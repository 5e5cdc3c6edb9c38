"""Alarms POSTed to a webhook (http://, https://): the alarm's JSON, or the body the user's template
renders from it; a 2xx acknowledges. A 5xx, 408, 425, 429 or no answer is a failure to retry; any other
4xx is lasting (a wrong address, a token refused, a template the receiver does not take).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from sensorscript.runtime.output.alerts.notifier import SEND_TIMEOUT_S, Failure
from sensorscript.runtime.output.alerts.settings import Target
from sensorscript.runtime.output.alerts.templates import render


class Webhook:
    """The notifier of an http(s):// target: one POST an alarm, SEND_TIMEOUT_S at most."""

    def __init__(self, target: Target, template):
        self.target, self.template = target, template

    def send(self, ident: str, body: str) -> None:
        data = body if self.template is None else render(self.template, json.loads(body))
        try:
            json.loads(data)
            content = "application/json"
        except ValueError:
            content = "text/plain; charset=utf-8"
        request = urllib.request.Request(self.target.url, data=data.encode(), method="POST",
                                         headers={"Content-Type": content, "X-Sscript-Alarm-Id": ident,
                                                  "User-Agent": "sensorscript-alerts"})
        try:
            with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_S) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            lasting = 400 <= exc.code < 500 and exc.code not in (408, 425, 429)
            raise Failure(f"HTTP {exc.code} {exc.reason}", lasting) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Failure(f"no answer ({reason})") from None

    def close(self) -> None:
        pass
