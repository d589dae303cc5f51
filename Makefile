# The two commands of the README. Both install what is missing first (scripts/bootstrap).
.PHONY: demo test bootstrap lint bench clean-runs

VENV ?= .venv
PY := $(VENV)/bin/python

bootstrap:
	bash scripts/bootstrap

## make demo: the claims suite on the local stack, ending in runs/index.html
demo: bootstrap
	$(VENV)/bin/driftlab suite

## make test: the test suite (real services, no mocks)
test: bootstrap
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest

bench: bootstrap
	$(PY) -m benchmarks

clean-runs:
	rm -rf runs
