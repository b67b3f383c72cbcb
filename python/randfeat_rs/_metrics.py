"""Metrics of docs/math/gp.rst, "Metrics" (computed in Rust)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._validation import real_array

__all__ = ["kl_divergence", "mean_nll", "relative_frobenius_error", "rmse"]


def _vector(x: Any, name: str) -> np.ndarray:
    return real_array(x, name, (0, 1)).reshape(-1)


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

    Raises
    ------
    InvalidDtypeError
        If an argument is a scipy.sparse matrix or holds no real numbers
        (complex, bool, object, strings: a :class:`TypeError` naming it).
    InvalidInputError
        If an argument is ragged, has the wrong number of dimensions, the
        lengths differ, a value is not finite, a variance is negative, or
        the divergence itself exceeds the float range (means that differ by
        far more than the standard deviations; a :class:`ValueError`).
        Every divergence below about 1.8e308 is returned, whatever the
        magnitudes of its arguments.

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

    Raises
    ------
    InvalidDtypeError
        If an argument is a scipy.sparse matrix or holds no real numbers
        (complex, bool, object, strings: a :class:`TypeError` naming it).
    InvalidInputError
        If an argument is ragged, has the wrong number of dimensions, the
        lengths differ, a value is not finite, or the error itself exceeds
        the float range (a :class:`ValueError`); errors below about 1.8e308
        are returned, whatever the magnitudes of the arguments.
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

    Raises
    ------
    InvalidDtypeError
        If an argument is a scipy.sparse matrix or holds no real numbers
        (complex, bool, object, strings: a :class:`TypeError` naming it).
    InvalidInputError
        If an argument is ragged, has the wrong number of dimensions, the
        lengths differ, a value is not finite, a variance is negative, or
        the mean itself exceeds the float range (a :class:`ValueError`).
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

    Raises
    ------
    InvalidDtypeError
        If an argument is a scipy.sparse matrix or holds no real numbers
        (complex, bool, object, strings: a :class:`TypeError` naming it).
    InvalidInputError
        If an argument is ragged, has the wrong number of dimensions, the
        lengths differ, a value is not finite, ``K_exact`` is zero, or the
        ratio itself exceeds the float range (a :class:`ValueError`); the
        norms are computed with scaling, so entries near 1e308 are fine.
    """
    a = real_array(K_approx, "K_approx", (2,))
    b = real_array(K_exact, "K_exact", (2,))
    return float(_core.relative_frobenius_error(a, b))
