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
TEST_DEPS := numpy pytest pytest-timeout hypothesis psutil ml_dtypes ruff mypy fsspec xarray "dask[array,distributed]" "moto[server]" boto3 obstore tensorstore
# Optional numcodecs codecs the codec matrix covers (zfpy 1.0.1.post0 breaks `import numcodecs`).
CODEC_DEPS := pcodec "zfpy==1.0.1"
BENCH_DEPS := zarrs tensorstore zarrista matplotlib

.PHONY: all sysdeps venv wheel install test test-rust test-python lint bench check clean zarr-suite

all: test

$(VENV)/.ready:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(VENV)/bin/pip install -q $(TEST_DEPS) $(CODEC_DEPS) "zarr>=3.1" maturin
	touch $@

$(VENV_NEW)/.ready:
	$(PYTHON_NEW) -m venv $(VENV_NEW)
	$(VENV_NEW)/bin/pip install -q -U pip
	$(VENV_NEW)/bin/pip install -q $(TEST_DEPS) $(CODEC_DEPS) "cast-value-rs>=0.4.2" "zarr>=3.2"
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
	cargo clippy --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches

# zarr-python's own test suite, a fast representative part, with zarrpipe's pipeline as the
# default (tests/zarr_suite/run.py runs all of it; --pipeline default for comparison).
zarr-suite: install
	$(VENV)/bin/python tests/zarr_suite/run.py --subset --skip-known --install-deps

check: lint test zarr-suite
	$(VENV)/bin/python -m mypy.stubtest zarrpipe._zarrpipe

# The main job: install, then benchmark zarrpipe against every reader that is installed,
# on sample stores it generates (quick size; BENCH_ARGS="--size full" for ~1 GiB).
bench: install
	$(VENV)/bin/pip install -q $(BENCH_DEPS)
	$(VENV)/bin/python -m zarrpipe bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(VENV_NEW) $(WHEEL_DIR)
