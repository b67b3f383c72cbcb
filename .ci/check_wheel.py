"""Check a built wheel the way a user on another Linux machine meets it.

Usage: ``python .ci/check_wheel.py dist/wheel/<name>.whl`` (``make wheel-test``).

1. The file itself: an abi3 wheel tagged ``manylinux_2_17`` whose extension
   asks for no glibc symbol newer than 2.17, is stripped (no symbol table, no
   debug sections, no paths of the build machine), and ships the license
   (``.dist-info/licenses/LICENSE``, ``License-Expression: MIT``), the type
   stubs and the data files.
2. A fresh virtual environment (``python -m venv``) gets the wheel with its
   optional ``dask`` extra (the README's Dask section runs as a doctest) and
   only the dependencies they declare, resolved by pip.
3. From a directory outside the repository (so the source tree cannot be
   imported instead), a smoke test runs each estimator family once and
   round-trips a fitted model through pickle, then the README's doctests run
   with the standard library's ``doctest`` (no pytest in that environment).

Prints one line per check and ends with ``wheel: N passed, 0 failed``; exits
non-zero on the first failure.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSED = 0


def ok(what: str) -> None:
    global PASSED
    PASSED += 1
    print(f"ok: {what}", flush=True)


def fail(what: str) -> None:
    print(f"FAILED: {what}", flush=True)
    print(f"wheel: {PASSED} passed, 1 failed", flush=True)
    sys.exit(1)


def elf_sections(blob: bytes) -> list[str]:
    """Names of the sections of a 64-bit little-endian ELF file."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        fail("the extension is not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        (name,) = struct.unpack_from("<I", blob, base)
        offset, size = struct.unpack_from("<QQ", blob, base + 0x18)
        return name, offset, size

    _, str_off, str_size = header(shstrndx)
    strtab = blob[str_off : str_off + str_size]
    names = []
    for i in range(shnum):
        name = header(i)[0]
        names.append(strtab[name : strtab.index(b"\0", name)].decode())
    return names


def check_file(wheel: Path) -> None:
    tags = wheel.name.removesuffix(".whl").split("-")[-3:]
    if tags[:2] != ["cp39", "abi3"]:
        fail(f"{wheel.name}: expected the cp39-abi3 tags, got {tags[:2]}")
    platforms = tags[2].split(".")
    if "manylinux_2_17_x86_64" not in platforms:
        fail(f"{wheel.name}: no manylinux_2_17_x86_64 platform tag in {platforms}")
    ok(f"tags {'-'.join(tags)}")

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = next(n.split("/")[0] for n in names if ".dist-info/" in n)
        license_path = f"{dist_info}/licenses/LICENSE"
        if license_path not in names:
            fail(f"{license_path} is not in the wheel")
        if zf.read(license_path) != (ROOT / "LICENSE").read_bytes():
            fail(f"{license_path} differs from the repository's LICENSE")
        metadata = zf.read(f"{dist_info}/METADATA").decode()
        if "License-Expression: MIT" not in metadata.splitlines():
            fail("METADATA has no 'License-Expression: MIT' line")
        if "License-File: LICENSE" not in metadata.splitlines():
            fail("METADATA has no 'License-File: LICENSE' line")
        ok(f"license shipped ({license_path}, License-Expression: MIT)")

        for needed in (
            "randfeat_rs/_core.pyi",
            "randfeat_rs/py.typed",
            "randfeat_rs/datasets/yacht_hydrodynamics.data",
            "randfeat_rs/datasets/kin8nm.csv",
        ):
            if needed not in names:
                fail(f"{needed} is not in the wheel")
        ok("type stubs and data files shipped")

        sos = [n for n in names if re.fullmatch(r"randfeat_rs/_core\.abi3\.so", n)]
        if len(sos) != 1:
            fail(f"expected one randfeat_rs/_core.abi3.so, found {sos}")
        blob = zf.read(sos[0])

    sections = elf_sections(blob)
    debug = [s for s in sections if s == ".symtab" or s.startswith(".debug")]
    if debug:
        fail(f"the extension is not stripped: it has {debug}")
    cargo_home = os.environ.get("CARGO_HOME") or str(Path.home() / ".cargo")
    for leak in (str(ROOT), cargo_home):
        if leak.encode() in blob:
            fail(f"the extension contains the build machine's path {leak!r}")
    ok(f"extension stripped ({len(blob) / 2**20:.1f} MiB, no build paths)")

    glibc = {tuple(map(int, v.split(b"."))) for v in re.findall(rb"GLIBC_(\d+\.\d+)", blob)}
    newest = max(glibc)
    if newest > (2, 17):
        fail(f"the extension needs glibc {newest[0]}.{newest[1]} > 2.17")
    ok(f"newest glibc symbol version {newest[0]}.{newest[1]} <= 2.17")


SMOKE = r"""
import pickle
import sys
from pathlib import Path

import numpy as np
import randfeat_rs as rf
from randfeat_rs.datasets import load_yacht

assert Path(rf.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), rf.__file__
x = np.random.default_rng(0).standard_normal((64, 16))
assert np.allclose(rf.fwht(rf.fwht(x, normalized=True), normalized=True), x)
X, y = load_yacht()
X = (X - X.mean(0)) / X.std(0)
y = (y - y.mean()) / y.std()
for est in (
    rf.RandomFourierFeatures(256, sampler="orthogonal", random_state=0),
    rf.PolynomialSketch(256, degree=2, random_state=0),
    rf.MaclaurinFeatures(128, length_scale=2.0, random_state=0),
    rf.NystroemFeatures(64, random_state=0),
):
    Z = est.fit_transform(X.astype(np.float32))
    assert Z.shape == (len(X), est.n_components) and Z.dtype == np.float32, est
Z = rf.RandomBinningFeatures(32, random_state=0).fit_transform(X)
assert Z.nnz == 32 * len(X)
gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(256, random_state=0)).fit(X, y)
again = pickle.loads(pickle.dumps(gp))
assert np.array_equal(again.predict(X[:10]), gp.predict(X[:10]))
loc = rf.LocalizedMaclaurinGPR(32, threshold=2.0, random_state=0).fit(X, y)
mean, std = loc.predict(X[:20], return_std=True)
assert np.isfinite(mean).all() and (std > 0).all()
exact = rf.ExactGPR(random_state=0).fit(X[:100], y[:100])
assert np.isfinite(exact.log_marginal_likelihood_)
try:
    rf.fwht(np.zeros(6))
except ValueError as e:
    assert "power of two" in str(e)
else:
    raise AssertionError("no ValueError for a length of 6")
info = rf.gpu_info()
print("gpu:", None if info is None else info["name"])
"""

README_DOCTESTS = r"""
import doctest
import sys

result = doctest.testfile("README.md", module_relative=False)
print(f"README doctests: {result.attempted - result.failed} passed, {result.failed} failed")
sys.exit(1 if result.failed or not result.attempted else 0)
"""


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: check_wheel.py WHEEL")
    wheel = Path(sys.argv[1]).resolve()
    check_file(wheel)

    with tempfile.TemporaryDirectory(prefix="randfeat-wheel-") as tmp:
        env_dir = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
        py = str(env_dir / "bin" / "python")
        pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        if subprocess.run([*pip, f"{wheel}[dask]"]).returncode != 0:
            fail("pip install of the wheel with its dask extra")
        ok("installed into a fresh venv with its declared dependencies and the dask extra")

        # Run where no randfeat_rs source is importable.
        work = Path(tmp) / "work"
        work.mkdir()
        shutil.copy(ROOT / "README.md", work / "README.md")
        env_run = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
        }
        env_run["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env_run.get('PATH', '')}"
        if subprocess.run([py, "-W", "error", "-c", SMOKE], cwd=work, env=env_run).returncode:
            fail("smoke test in the fresh venv")
        ok("smoke test (every estimator family, pickle, errors, gpu_info)")
        if subprocess.run([py, "-c", README_DOCTESTS], cwd=work, env=env_run).returncode:
            fail("README doctests in the fresh venv")
        ok("README doctests")
    print(f"wheel: {PASSED} passed, 0 failed", flush=True)


if __name__ == "__main__":
    main()
