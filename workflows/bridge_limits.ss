// Bridge displacement limits: a second engineer's view of the same measuring points.
// The 10-minute means of points 1 and 4 are the ones of bridge.ss, so the job computes
// them once for both workflows. The engineer wants a 1.0 whenever either mean exceeds
// the serviceability limit, and the deflection difference between the two points.

MD1Z     = avg("8MD1-AZ", 10min, 5min);      // the same window as bridge.MD1Z: shared
MD4Z     = avg("8MD4-AZ", 600_000, 300_000); // the same as bridge.MD4Z, written differently
EXCEEDED = MD1Z > 12.5 or MD4Z > 12.5;
TWIST    = MD1Z - MD4Z;
