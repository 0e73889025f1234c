# Set-up is part of every target: a fresh machine needs only python3 (3.11+) and make.
# `make demo` installs what the product needs at run time; the test targets add the dev extras
# (pytest, Playwright, ruff, mypy) and the example plugin the tests evaluate.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev

.PHONY: demo test test-slow test-ci lint bench clean

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e .
	touch $(STAMP)

$(DEV): $(STAMP) examples/clonemem-example-plugin/pyproject.toml
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	# the example plugin, installed as a user installs a third-party plugin (tests evaluate it)
	$(PY) -m pip install --quiet --no-deps -e examples/clonemem-example-plugin
	touch $(DEV)

demo: $(STAMP)
	$(VENV)/bin/clonemem demo

# two processes (the machine's two cores), each group of tests on one of them so its module and shared
# fixtures are built once: a file, or the files sharing a session-built warehouse; the longest first
# (tests/conftest.py)
test: $(DEV)
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# the long scenarios (kill/resume, faults, budgets, real Prefect servers and workers, a browser, real
# conversations); CI runs them after `make test`. Two processes, each test file on one of them, except
# the scenarios that assert wall-clock bounds (marked `timing`), which then run alone; the slowest listed.
test-slow: $(DEV)
	$(PY) -m pytest -m "slow and not timing" -n 2 --dist loadfile --durations=20
	$(PY) -m pytest -m "slow and timing" --durations=5

# CI's share of the long scenarios (marked `ci`): one of each kind, so CI stays within its time budget
test-ci: $(DEV)
	$(PY) -m pytest -m "slow and ci" -n 2 --dist loadfile --durations=10

# static checks: ruff's lint and format (configured in pyproject.toml) and mypy with no error (tools/check_types.py)
lint: $(DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/check_types.py

bench: $(DEV)
	$(PY) benchmarks/import_release.py
	$(PY) benchmarks/metrics_speed.py
	$(PY) benchmarks/qa_cues.py
	$(PY) benchmarks/validity.py
	$(PY) benchmarks/gym_validity.py
	$(PY) benchmarks/generation.py
	$(PY) benchmarks/retrieval_scale.py
	$(PY) benchmarks/dashboard_pages.py
	$(PY) benchmarks/evaluate_scale.py
	$(PY) benchmarks/locomo.py
	$(PY) benchmarks/memory_systems.py
	$(PY) benchmarks/landing.py

clean:
	rm -rf $(VENV) clonemem.duckdb clonemem.duckdb.wal clonemem-demo
