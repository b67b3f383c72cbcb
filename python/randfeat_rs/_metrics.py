"""Metrics of docs/math/gp.rst, "Metrics" (computed in Rust)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from .exceptions import InvalidInputError

__all__ = ["kl_divergence", "mean_nll", "relative_frobenius_error", "rmse"]


def _vector(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise InvalidInputError(f"`{name}` must be 1-D, got {arr.ndim}-D")
    return np.ascontiguousarray(arr)


def kl_divergence(mean_p: Any, var_p: Any, mean_q: Any, var_q: Any) -> float:
    """Mean KL divergence ``KL(N(mean_p, var_p) || N(mean_q, var_q))`` over points.

    ``0.5 * [ln(var_q / var_p) + (var_p + (mean_p - mean_q)**2) / var_q - 1]``
    averaged over the points, with variances floored at 1e-12. The papers'
    convention (docs/math/gp.rst, "Metrics"): ``p`` is the approximate GP, ``q`` the
    exact GP, and both variances are the noisy predictive ones
    (``predict_noisy`` std squared).

    Parameters
    ----------
    mean_p, var_p : array-like of shape (n,)
        Mean and variance of the first Gaussian (the approximation).
    mean_q, var_q : array-like of shape (n,)
        Mean and variance of the second Gaussian (the reference).

    Returns
    -------
    float

    Examples
    --------
    >>> from randfeat_rs import kl_divergence
    >>> round(kl_divergence([0.0], [1.0], [1.0], [2.0]), 10)  # 0.5 ln 2
    0.3465735903
    """
    return float(
        _core.kl_divergence(
            _vector(mean_p, "mean_p"),
            _vector(var_p, "var_p"),
            _vector(mean_q, "mean_q"),
            _vector(var_q, "var_q"),
        )
    )


def rmse(y_true: Any, y_pred: Any) -> float:
    """Root mean squared error ``sqrt(mean((y_true - y_pred)**2))``.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n,)

    Returns
    -------
    float
    """
    return float(_core.rmse(_vector(y_true, "y_true"), _vector(y_pred, "y_pred")))


def mean_nll(y_true: Any, mean: Any, var: Any) -> float:
    """Mean negative log predictive density of Gaussian predictions.

    ``mean_i [0.5 ln(2 pi var_i) + (y_i - mean_i)**2 / (2 var_i)]`` with the
    noisy predictive variances ``var`` (floored at 1e-12).

    Parameters
    ----------
    y_true, mean, var : array-like of shape (n,)

    Returns
    -------
    float
    """
    return float(
        _core.mean_nll(_vector(y_true, "y_true"), _vector(mean, "mean"), _vector(var, "var"))
    )


def relative_frobenius_error(K_approx: Any, K_exact: Any) -> float:
    """Relative Frobenius error ``||K_approx - K_exact||_F / ||K_exact||_F``.

    Parameters
    ----------
    K_approx, K_exact : array-like of shape (n, m)

    Returns
    -------
    float
    """
    a = np.ascontiguousarray(np.asarray(K_approx, dtype=np.float64))
    b = np.ascontiguousarray(np.asarray(K_exact, dtype=np.float64))
    for name, m in (("K_approx", a), ("K_exact", b)):
        if m.ndim != 2:
            raise InvalidInputError(f"`{name}` must be 2-D, got {m.ndim}-D")
    return float(_core.relative_frobenius_error(a, b))
