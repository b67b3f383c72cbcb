"""The fast Walsh-Hadamard transform."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from ._validation import float_array
from .exceptions import InvalidDtypeError, InvalidInputError
from .gpu import resolve_device

# The native-byte-order float dtypes, as the (singleton) dtype objects that
# ``ndarray.dtype`` returns: a tuple lookup by identity/equality is cheap.
_NATIVE_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


def fwht(
    x: Any,
    *,
    normalized: bool = False,
    out: Optional[np.ndarray] = None,
    device: str = "cpu",
) -> np.ndarray:
    """Fast Walsh-Hadamard transform along the last axis.

    Computes ``H @ x`` for a 1-D ``x`` and ``x @ H`` (one transform per row)
    for a 2-D ``x``, where ``H`` is the ``n x n`` Hadamard matrix in
    Sylvester order (the ordering of :func:`scipy.linalg.hadamard`), with
    ``n log2 n`` additions per row, multithreaded and SIMD-vectorized.

    Parameters
    ----------
    x : array_like of shape (n,) or (n_rows, n)
        float32 or float64 data; ``n`` must be a power of two (zero-pad
        otherwise). C-contiguous input is read in place; other layouts are
        read once through their strides.
    normalized : bool, default=False
        Return ``H x / sqrt(n)``, the orthonormal transform (its own inverse).
    out : ndarray, optional
        Where to write the result: same shape and dtype as ``x``, writeable.
        ``out=x`` transforms in place; an ``out`` that overlaps ``x``
        otherwise is refused, and one that shares ``x``'s buffer without
        overlapping it (e.g. the other half of its columns) is written from
        a copy of ``x``.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where to compute (see :mod:`randfeat_rs.gpu`). The GPU computes in
        float32 (float64 input is rounded to float32 on the way); "auto" uses
        a hardware GPU when there is one, else the CPU.

    Returns
    -------
    ndarray of the same shape and dtype as ``x``
        The transform (``out`` itself when given).

    Raises
    ------
    InvalidDtypeError
        If ``x`` (or ``out``) is not float32/float64 (a :class:`TypeError`).
    InvalidInputError
        If ``x`` is not 1-D or 2-D, ``n`` is not a power of two, or ``out``
        does not match ``x``, or ``device`` is unknown (a :class:`ValueError`).
    GpuError
        If ``device="gpu"`` and no GPU adapter is usable.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import fwht
    >>> fwht(np.array([1.0, 2.0, 3.0, 4.0]))
    array([10., -2., -4.,  0.])
    """
    # Fast path for the common call (a native float ndarray on the CPU): the
    # per-call checks cost as much as transforming a short vector.
    on_gpu = device != "cpu" and resolve_device(device) == "gpu"
    if type(x) is np.ndarray and x.dtype in _NATIVE_FLOATS and 1 <= x.ndim <= 2:
        arr = x
    else:
        arr = float_array(x, "x")
    rows = arr.reshape(1, -1) if arr.ndim == 1 else arr
    if out is None:
        if on_gpu:
            res = _core.gpu_fwht(rows, normalized=bool(normalized))
        else:
            res = _core.fwht(rows, normalized=bool(normalized))
        return res.reshape(arr.shape)
    if out is arr and not on_gpu:
        if not out.flags.writeable:
            raise InvalidInputError("`out` is read-only")
        _core.fwht_inplace(rows, normalized=bool(normalized))
        return out
    if not isinstance(out, np.ndarray):
        raise InvalidDtypeError(f"`out` must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != arr.dtype:
        raise InvalidDtypeError(f"`out` must have dtype {arr.dtype}, got {out.dtype}")
    if out.shape != arr.shape:
        raise InvalidInputError(f"`out` must have shape {arr.shape}, got {out.shape}")
    if not out.flags.writeable:
        raise InvalidInputError("`out` is read-only")
    out_rows = out.reshape(1, -1) if out.ndim == 1 else out
    if out is x or (
        out_rows.__array_interface__["data"][0] == rows.__array_interface__["data"][0]
        and out_rows.strides == rows.strides
    ):
        if on_gpu:
            _core.gpu_fwht(out_rows, out_rows, normalized=bool(normalized))
        else:
            _core.fwht_inplace(out_rows, normalized=bool(normalized))
    elif np.shares_memory(out, arr):
        raise InvalidInputError("`out` overlaps `x` without being `x` itself")
    else:
        if np.may_share_memory(out, arr):
            # Disjoint parts of one buffer (e.g. two column halves): NumPy's
            # borrow tracking cannot tell them apart, so read a copy of x.
            rows = rows.copy()
        if on_gpu:
            _core.gpu_fwht(rows, out_rows, normalized=bool(normalized))
        else:
            _core.fwht_into(rows, out_rows, normalized=bool(normalized))
    return out
