# The dev loop. `make test` and `make bench` set everything up on a fresh machine (Rust,
# Python 3.11 and maturin present); `.ci/run` runs `make check`.

PYTHON ?= python3.11
# Newest zarr-python needs Python >= 3.12; tests run there too when it exists.
PYTHON_NEW ?= $(shell PYENV_VERSION=3.12.1 python3.12 -c "import sys; print(sys.executable)" 2>/dev/null)
# Every Python >= 3.11 on the machine: dist-check installs the wheel into a fresh venv of each.
PYTHON_313 ?= $(shell PYENV_VERSION=3.13.0 python3.13 -c "import sys; print(sys.executable)" 2>/dev/null)
DIST_PYTHONS ?= $(PYTHON) $(PYTHON_NEW) $(PYTHON_313)
# Which of them run the whole suite there (the others: the smoke test and the fast tests). By
# default the newest, which `make test` does not cover; `make test` runs the whole suite with
# the same wheel file on 3.11 and 3.12. DIST_SUITE="$(DIST_PYTHONS)" runs it on every one.
DIST_SUITE ?= $(lastword $(DIST_PYTHONS))
# The wheel the tests install is the release wheel of this machine's platform: Linux x86_64,
# manylinux2014 (glibc 2.17), linked by zig (.ci/build-wheel). `make dist` builds every Linux one.
WHEEL_TARGET ?= x86_64-unknown-linux-gnu
DIST_TARGETS ?= x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl
DIST_DIR ?= dist
# The venv's maturin, zig (the ziglang package) and auditwheel come first on PATH for builds.
WITH_VENV = PATH="$(CURDIR)/$(VENV)/bin:$$PATH"
# Builds live outside the clone, so repeated runs (and CI) reuse them.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/zarrpipe/target
WHEEL_DIR := $(CARGO_TARGET_DIR)/wheels
VENV := .venv
VENV_NEW := .venv-py312
# The benchmark's own venv: zarrpipe, maturin and the readers it compares ([bench]), nothing
# of the tests' (torch, JAX, the docs tools). On the newest Python here, so that it gets the
# newest zarr-python and its FusedCodecPipeline (zarr >= 3.3 needs Python >= 3.12).
VENV_BENCH := .venv-bench
PYTHON_BENCH ?= $(or $(PYTHON_NEW),$(PYTHON))
# The dependencies come from pyproject.toml's extras: [test] (what tests/ needs), [dev] (lint,
# stub check, maturin, the docs site), [loaders] (torch and JAX, for the DLPack and DataLoader
# tests: installed in .venv only, the other venvs skip those tests) and [bench] (the other
# Zarr readers), read by .ci/extras.py so that a venv gets its tools before zarrpipe is built.
EXTRAS = $(PYTHON) .ci/extras.py
# Fresh venvs that install the built wheel and sdist from the files (dist-check).
DIST_CHECK_DIR ?= .dist-check

.PHONY: all venv wheel sdist dist install test test-rust test-python lint bench check clean zarr-suite docs dist-check

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
	$(PYTHON_BENCH) -m venv $(VENV_BENCH)
	$(VENV_BENCH)/bin/pip install -q -U pip $$($(EXTRAS) release)
	$(EXTRAS) bench > $(VENV_BENCH)/requirements.txt
	$(VENV_BENCH)/bin/pip install -q -r $(VENV_BENCH)/requirements.txt
	touch $@

venv: $(VENV)/.ready

# One release wheel (abi3: the same file serves every Python >= 3.11), built once, with the
# command the release workflow runs.
wheel: venv
	rm -f $(WHEEL_DIR)/zarrpipe-*.whl
	$(WITH_VENV) .ci/build-wheel $(WHEEL_TARGET) $(WHEEL_DIR)

# The source distribution (pip compiles the Rust crates from it: Rust and pip are all it needs).
sdist: venv
	rm -f $(WHEEL_DIR)/zarrpipe-*.tar.gz
	$(VENV)/bin/maturin sdist --out $(WHEEL_DIR)

# Every Linux release wheel (x86_64 and aarch64 manylinux2014, x86_64 musllinux_1_2) and the
# sdist into dist/, each checked (tag, libraries, licenses, metadata). macOS and Windows wheels
# are built by the release workflow on their own runners (RELEASING.md).
dist: venv
	rm -rf $(DIST_DIR)
	for target in $(DIST_TARGETS); do $(WITH_VENV) .ci/build-wheel $$target $(DIST_DIR) || exit 1; done
	$(VENV)/bin/maturin sdist --out $(DIST_DIR)
	$(WITH_VENV) .ci/check-dist $(DIST_DIR)/*

install: wheel
	$(VENV)/bin/pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/zarrpipe-*.whl
	$(if $(PYTHON_NEW),$(MAKE) $(VENV_NEW)/.ready && $(VENV_NEW)/bin/pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/zarrpipe-*.whl)

test-rust:
	cargo test --workspace --release

test-python: install
	cd tests && ../$(VENV)/bin/python -m pytest -q -p no:cacheprovider
	$(if $(PYTHON_NEW),cd tests && ../$(VENV_NEW)/bin/python -m pytest -q -p no:cacheprovider,@echo "python3.12 not found: skipping the newest-zarr test run")

# Every test: Rust, then Python on Python 3.11 (newest zarr for 3.11) and 3.12 (newest zarr).
test: test-rust test-python

lint: venv
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests benches .ci/smoke.py
	$(VENV)/bin/ruff format --check python tests benches .ci/smoke.py
	$(VENV)/bin/python -m mypy
	$(VENV)/bin/actionlint .github/workflows/*.yml

# zarr-python's own test suite, a fast representative part, with zarrpipe's pipeline as the
# default (tests/zarr_suite/run.py runs all of it; --pipeline default for comparison).
zarr-suite: install
	$(VENV)/bin/python tests/zarr_suite/run.py --subset --skip-known --install-deps

# The documentation site (mkdocs.yml, docs/) into site/; warnings are errors.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The built wheel and sdist as users get them: checked (tag, libraries, licenses, metadata),
# then the wheel installed from its file into a fresh venv of every Python >= 3.11 here, each
# running the smoke test and the tests (DIST_SUITE: the whole suite) with no Rust, cmake or
# libclang on PATH, and the sdist compiled by pip in a fresh venv, then the fast tests
# (.ci/test-installed).
dist-check: wheel sdist
	$(WITH_VENV) .ci/check-dist $(WHEEL_DIR)/zarrpipe-*.whl $(WHEEL_DIR)/zarrpipe-*.tar.gz
	for py in $(DIST_PYTHONS); do \
		case " $(DIST_SUITE) " in *" $$py "*) what=suite ;; *) what=fast ;; esac; \
		.ci/test-installed $$py $(WHEEL_DIR)/zarrpipe-*.whl $(DIST_CHECK_DIR)/wheel-$$($$py -c "import sys; print('%d.%d' % sys.version_info[:2])") $$what || exit 1; \
	done
	.ci/test-installed $(PYTHON) $(WHEEL_DIR)/zarrpipe-*.tar.gz $(DIST_CHECK_DIR)/sdist fast

check: lint test zarr-suite docs dist-check
	$(VENV)/bin/python -m mypy.stubtest zarrpipe._zarrpipe

# The main job: install, then benchmark zarrpipe against every reader that is installed,
# on sample stores it generates (quick size; BENCH_ARGS="--size full" for ~1 GiB).
bench: $(VENV_BENCH)/.ready
	rm -f $(WHEEL_DIR)/zarrpipe-*.whl
	PATH="$(CURDIR)/$(VENV_BENCH)/bin:$$PATH" .ci/build-wheel $(WHEEL_TARGET) $(WHEEL_DIR)
	$(VENV_BENCH)/bin/pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/zarrpipe-*.whl
	$(VENV_BENCH)/bin/python -m zarrpipe bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(VENV_NEW) $(VENV_BENCH) $(WHEEL_DIR) $(DIST_CHECK_DIR) $(DIST_DIR) site
