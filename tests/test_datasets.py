import numpy as np

from randfeat_rs.datasets import load_kin8nm, load_yacht


def test_shapes_and_finiteness():
    X, y = load_yacht()
    assert X.shape == (308, 6) and y.shape == (308,)
    X2, y2 = load_kin8nm()
    assert X2.shape == (8192, 8) and y2.shape == (8192,)
    for a in (X, y, X2, y2):
        assert a.dtype == np.float64 and np.isfinite(a).all()
