"""Sphinx configuration of the randfeat_rs documentation (``make docs``).

The site is built from the installed package (``make docs`` runs ``make
develop`` first), so the API pages document the extension that was built.
The gallery scripts in ``examples/gallery`` run at every build and their
figures go into the pages. The build needs no network: intersphinx links to
NumPy, SciPy and scikit-learn are made only when ``RANDFEAT_DOCS_INTERSPHINX=1``
(they fetch the other projects' inventories).
"""

from __future__ import annotations

import os
import re
import warnings

import randfeat_rs

project = "randfeat_rs"
author = "randfeat_rs contributors"
copyright = "2026, randfeat_rs contributors"
release = randfeat_rs.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
if os.environ.get("RANDFEAT_DOCS_INTERSPHINX") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
        "sklearn": ("https://scikit-learn.org/stable", None),
    }

exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
templates_path: list[str] = []
html_static_path: list[str] = []
html_theme = "alabaster"
html_title = f"randfeat_rs {release}"
html_theme_options = {
    "description": "Random features for kernel methods and Gaussian processes, in Rust",
    "github_user": "randfeat-rs",
    "github_repo": "randfeat_rs",
    "fixed_sidebar": True,
}

# Every equation is numbered within its page and can be cited with :eq:.
math_number_all = False
math_eqref_format = "({number})"

# scikit-learn's metadata-routing setters (set_fit_request, ...) are
# generated on every estimator class; their docstrings link into
# scikit-learn's own site.
autodoc_default_options = {
    "members": True,
    "member-order": "bysource",
    "exclude-members": ",".join(
        f"set_{method}_request"
        for method in ("fit", "partial_fit", "predict", "score", "transform")
    ),
}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": "../examples/gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": "True",
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "min_reported_time": 1,
}

# The docstrings write shapes and attribute names such as ``n_features_in_``
# as plain text (in numpydoc type fields), where reStructuredText would read
# ``name_`` as a link. Escape the trailing underscore outside literals,
# doctests and literal blocks, before numpydoc parses the docstring.
_TRAILING_UNDERSCORE = re.compile(r"(?<![\w`\\])([A-Za-z][A-Za-z0-9_]*[A-Za-z0-9])_(?![\w`])")
_PARAM_HEAD = re.compile(r"^(\s*[\w*, ]+ : )")


def _escape_line(line: str, in_literal: bool) -> tuple[str, bool]:
    """Escapes the line outside ``literals``; a literal may continue from the
    previous line (``in_literal``). Returns the line and whether a literal is
    still open at its end."""
    head = ""
    match = _PARAM_HEAD.match(line)
    if match and not in_literal:
        head, line = match.group(1), line[match.end() :]
    parts = line.split("``")
    for i in range(1 if in_literal else 0, len(parts), 2):
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\1\\_", parts[i])
    return head + "``".join(parts), in_literal != (len(parts) % 2 == 0)


def _escape_trailing_underscores(app, what, name, obj, options, lines) -> None:
    literal_indent = None
    in_literal = False
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        if stripped.startswith((">>>", "...")):
            continue
        if not stripped:
            in_literal = False
        lines[i], in_literal = _escape_line(line, in_literal)
        if stripped.endswith("::"):
            literal_indent = indent


def setup(app) -> None:
    # Before numpydoc (priority 500) turns the sections into fields.
    app.connect("autodoc-process-docstring", _escape_trailing_underscores, priority=400)


# Matplotlib draws the gallery figures without a display.
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg", category=UserWarning)
