"""The CEP stage: patterns (docs/LANGUAGE.md, "Patterns") as operator trees, matched per partition inside the job.

`matcher.Matcher` runs one pattern; `operators` holds the operator model (Q, F, Z) and the
registry of user-defined operators; `events_json` is the one definition of how a match's
bound events are written out.
"""

from __future__ import annotations

import json


def events_json(bound, variables: tuple[str, ...], sensor_name) -> str:
    """A match's bound events, in order, as JSON: [{"var", "ts", "value", "sensor"}, ...].
    `bound` holds (element, ts, value, sensor code); `sensor_name(code)` names a sensor or stream."""
    return json.dumps([{"var": variables[element], "ts": int(ts), "value": float(value), "sensor": sensor_name(code)}
                       for element, ts, value, code in bound], separators=(",", ":"))
