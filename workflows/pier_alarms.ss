// Pier settlement alarms (complex event patterns).
// Tilt meters on pier 3 (8TL3-*) and the water level at the pier (8WL3).
// The engineer wants an alarm when a tilt spike is followed, within 10 minutes,
// by a run of rising tilt readings with no calm reading in between, a flood alarm,
// and each sensor's jumps. (pier_report.ss counts the surge alarms per hour.)

TILT  = union("8TL3-N", "8TL3-S");
TILT1 = avg(TILT, 1min, 1min);               // tumbling 1-minute means
WATER = max("8WL3", 1min, 1min);

SURGE = pattern(a: TILT1 -> !calm: TILT1 -> c: TILT1+)
        where a.value > 0.5 and calm.value < 0.1 and c.value > a.value and count(c) >= 2
        within 10min
        strategy next          // each spike starts one alarm; runs take the earliest readings
        emit first             // one alarm per spike
        yield last(c.value) - a.value;

// High water, then the first strongly tilted reading within two minutes.
FLOOD = pattern(w: WATER -> t: TILT)
        where w.value > 9 and t.value > 9
        within 2min
        strategy next;

// A jump between two consecutive readings of the same tilt meter. Each sensor is matched on
// its own, on the partition its readings go to: no reading moves for this alarm.
JUMP  = pattern(p: TILT -> q: TILT)
        where q.value - p.value > 4
        within 1s
        strategy strict
        partition by sensor
        yield q.value - p.value;
