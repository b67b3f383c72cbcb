# randfeat_rs: every target sets itself up from a fresh clone.
#   make test   build, lint and run every test (what CI runs)
#   make demo   the main job: fit the models on the shipped data, print a table
#   make bench  criterion benches + side-by-side comparison scripts
#   make wheel  the portable wheel (abi3, manylinux_2_17, stripped) in dist/
#   make wheel-test  that wheel in a fresh venv: a smoke test and the README
#   make docs   the documentation site (docs/_build/html), warnings as errors
#   make fuzz   property-based fuzzing of the Python API and the core (10,000+ cases)
#   make bench-anchors  opt-in: the PyTorch + GPyTorch anchors side by side (.venv-anchors)

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
ANCHORS := .venv-anchors
APY     := $(ANCHORS)/bin/python
ASTAMP  := $(ANCHORS)/.installed
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PYTHONDONTWRITEBYTECODE := 1
# Quiet Mesa's "lavapipe is not a conformant vulkan implementation" banner.
export MESA_VK_IGNORE_CONFORMANCE_WARNING := 1

.PHONY: test demo bench bench-anchors develop lint rust-test py-test stubtest clean vulkan wheel wheel-test docs fuzz

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

# The GPU tests run for real on any machine: without a Vulkan driver, install
# Mesa's software one (lavapipe) and the loader (Debian/Ubuntu, as root).
vulkan:
	@if ldconfig -p | grep -q libvulkan && ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "make: installing Mesa's software Vulkan driver (mesa-vulkan-drivers, libvulkan1)"; \
	  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends mesa-vulkan-drivers libvulkan1 >/dev/null; \
	else echo "make: no Vulkan driver and no apt-get; install one (e.g. Mesa's lavapipe)"; exit 1; fi

# Release build of the extension, installed into .venv.
develop: $(STAMP)
	$(VENV)/bin/maturin develop --release --quiet

lint: $(STAMP)
	cargo fmt --all -- --check
	cargo clippy --release --all-targets -- -D warnings
	cargo clippy --release --all-targets --all-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --features gpu --quiet
	$(VENV)/bin/ruff check python tests benches examples docs/conf.py .ci
	$(VENV)/bin/ruff format --check python tests benches examples docs/conf.py .ci

# The pure core, without the python feature (release: the statistical tests are
# heavy), with the GPU kernels (run on lavapipe when there is no GPU) and the
# serde round trips.
rust-test: vulkan
	cargo test --release --features gpu,serde

stubtest: develop
	$(VPY) -m mypy.stubtest randfeat_rs._core

py-test: develop vulkan
	$(VPY) -m pytest -q -W error

test: lint rust-test stubtest py-test

# Property-based fuzzing: the public Python API (tests/test_fuzz.py, 1,700
# cases for each of its 7 tests, 11,900 in all) and the core's public
# functions (the fuzz_ proptests, 2,000 cases each). make test runs the same
# tests with a short profile (20 cases per Python test, proptest's 256).
fuzz: develop
	RANDFEAT_FUZZ_EXAMPLES=1700 $(VPY) -m pytest -q -W error tests/test_fuzz.py
	PROPTEST_CASES=2000 cargo test --release --features gpu,serde --lib fuzz_

demo: develop
	$(VPY) examples/demo.py

bench: develop
	cargo bench --bench fwht -- --warm-up-time 1 --measurement-time 3
	cargo bench --bench syrk -- --warm-up-time 1 --measurement-time 3
	cargo bench --bench floor -- --warm-up-time 1 --measurement-time 3
	cargo bench --bench sparse -- --warm-up-time 1 --measurement-time 5
	$(VPY) benches/compare_fwht.py
	$(VPY) benches/compare_binning.py
	$(VPY) benches/compare_gp.py
	$(VPY) benches/compare_gpc.py
	$(VPY) benches/compare_feature_gp_fit.py
	$(VPY) benches/compare_sparse_gp.py
	$(VPY) benches/compare_localized_gp.py
	$(VPY) benches/compare_fourier.py
	$(VPY) benches/gpu.py
	$(VPY) benches/compare_sketch.py
	$(VPY) benches/compare_maclaurin.py
	$(VPY) benches/compare_dask.py
	$(VPY) benches/paper_000.py
	$(VPY) benches/paper_002.py

# Opt-in, never run by test or bench: the GPyTorch anchors of the sparse-GP,
# feature-GP and classification goals, timed side by side with randfeat_rs
# in one run (benches/anchors/, several minutes on 2 cores). PyTorch (CPU
# use of the PyPI wheel, about 6 GB with its CUDA libraries) and GPyTorch
# live in their own .venv-anchors, pinned in requirements-anchors.txt; the
# release wheel of this checkout (built with .venv's maturin, abi3) is
# installed into it.
$(ASTAMP): requirements-anchors.txt
	$(PYTHON) -m venv $(ANCHORS)
	$(APY) -m pip install --quiet --disable-pip-version-check -r requirements-anchors.txt
	touch $(ASTAMP)

bench-anchors: develop $(ASTAMP)
	rm -rf target/anchors-wheel
	$(VENV)/bin/maturin build --release --interpreter $(VPY) --out target/anchors-wheel --quiet
	$(APY) -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall \
	  target/anchors-wheel/*.whl
	$(APY) benches/anchors/sgpr_kin8nm.py
	$(APY) benches/anchors/gp_step_100k.py
	$(APY) benches/anchors/dirichlet_digits.py

# The wheel PyPI users get on Linux: the stable ABI (abi3, CPython >= 3.9),
# linked by zig against glibc 2.17 symbols (manylinux2014, which pip accepts
# on every maintained distribution), the extension stripped of its symbols
# and debug paths. Rebuilt every time (maturin decides what is up to date).
# maturin finds zig as `python -m ziglang` with the first python on PATH.
# The path prefixes of the checkout and of cargo's registry are remapped, so
# the panic locations inside the library name no directory of this machine.
CARGO_HOME ?= $(HOME)/.cargo
wheel: $(STAMP)
	rm -rf dist/wheel
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
	RUSTFLAGS="--remap-path-prefix=$(CARGO_HOME)=cargo --remap-path-prefix=$(CURDIR)=randfeat_rs" \
	  $(VENV)/bin/maturin build --release --strip --zig --compatibility manylinux_2_17 \
	  --interpreter $(VPY) --out dist/wheel --quiet
	@ls -l dist/wheel/*.whl

wheel-test: wheel vulkan
	$(PYTHON) .ci/check_wheel.py dist/wheel/*.whl

docs: develop
	$(VPY) -m sphinx -W --keep-going -b html -j 1 docs docs/_build/html
	@echo "make: the site is docs/_build/html/index.html"

clean:
	rm -rf $(VENV) $(ANCHORS) target dist docs/_build docs/auto_examples docs/api/generated
