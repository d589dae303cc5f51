# The two commands of the README. Both install what is missing first (scripts/bootstrap).
.PHONY: demo demo-docker test bootstrap lint bench clean-runs

VENV ?= .venv
PY := $(VENV)/bin/python

bootstrap:
	bash scripts/bootstrap

## make demo: the claims suite on the local stack, ending in runs/index.html
demo: bootstrap
	$(VENV)/bin/driftlab suite

## make demo-docker: the same suite on the docker backend (builds the images once)
demo-docker:
	bash scripts/bootstrap --docker
	$(VENV)/bin/driftlab suite --backend docker

## make test: the test suite (real services, no mocks; the docker backend's tests
## need the engine and images, which the bootstrap's --docker installs and builds).
## TEST_WORKERS processes, each with its own stack, take whole files (module fixtures
## such as a test file's own stack start once); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3
test:
	bash scripts/bootstrap --docker
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile

bench: bootstrap
	$(PY) -m benchmarks

clean-runs:
	rm -rf runs
