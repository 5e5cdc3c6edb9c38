"""Addresses as SensorScript shows and stores them: scheme, host, port and path, never a user, a
password, a query or a fragment, which is where webhooks carry their secrets (`?token=...`)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redacted(url: str) -> str:
    """`url` as it may be shown: https://hooks.example/services/T (the query and any user:password@ left out)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # a port that is not a number: the host alone is shown
        parts, port = urlsplit(url.split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]), ""
    if not parts.scheme or not parts.netloc:
        return url.split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"


def redacted_text(text: str) -> str:
    """`text` with every URL in it redacted (a command line, an error message)."""
    return _URL.sub(lambda found: redacted(found.group()), text)
