"""GPU offload through wgpu compute shaders (Vulkan, Metal, DX12).

The kernels run in float32 on the device (inputs of either dtype are
converted while they are streamed up; results come back in the input's dtype,
Gram matrices in float64). Inputs larger than the device's buffer limits are
streamed in row chunks.

Device selection (``device=`` arguments): ``"cpu"``; ``"gpu"`` (any adapter,
including a software rasterizer; :class:`~randfeat_rs.GpuError` when there is
none); ``"auto"`` (a hardware adapter when there is one, else the CPU).

The environment variable ``RANDFEAT_GPU`` is read at every call: ``off`` hides
every adapter (as on a machine without one), ``software`` lets ``"auto"`` use
a software rasterizer such as Mesa's lavapipe.

The low-level kernels here take plain arrays; the estimators' ``device="gpu"``
paths run through the fitted feature maps of the compiled core, which also
decide which configurations have a GPU kernel.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from ._validation import float_array
from .exceptions import GpuError, InvalidInputError

__all__ = [
    "dispatch_count",
    "gram",
    "info",
    "is_available",
    "resolve_device",
    "rff_features",
    "set_chunk_bytes",
]

_BUILT = hasattr(_core, "gpu_info")
_NOT_BUILT = "randfeat_rs was built without GPU support (the `gpu` cargo feature)"
# The largest chunk cap (an unsigned 64-bit count of bytes).
_MAX_CHUNK_BYTES = 2**64 - 1


def info() -> Optional[dict[str, Any]]:
    """Describe the GPU adapter randfeat_rs uses, or return None.

    Returns
    -------
    dict or None
        ``name``, ``backend`` ("vulkan", "metal", "dx12"), ``device_type``
        ("discrete", "integrated", "virtual", "cpu" for a software rasterizer,
        "other"), ``driver``, ``software`` (bool), ``fwht_block`` (the row
        length up to which the FWHT runs in workgroup memory), ``limits`` (a
        dict of the device limits the kernels use) and ``dispatches`` (see
        :func:`dispatch_count`). None when no adapter is usable.
    """
    return _core.gpu_info() if _BUILT else None


def is_available() -> bool:
    """Return True when a GPU adapter (hardware or software) is usable."""
    return info() is not None


def dispatch_count() -> int:
    """Return the number of compute dispatches run on the GPU by this process.

    A call that ran on the GPU increases it; a CPU fallback does not.
    """
    return _core.gpu_dispatch_count() if _BUILT else 0


def set_chunk_bytes(nbytes: int) -> None:
    """Cap the bytes of one streamed chunk (default 128 MiB, from 4096 to 2**64 - 1).

    The device's own binding limit caps it too; a row longer than the cap goes
    through alone. Smaller chunks use less device memory and make more
    transfers.

    Raises
    ------
    InvalidInputError
        If ``nbytes`` is not an integer from 4096 to 2**64 - 1.
    """
    if (
        isinstance(nbytes, bool)
        or not isinstance(nbytes, (int, np.integer))
        or not 4096 <= nbytes <= _MAX_CHUNK_BYTES
    ):
        raise InvalidInputError(
            f"`nbytes` must be an integer from 4096 to 2**64 - 1, got {nbytes!r}"
        )
    if not _BUILT:
        raise GpuError(_NOT_BUILT)
    _core.gpu_set_chunk_bytes(int(nbytes))


def resolve_device(device: str) -> str:
    """Return the device a ``device=`` argument runs on: "cpu" or "gpu".

    Raises
    ------
    GpuError
        If ``device="gpu"`` and no adapter is usable.
    InvalidInputError
        If ``device`` is not "cpu", "gpu" or "auto".
    """
    if device not in ("cpu", "gpu", "auto"):
        raise InvalidInputError(f'`device` must be "cpu", "gpu" or "auto", got {device!r}')
    if not _BUILT:
        if device == "gpu":
            raise GpuError(_NOT_BUILT)
        return "cpu"
    return _core.resolve_device(device)


def _require() -> None:
    if not _BUILT:
        raise GpuError(_NOT_BUILT)


def _as(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return arr if arr.dtype == dtype else arr.astype(dtype)


def gram(phi: Any, y: Any = None) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Accumulate ``Phi.T @ Phi`` and ``Phi.T @ y`` on the GPU, in float64.

    ``Phi`` (and ``y``) are streamed through the device once, in float32 row
    chunks. Each entry is a blocked sum on the device (splits of 4096 rows
    combined pairwise) and the chunks are added in float64 on the host, so
    ``|G - Phi.T Phi| <= gamma_64 * (|Phi|.T |Phi|)`` entrywise with
    ``gamma_k = k u / (1 - k u)``, ``u = 2**-24``, while the products and
    sums stay within float32's range (sums beyond it are refused).

    Parameters
    ----------
    phi : array_like of shape (n_samples, n_features)
        float32 or float64 features.
    y : array_like of shape (n_samples,) or (n_samples, n_targets), optional
        Targets (converted to ``phi``'s dtype).

    Returns
    -------
    gram : ndarray of shape (n_features, n_features), float64
        ``Phi.T @ Phi``, exactly symmetric.
    phi_t_y : ndarray of shape (n_features,) or (n_features, n_targets), float64, or None
        ``Phi.T @ y`` (the shape follows ``y``), None without ``y``.

    Raises
    ------
    GpuError
        If no adapter is usable, the device fails, or the ``n_features**2``
        sums (with ``n_features * n_targets`` for ``y``) exceed the device's
        largest binding.
    InvalidInputError
        If ``y`` does not have ``n_samples`` rows, ``phi`` or ``y`` holds
        NaN or infinite values, or an entry of the products overflows
        float32's range (about 3.4e38) on the device.
    """
    _require()
    p = float_array(phi, "phi", (2,))
    if y is None:
        g, _ = _core.gpu_gram(p, None)
        return g, None
    yv = float_array(y, "y")
    y2 = _as(yv.reshape(-1, 1) if yv.ndim == 1 else yv, p.dtype)
    g, b = _core.gpu_gram(p, y2)
    return g, (b.reshape(-1) if yv.ndim == 1 else b)


def rff_features(
    x: Any,
    w: Any,
    phases: Any = None,
    *,
    variant: str = "cos_bias",
    scale: float = 1.0,
) -> np.ndarray:
    """Random Fourier features (docs/math/fourier.rst, "Feature variants") computed on the GPU.

    ``cos_bias``: ``scale * cos(x @ w.T + phases)``, ``m`` columns.
    ``cos_sin``: ``scale * [cos(x @ w.T) | sin(x @ w.T)]``, ``2 m`` columns.
    The projection is tiled in float32 on the device; sin/cos use an explicit
    range reduction, so features are within about ``1e-4 * |scale|`` of the
    exact values for projections of moderate size. For a large argument ``t``
    (a projection plus its phase) the error grows as ``2**-23 * |t|``, the
    order of ``t``'s own float32 rounding; every feature stays within
    ``[-|scale|, |scale|]``.

    Parameters
    ----------
    x : array_like of shape (n_samples, d)
        float32 or float64 input.
    w : array_like of shape (m, d)
        Frequencies, one per row (converted to ``x``'s dtype).
    phases : array_like of shape (m,), optional
        Required for ``cos_bias``, not allowed for ``cos_sin``.
    variant : {"cos_bias", "cos_sin"}, default="cos_bias"
    scale : float, default=1.0
        Multiplies every feature (e.g. ``sigma * sqrt(2 / D)``).

    Returns
    -------
    ndarray of shape (n_samples, m) or (n_samples, 2 m), dtype of ``x``

    Raises
    ------
    GpuError
        If no adapter is usable or the device fails.
    InvalidInputError
        If the shapes disagree, the phases do not match the variant,
        ``scale`` is not finite, ``x`` holds NaN or infinite values, or the
        projections ``x @ w.T`` overflow float32's range on the device.
    """
    _require()
    xa = float_array(x, "x", (2,))
    wa = _as(float_array(w, "w", (2,)), xa.dtype)
    pa = None if phases is None else _as(float_array(phases, "phases", (1,)), xa.dtype)
    return _core.gpu_rff(xa, wa, pa, variant=str(variant), scale=float(scale))
