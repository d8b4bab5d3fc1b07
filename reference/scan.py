"""The sequential reference scan the grader checks every submission against.

For int32 the result is the exact prefix sum reduced modulo 2^32 into int32 — the same
wrap-around as 32-bit two's-complement addition on the GPU, whatever the order of additions.
It is computed as an int64 running sum (exact for fewer than 2^32 elements of int32), then wrapped.

For float32 the result is a float64 running sum of the float32 inputs: a reference more precise
than any float32 scan, which submissions are compared with under a tolerance.
"""

from __future__ import annotations

import numpy as np

_EXACT = {np.dtype(np.int32): np.int64, np.dtype(np.float32): np.float64}
_RESULT = {np.dtype(np.int32): np.dtype(np.int32), np.dtype(np.float32): np.dtype(np.float64)}


def _check(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"scan input must be 1-D (got shape {x.shape})")
    if x.dtype not in _EXACT:
        raise TypeError(f"scan input dtype must be one of {sorted(map(str, _EXACT))} (got {x.dtype})")
    return x


def inclusive_scan(x: np.ndarray) -> np.ndarray:
    """Inclusive prefix sum: ``out[i] = x[0] + ... + x[i]``.

    Args:
        x: 1-D int32 or float32 array of n elements (n may be 0).

    Returns:
        A new 1-D array of n elements: int32 with the GPU's wrap-around for int32 input; float64
        (accumulated in float64) for float32 input.

    Raises:
        ValueError: x is not 1-D.  TypeError: x's dtype is not supported.
    """
    x = _check(x)
    return np.cumsum(x, dtype=_EXACT[x.dtype]).astype(_RESULT[x.dtype])


def exclusive_scan(x: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum: ``out[0] = 0`` (the identity), ``out[i] = x[0] + ... + x[i-1]``.

    Same shapes, dtypes and errors as :func:`inclusive_scan`.
    """
    x = _check(x)
    out = np.zeros(x.size, dtype=_RESULT[x.dtype])
    if x.size > 1:
        out[1:] = inclusive_scan(x[:-1])
    return out
