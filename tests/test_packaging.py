"""What the published packages carry: the sdist (``maturin sdist``) and the
crate (``cargo package --list``) hold the license and what their users build,
and nothing else (no tests, benches, docs, data of the benches, build output).

The wheel is checked by ``make wheel-test`` (``.ci/check_wheel.py``), which
builds it first.
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tool(name: str) -> str:
    """The venv's maturin, or a tool on PATH (cargo); missing is a failure."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    assert found, f"{name} is needed to check the packages"
    return found


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> tarfile.TarFile:
    out = tmp_path_factory.mktemp("sdist")
    subprocess.run(
        [tool("maturin"), "sdist", "--out", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (archive,) = out.glob("*.tar.gz")
    return tarfile.open(archive)


def test_sdist_ships_the_license_and_the_sources(sdist: tarfile.TarFile) -> None:
    names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for needed in (
        "LICENSE",
        "README.md",
        "PKG-INFO",
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "src/lib.rs",
        "src/gpu/shaders/fwht.wgsl",
        "python/randfeat_rs/__init__.py",
        "python/randfeat_rs/_core.pyi",
        "python/randfeat_rs/datasets/yacht_hydrodynamics.data",
    ):
        assert needed in names
    top = {n.split("/")[0] for n in names}
    assert top <= {"LICENSE", "README.md", "PKG-INFO", "pyproject.toml", "Cargo.toml"} | {
        "Cargo.lock",
        "src",
        "python",
    }, top
    (root,) = {n.split("/")[0] for n in sdist.getnames()}
    license_text = sdist.extractfile(f"{root}/LICENSE").read()
    assert license_text == (ROOT / "LICENSE").read_bytes()


def test_sdist_metadata_is_pep_639(sdist: tarfile.TarFile) -> None:
    (root,) = {n.split("/")[0] for n in sdist.getnames()}
    meta = email.parser.Parser().parsestr(sdist.extractfile(f"{root}/PKG-INFO").read().decode())
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert tuple(map(int, meta["Metadata-Version"].split("."))) >= (2, 4)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Source"] == "https://github.com/randfeat-rs/randfeat_rs"
    assert urls["Documentation"] == "https://randfeat-rs.readthedocs.io"


def test_crate_holds_only_what_rust_users_build() -> None:
    listing = subprocess.run(
        [tool("cargo"), "package", "--list", "--allow-dirty", "--locked"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    files = set(listing)
    for needed in ("LICENSE", "README.md", "Cargo.toml", "Cargo.lock", "src/lib.rs"):
        assert needed in files
    shaders = {f for f in files if f.startswith("src/gpu/shaders/")}
    assert shaders == {
        f"src/gpu/shaders/{p.name}" for p in (ROOT / "src/gpu/shaders").glob("*.wgsl")
    }
    allowed_top = {"LICENSE", "README.md", "Cargo.toml", "Cargo.toml.orig", "Cargo.lock"}
    allowed_top.add(".cargo_vcs_info.json")
    stray = {f for f in files if not f.startswith("src/") and f not in allowed_top}
    assert not stray
    assert not any(f.endswith((".py", ".png", ".csv", ".data")) for f in files)


def test_no_reference_to_a_document_outside_the_repository() -> None:
    """Docs, docstrings and comments cite the project's own pages (docs/math/),
    never the design-time specification, which ships in no package."""
    name = "ALGORITHMS" + ".md"
    roots = ["src", "python", "benches", "examples", "docs", "tests", ".ci"]
    tops = ("README.md", "BENCHMARKS.md", "Cargo.toml", "Makefile", "pyproject.toml")
    files = [ROOT / f for f in tops]
    for root in roots:
        for path in (ROOT / root).rglob("*"):
            skip = {"_build", "auto_examples", "__pycache__"}
            if path.is_file() and not skip.intersection(path.parts):
                files.append(path)
    offenders = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if name in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
