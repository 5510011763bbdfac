# The dev loop. `make test` and `make bench` set everything up on a fresh machine (Rust,
# Python 3.11 and maturin present); `.ci/run` runs `make check`.

PYTHON ?= python3.11
# Newest zarr-python needs Python >= 3.12; tests run there too when it exists.
PYTHON_NEW ?= $(shell PYENV_VERSION=3.12.1 python3.12 -c "import sys; print(sys.executable)" 2>/dev/null)
# Builds live outside the clone, so repeated runs (and CI) reuse them.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/zarrpipe/target
WHEEL_DIR := $(CARGO_TARGET_DIR)/wheels
VENV := .venv
VENV_NEW := .venv-py312
# The benchmark's own venv: zarrpipe, maturin and the readers it compares ([bench]), nothing
# of the tests' (torch, JAX, the docs tools).
VENV_BENCH := .venv-bench
# The dependencies come from pyproject.toml's extras: [test] (what tests/ needs), [dev] (lint,
# stub check, maturin, the docs site), [loaders] (torch and JAX, for the DLPack and DataLoader
# tests: installed in .venv only, the other venvs skip those tests) and [bench] (the other
# Zarr readers), read by .ci/extras.py so that a venv gets its tools before zarrpipe is built.
EXTRAS = $(PYTHON) .ci/extras.py
# Fresh venvs that install the built wheel and sdist from the files (dist-check).
DIST_CHECK_DIR ?= .dist-check
# The wheel's venv runs every test; the sdist's (same code, compiled again) a fast subset.
SDIST_TESTS ?= test_read_api.py test_tensor_contract.py test_engine.py test_doc_examples.py

.PHONY: all sysdeps venv wheel sdist install test test-rust test-python lint bench check clean zarr-suite docs dist-check

all: test

$(VENV)/.ready: pyproject.toml .ci/extras.py
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(EXTRAS) test dev loaders > $(VENV)/requirements.txt
	$(VENV)/bin/pip install -q -r $(VENV)/requirements.txt
	touch $@

$(VENV_NEW)/.ready: pyproject.toml .ci/extras.py
	$(PYTHON_NEW) -m venv $(VENV_NEW)
	$(VENV_NEW)/bin/pip install -q -U pip
	$(EXTRAS) test > $(VENV_NEW)/requirements.txt
	$(VENV_NEW)/bin/pip install -q -r $(VENV_NEW)/requirements.txt "zarr>=3.2"
	touch $@

$(VENV_BENCH)/.ready: pyproject.toml .ci/extras.py
	$(PYTHON) -m venv $(VENV_BENCH)
	$(VENV_BENCH)/bin/pip install -q -U pip "maturin>=1.8,<2"
	$(EXTRAS) bench > $(VENV_BENCH)/requirements.txt
	$(VENV_BENCH)/bin/pip install -q -r $(VENV_BENCH)/requirements.txt
	touch $@

venv: $(VENV)/.ready

# zarrs' zfp codec builds zfp's bundled C source with cmake and binds it with bindgen
# (libclang): both come from Debian's packages where missing (CI runs as root).
sysdeps:
	@command -v cmake >/dev/null 2>&1 && ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq cmake libclang-dev; }

# One release wheel (abi3: the same file serves every Python >= 3.11), built once.
wheel: venv sysdeps
	rm -f $(WHEEL_DIR)/zarrpipe-*.whl
	$(VENV)/bin/maturin build --release --quiet --out $(WHEEL_DIR)

# The source distribution (it compiles the Rust crates when installed).
sdist: venv
	rm -f $(WHEEL_DIR)/zarrpipe-*.tar.gz
	$(VENV)/bin/maturin sdist --out $(WHEEL_DIR)

install: wheel
	$(VENV)/bin/pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/zarrpipe-*.whl
	$(if $(PYTHON_NEW),$(MAKE) $(VENV_NEW)/.ready && $(VENV_NEW)/bin/pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/zarrpipe-*.whl)

test-rust: sysdeps
	cargo test --workspace --release

test-python: install
	cd tests && ../$(VENV)/bin/python -m pytest -q -p no:cacheprovider
	$(if $(PYTHON_NEW),cd tests && ../$(VENV_NEW)/bin/python -m pytest -q -p no:cacheprovider,@echo "python3.12 not found: skipping the newest-zarr test run")

# Every test: Rust, then Python on Python 3.11 (newest zarr for 3.11) and 3.12 (newest zarr).
test: test-rust test-python

lint: venv sysdeps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches

# zarr-python's own test suite, a fast representative part, with zarrpipe's pipeline as the
# default (tests/zarr_suite/run.py runs all of it; --pipeline default for comparison).
zarr-suite: install
	$(VENV)/bin/python tests/zarr_suite/run.py --subset --skip-known --install-deps

# The documentation site (mkdocs.yml, docs/) into site/; warnings are errors.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Installs the built wheel and the sdist, each from its file with the [test] extra, into a
# fresh venv, and runs the tests there against the installed package.
dist-check: wheel sdist
	.ci/dist-check $(PYTHON) $(DIST_CHECK_DIR) "$(SDIST_TESTS)" $(WHEEL_DIR)/zarrpipe-*.whl $(WHEEL_DIR)/zarrpipe-*.tar.gz

check: lint test zarr-suite docs dist-check
	$(VENV)/bin/python -m mypy.stubtest zarrpipe._zarrpipe

# The main job: install, then benchmark zarrpipe against every reader that is installed,
# on sample stores it generates (quick size; BENCH_ARGS="--size full" for ~1 GiB).
bench: $(VENV_BENCH)/.ready sysdeps
	rm -f $(WHEEL_DIR)/zarrpipe-*.whl
	$(VENV_BENCH)/bin/maturin build --release --quiet --out $(WHEEL_DIR)
	$(VENV_BENCH)/bin/pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/zarrpipe-*.whl
	$(VENV_BENCH)/bin/python -m zarrpipe bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(VENV_NEW) $(VENV_BENCH) $(WHEEL_DIR) $(DIST_CHECK_DIR) site
