"""Take docs/dashboard.png: the dashboard of the demo's job (scripts/demo.sh writes out/demo), in
headless chromium, served in this process as `sscript dashboard` serves it.

    .venv/bin/python scripts/screenshot_dashboard.py [OUT] [--to docs/dashboard.png] [--tz ZONE] [--workflow NAME]...

The page as it opens (a job of a few workflows: all of them; else those of the newest alarms), or on
the workflows named with --workflow.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from urllib.parse import urlencode

from sensorscript.dashboard import Dashboard, check_out
from sensorscript.dashboard.browser import chromium, why_no_browser
from sensorscript.errors import SensorScriptError
from sensorscript.times import time_zone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="out/demo")
    parser.add_argument("--to", default="docs/dashboard.png")
    parser.add_argument("--tz", default="UTC")
    parser.add_argument("--height", type=int, default=2000, help="how much of the page, in pixels")
    parser.add_argument("--workflow", action="append", default=[], help="open the page on this workflow (again for more)")
    args = parser.parse_args()
    if why_no_browser():
        print(f"error: {why_no_browser()}", file=sys.stderr)
        return 1
    try:
        check_out(Path(args.out))
        page = Dashboard(Path(args.out), time_zone(args.tz), port=0)
    except (SensorScriptError, ValueError) as exc:
        print(exc.render() if isinstance(exc, SensorScriptError) else f"error: {exc}", file=sys.stderr)
        return 1
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        with chromium(1400, args.height) as (browser, errors):
            browser.goto(page.url + (f"?{urlencode([('workflow', w) for w in args.workflow])}" if args.workflow else ""))
            for shown in ("#title", "#health-summary > *", "#alarm-list > *", ".caption, #choose-prompt"):
                browser.locator(shown).first.wait_for(timeout=60_000)
            browser.wait_for_timeout(2_000)  # the plots drawn
            browser.screenshot(path=args.to)
            if errors:
                print("the browser's console said: " + "; ".join(errors), file=sys.stderr)
                return 1
    finally:
        page.shutdown()
    print(f"wrote {args.to}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
