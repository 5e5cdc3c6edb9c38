/* Deck vibration and cable health.
   Accelerometers on the deck (8AC*) and strain gauges on two stay cables (8ST*).
   The engineer wants the vibration envelope over a 30 s window, an RMS-style
   energy proxy, the imbalance between the two cables, and a flag that is 1.0
   while the deck vibrates hard AND the cables disagree. */

ACC     = union("8AC1-Z", "8AC2-Z", "8AC3-Z");
ACC_MAX = max(ACC, 30s, 10s);
ACC_MIN = min(ACC, 30s, 10s);
SPAN    = ACC_MAX - ACC_MIN;                  // peak-to-peak amplitude
SAMPLES = count(ACC, 30s, 10s);               // how many readings arrived (sensor dropout check)
ACC_SUM = sum(ACC, 30s, 10s);
MEAN    = ACC_SUM / SAMPLES;                 // the same as avg(ACC, 30s, 10s)

CABLE_N = avg("8ST1-N", 1min, 10s);
CABLE_S = avg("8ST2-S", 1min, 10s);
IMBAL   = (CABLE_N - CABLE_S) / ((CABLE_N + CABLE_S) / 2);
WORST   = max(IMBAL, -IMBAL, 0);              // |imbalance| with cross-stream max and unary minus

ALERT   = SPAN > 0.8 and (WORST >= 0.15 or not SAMPLES > 250);
