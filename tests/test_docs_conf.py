"""The docstring hook of docs/conf.py: a plain-text ``name_`` (an attribute
or shape name ending in an underscore) would be a reStructuredText link and
fail ``make docs``; the hook escapes it outside literals and doctests only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

CONF = Path(__file__).resolve().parent.parent / "docs" / "conf.py"


def _hook():
    spec = importlib.util.spec_from_file_location("randfeat_docs_conf", CONF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._escape_trailing_underscores


def _escaped(*lines: str) -> list[str]:
    out = list(lines)
    _hook()(None, "class", "x", None, None, out)
    return out


def test_shapes_in_type_fields_are_escaped_names_are_not():
    assert _escaped(
        "X : array_like of shape (n_samples, n_features_in_)",
        "n_features_in_ : int",
        "    Number of features seen at fit (degree_ of the map).",
    ) == [
        "X : array_like of shape (n_samples, n_features_in\\_)",
        "n_features_in_ : int",
        "    Number of features seen at fit (degree\\_ of the map).",
    ]


def test_literals_doctests_and_literal_blocks_are_left_alone():
    lines = (
        "``n_features_in_`` and ``(ln l_1,",
        "ln noise_variance)`` or ``n_components_`` with n_components_",
        ">>> est.n_features_in_",
        "Example::",
        "",
        "    est.degree_",
        "after degree_",
    )
    assert _escaped(*lines) == [
        "``n_features_in_`` and ``(ln l_1,",
        "ln noise_variance)`` or ``n_components_`` with n_components\\_",
        ">>> est.n_features_in_",
        "Example::",
        "",
        "    est.degree_",
        "after degree\\_",
    ]
