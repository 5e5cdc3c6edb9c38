"""The engine's fast orders equal the plain numpy ones they replace (issue #26): a radix sort for keys
of a small span, one int64 key for a pattern's events, a dense table for each sensor's latest reading."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sensorscript.runtime.state.cep.matcher import _total_order
from sensorscript.runtime.state.kernels.sorting import stable_order
from sensorscript.runtime.state.watermark import _latest_per_code

_SIZES = st.integers(0, 3000)


@settings(max_examples=60, deadline=None)
@given(size=_SIZES, low=st.integers(-2**40, 2**40), span=st.sampled_from([1, 7, 65_535, 65_536, 2**20]),
       seed=st.integers(0, 2**32 - 1))
def test_stable_order_is_numpys_stable_argsort(size, low, span, seed):
    keys = low + np.random.default_rng(seed).integers(0, span, size)
    assert (stable_order(keys) == np.argsort(keys, kind="stable")).all()


@settings(max_examples=60, deadline=None)
@given(size=_SIZES, times=st.sampled_from([1, 3, 1000, 2**40]), sources=st.sampled_from([1, 2, 900, 2**30]),
       seed=st.integers(0, 2**32 - 1))
def test_events_are_ordered_as_by_the_four_keys(size, times, sources, seed):
    """Ties of time and source (exact duplicates, a sensor twice in a millisecond) included."""
    rng = np.random.default_rng(seed)
    ts = 1_767_225_600_000 + rng.integers(0, times, size)
    src = rng.integers(0, sources, size)
    value = rng.integers(-2, 3, size).astype(np.float64)
    k = rng.integers(0, 3, size)
    assert (_total_order(ts, value, src, k) == np.lexsort((k, value, src, ts))).all()


@settings(max_examples=60, deadline=None)
@given(code=hnp.arrays(np.int64, st.integers(1, 500), elements=st.sampled_from([0, 1, 5, 700, 2**23, 2**40])),
       seed=st.integers(0, 2**32 - 1))
def test_each_sensors_latest_reading(code, seed):
    ts = np.random.default_rng(seed).integers(-10**15, 10**15, len(code))
    order = np.lexsort((ts, code))
    expected = ts[order][np.flatnonzero(np.r_[code[order][1:] != code[order][:-1], True])]
    assert (_latest_per_code(code, ts) == expected).all()
