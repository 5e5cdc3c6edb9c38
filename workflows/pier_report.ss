// The daily report's view of pier 3: surge alarms per hour. The surge pattern is the one of
// pier_alarms.ss, written again here; the job matches it once for both workflows.

TILT  = union("8TL3-N", "8TL3-S");
TILT1 = avg(TILT, 1min, 1min);

SURGE = pattern(a: TILT1 -> !calm: TILT1 -> c: TILT1+)
        where a.value > 0.5 and calm.value < 0.1 and c.value > a.value and count(c) >= 2
        within 10min strategy next emit first
        yield last(c.value) - a.value;

SURGES_PER_HOUR = count(SURGE, 1h, 1h);
