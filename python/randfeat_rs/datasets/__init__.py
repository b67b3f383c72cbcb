"""Real regression data shipped with randfeat_rs (UCI yacht, Delve kin8nm).

The files are copies of the data used by the localized-GP paper; see
``load_yacht`` and ``load_kin8nm``.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["load_kin8nm", "load_yacht"]


def _load(name: str, delimiter: str | None) -> tuple[np.ndarray, np.ndarray]:
    with resources.files(__name__).joinpath(name).open("r") as fh:
        data = np.loadtxt(fh, delimiter=delimiter)
    return np.ascontiguousarray(data[:, :-1]), np.ascontiguousarray(data[:, -1])


def load_yacht() -> tuple[np.ndarray, np.ndarray]:
    """UCI "Yacht Hydrodynamics": 308 rows, 6 inputs, target residuary resistance.

    Returns
    -------
    X : ndarray of shape (308, 6), float64
    y : ndarray of shape (308,), float64
    """
    return _load("yacht_hydrodynamics.data", None)


def load_kin8nm() -> tuple[np.ndarray, np.ndarray]:
    """Delve "kin8nm" (robot-arm kinematics): 8,192 rows, 8 inputs.

    Returns
    -------
    X : ndarray of shape (8192, 8), float64
    y : ndarray of shape (8192,), float64
    """
    return _load("kin8nm.csv", ",")
