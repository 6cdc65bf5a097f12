# Quickstart: `make demo` and `make test` each create .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "lavaflow needs Python 3.11 or newer (set PYTHON=python3.x)")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev]'
	@# Ray and pyarrow for the sweep's Ray and Parquet tests, apart: where no wheel fits, the Ray test
	@# skips saying why, and the table test checks the note that replaces results.parquet
	$(PY) -m pip install --quiet -e '.[ray]' || echo "warning: Ray could not be installed; the sweep's Ray test will skip"
	$(PY) -m pip install --quiet -e '.[parquet]' || echo "warning: pyarrow could not be installed; no results.parquet in the sweep test"
	@# The dashboard's web server (Starlette, uvicorn), apart as well: without it its tests skip saying why
	$(PY) -m pip install --quiet -e '.[dashboard]' || echo "warning: the dashboard extra could not be installed; its tests will skip"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/lavaflow simulate examples/spark-wordcount.yaml --compare --report spark-wordcount-report.html

test: $(STAMP)
	$(PY) -m pytest

# Quality gates (also run by .ci/run): lint, formatting, strict types of the core and controllers.
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(PY) -m mypy

format: $(STAMP)
	$(VENV)/bin/ruff check --fix src tests benchmarks
	$(VENV)/bin/ruff format src tests benchmarks

bench: $(STAMP)
	$(PY) benchmarks/placement.py --nodes 1000 --pods 10000
	$(PY) benchmarks/placement.py --nodes 5000 --pods 50000

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info spark-wordcount-report.html
