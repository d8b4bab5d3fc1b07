"""The sequential reference scan against numpy.cumsum and a plain loop."""

import numpy as np
import pytest

from reference.scan import exclusive_scan, inclusive_scan, scan_int32_threaded


def _loop_inclusive(x):
    out, acc = [], 0
    for v in x:
        acc = (acc + int(v) + 2**31) % 2**32 - 2**31  # 32-bit two's-complement addition
        out.append(acc)
    return np.array(out, dtype=np.int32)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000, 1 << 16, (1 << 20) + 1])
def test_inclusive_matches_numpy_cumsum(n):
    x = np.random.default_rng(n).integers(-1000, 1000, n, dtype=np.int32)
    np.testing.assert_array_equal(inclusive_scan(x), np.cumsum(x, dtype=np.int32))


@pytest.mark.parametrize("n", [1, 2, 5, 4096, 100_001])
def test_it_wraps_around_like_int32_on_overflow(n):
    x = np.random.default_rng(n).integers(2**30, 2**31 - 1, n, dtype=np.int32)  # sums overflow fast
    got = inclusive_scan(x)
    np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int32))
    if n <= 4096:
        np.testing.assert_array_equal(got, _loop_inclusive(x))
    assert got.dtype == np.int32


@pytest.mark.parametrize("n", [1, 2, 3, 1025])
def test_exclusive_is_inclusive_shifted_with_identity_first(n):
    x = np.random.default_rng(n).integers(-(2**31), 2**31 - 1, n, dtype=np.int32)
    ex = exclusive_scan(x)
    assert ex[0] == 0
    np.testing.assert_array_equal(ex[1:], np.cumsum(x, dtype=np.int32)[:-1])


def test_float32_is_accumulated_in_float64():
    x = np.full(2**20, 0.1, dtype=np.float32)
    got = inclusive_scan(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.arange(1, 2**20 + 1) * np.float64(np.float32(0.1)), rtol=1e-12)
    assert abs(np.cumsum(x)[-1] - got[-1]) > 1  # a float32 running sum drifts; the reference does not
    assert exclusive_scan(x)[0] == 0 and exclusive_scan(x).dtype == np.float64


def test_it_rejects_other_shapes_and_dtypes():
    with pytest.raises(ValueError, match="1-D"):
        inclusive_scan(np.zeros((2, 2), dtype=np.int32))
    with pytest.raises(TypeError, match="int64"):
        exclusive_scan(np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000, 4096, 4097, 100_003])
@pytest.mark.parametrize("inclusive", [True, False])
def test_the_threaded_int32_scan_equals_the_sequential_one_bit_for_bit(n, inclusive):
    # Large values so the running sums wrap around many times; small chunks so there are many.
    x = np.random.default_rng(n).integers(2**29, 2**31 - 1, n, dtype=np.int32)
    for chunk, threads in ((1024, 3), (4096, 1), (7, 2), (1 << 22, None)):
        got = scan_int32_threaded(x, inclusive=inclusive, chunk=chunk, threads=threads)
        want = inclusive_scan(x) if inclusive else exclusive_scan(x)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


def test_the_threaded_scan_takes_int32_only():
    with pytest.raises(TypeError, match="int32"):
        scan_int32_threaded(np.zeros(3, dtype=np.float32), inclusive=True)
