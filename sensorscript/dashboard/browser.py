"""Headless chromium for the dashboard's tests and scripts/screenshot_dashboard.py: Debian's
chromium driven by Playwright (the dev extras), never a browser Playwright would download."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
from pathlib import Path

CHROMIUM_ARGUMENTS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# Held shared by every browser for its life, and exclusively by whatever changes this machine's network
# (scripts/netns.py, while it makes, cuts, restores or removes test hosts' links): chromium fails the
# requests it has in flight when an address or a link of the machine changes (net::ERR_NETWORK_CHANGED).
NETWORK_LOCK = Path("/tmp/sscript-network.lock")


@contextlib.contextmanager
def network_lock(exclusive: bool):
    """The machine's network held steady (shared) or changed by us alone (exclusive)."""
    with open(NETWORK_LOCK, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def chromium_path() -> str | None:
    """Debian's chromium, or None."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    return found


def why_no_browser() -> str | None:
    """None when a browser can be driven here, else why not (a test's reason to skip)."""
    if chromium_path() is None:
        return "no chromium here (Debian's chromium package; scripts/setup.sh installs it as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000, login: tuple[str, str] | None = None):
    """A fresh page of headless chromium; yields (page, console errors seen so far). `login`: the
    user and password it answers a basic auth challenge with."""
    from playwright.sync_api import sync_playwright

    with network_lock(exclusive=False), sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGUMENTS)
        try:
            credentials = {"username": login[0], "password": login[1]} if login else None
            page = browser.new_page(viewport={"width": width, "height": height}, http_credentials=credentials)
            errors: list[str] = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()
