"""Keys that Spark's hash partitioner sends to distinct tasks.

`repartition(n, key)` sends a row to task pmod(murmur3(key, seed 42), n). The keys
0..n-1 collide (for n = 2 both go to task 1), which would put two plan partitions
on one core. The job therefore keys partition p with the smallest integer that
Spark sends to task p. tests/test_spark_job.py checks these against Spark itself.
"""

from __future__ import annotations


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & 0xFFFFFFFF
    k1 = ((k1 << 15) | (k1 >> 17)) & 0xFFFFFFFF
    return (k1 * 0x1B873593) & 0xFFFFFFFF


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & 0xFFFFFFFF
    return (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    return h1 ^ (h1 >> 16)


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark SQL's `hash()` of an int column (Murmur3 x86 32-bit), as a signed int."""
    h = _fmix(_mix_h1(seed, _mix_k1(value & 0xFFFFFFFF)), 4)
    return h - (1 << 32) if h >= (1 << 31) else h


def bucket_keys(count: int) -> tuple[int, ...]:
    """For each task b in 0..count-1, the smallest int key Spark's hash partitioning sends to b."""
    found: dict[int, int] = {}
    key = 0
    while len(found) < count:
        found.setdefault(spark_hash_int(key) % count, key)
        key += 1
    return tuple(found[b] for b in range(count))
