# randfeat_rs: every target sets itself up from a fresh clone.
#   make test   build, lint and run every test (what CI runs)
#   make demo   the main job: fit the models on the shipped data, print a table
#   make bench  criterion benches + side-by-side comparison scripts

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: test demo bench develop lint rust-test py-test stubtest clean

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

# Release build of the extension, installed into .venv.
develop: $(STAMP)
	$(VENV)/bin/maturin develop --release --quiet

lint: $(STAMP)
	cargo fmt --all -- --check
	cargo clippy --release --all-targets -- -D warnings
	cargo clippy --release --all-targets --features python -- -D warnings
	$(VENV)/bin/ruff check python tests benches examples
	$(VENV)/bin/ruff format --check python tests benches examples

# The pure core, without the python feature (release: the statistical tests are heavy).
rust-test:
	cargo test --release

stubtest: develop
	$(VPY) -m mypy.stubtest randfeat_rs._core --ignore-missing-stub

py-test: develop
	$(VPY) -m pytest -q -W error

test: lint rust-test stubtest py-test

demo: develop
	$(VPY) examples/demo.py

bench: develop
	cargo bench --bench fwht -- --warm-up-time 1 --measurement-time 3
	$(VPY) benches/compare_fwht.py
	$(VPY) benches/compare_maclaurin.py

clean:
	rm -rf $(VENV) target
