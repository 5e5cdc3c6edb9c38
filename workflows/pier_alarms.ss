// Pier settlement alarms (complex event patterns).
// Tilt meters on pier 3 (8TL3-*) and the water level at the pier (8WL3).
// The engineer wants an alarm when a tilt spike is followed, within 10 minutes,
// by a run of rising tilt readings with no calm reading in between, and a count
// of alarms per hour for the daily report.

TILT  = union("8TL3-N", "8TL3-S");
TILT1 = avg(TILT, 1min, 1min);               // tumbling 1-minute means
WATER = max("8WL3", 1min, 1min);

SURGE = pattern(a: TILT1 -> !calm: TILT1 -> c: TILT1+)
        where a.value > 0.5 and calm.value < 0.1 and c.value > a.value and count(c) >= 3
        within 10min
        strategy next          // each spike starts one alarm; runs take the earliest readings
        emit first             // one alarm per spike
        yield last(c.value) - a.value;

// High water and a tilt spike on the same sensor, in that order, with nothing in between.
FLOOD = pattern(w: WATER -> t: TILT)
        where w.value > 4.5 and t.value > 0.3
        within 5min
        strategy strict
        partition by sensor;

SURGES_PER_HOUR = count(SURGE, 1h, 1h);
