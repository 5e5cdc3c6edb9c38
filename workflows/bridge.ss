// Bridge deck displacement: the workflow of Zhou et al. (docs/REFERENCES.md), statement for statement.
// An engineer watches the vertical displacement (AZ) of three measuring points and
// wants, every 5 minutes, the 10-minute mean of each and the largest and mean of
// those means across the deck: a single number to compare with the design limit.

MD1Z   = avg("8MD1-AZ", 600_000, 300_000);   // point 1: one sensor
UNI    = union("8MD2-A", "8MD3-A");           // point 2/3: two sensors read as one
MD23   = avg(UNI, 600_000, 300_000);
MD4Z   = avg("8MD4-AZ", 600000, 300000);      // durations are milliseconds...
UNIF   = union(MD1Z, MD23, MD4Z);
out_MZ = max(UNIF, 10min, 5min);              // ...or written with units
out_AZ = avg(UNIF, 10min, 5min);
