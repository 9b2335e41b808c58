# Crucible: `make run` to use it, `make test` to check it. Both set up first.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements/lock.txt | sha256sum | cut -c1-12)
export HF_HUB_OFFLINE := 1

.PHONY: setup system-packages run test lint bench reliability

# Each phase prints a numbered line as it starts and how long it took as it ends (scripts/phase.sh);
# on a restart every phase finds its work done and the whole takes seconds.
# The project's own bytecode, written once: a machine that sets PYTHONDONTWRITEBYTECODE would
# otherwise compile every module again in each process it starts (0.6 s of each worker's start).
PACKAGES := $(patsubst %/__init__.py,%,$(wildcard */__init__.py))
PHASE := bash scripts/phase.sh
LOCKED_PACKAGES := $(shell grep -c '==' requirements/lock.txt)
setup:
	@$(PHASE) 1 6 "System packages" $(MAKE) -s --no-print-directory system-packages
	@$(PHASE) 2 6 "Python dependencies ($(LOCKED_PACKAGES) packages)" $(MAKE) -s --no-print-directory $(STAMP)
	@$(PHASE) 3 6 "Bytecode" bash -c '$(BIN)/python -m compileall -q -j 0 $(PACKAGES) manage.py >/dev/null'
	@$(PHASE) 4 6 "Database migrations" $(BIN)/python manage.py migrate --no-input -v0
	@$(PHASE) 5 6 "Sandbox test-runner venv" bash -c '$(BIN)/python scripts/build_runner_env.py >/dev/null'
	@$(PHASE) 6 6 "Bundled model (SmolLM2-135M, converted once)" $(BIN)/python scripts/fetch_model.py

# System packages: installed only when missing and only when we may (root).
SYSTEM_NEEDS := bwrap:bubblewrap redis-server:redis-server chromium:chromium git:git podman:podman runc:runc \
	catatonit:catatonit go:golang-go node:nodejs npm:npm
system-packages:
	@missing=""; for pair in $(SYSTEM_NEEDS); do cmd=$${pair%%:*}; pkg=$${pair##*:}; \
	  { command -v $$cmd || test -e $$cmd; } >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "warning: missing system packages:$$missing (install them, or run make as root)"; fi; \
	fi

$(STAMP): requirements/lock.txt
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@# uv where it can be had (a minute, with bytecode), else pip (three and a half); each shows its progress.
	@bash scripts/install_deps.sh $(BIN) requirements/lock.txt
	@rm -f $(VENV)/.installed-* && touch $@

run: setup
	@bash scripts/run.sh

# The suite runs in 4 to 8 processes (pytest-xdist; each worker its own database, var/ and Redis
# namespace), 4 even on 2 cores: most tests wait on subprocesses, workers and sandboxes (13.4 min
# with 2 workers on 2 cores, 11.4 with 4, no faster with 6); the known long poles start first
# (tests/long_poles.py). PYTEST_ARGS="-n 0" runs it in one process; any other pytest option goes
# there too. The 30 slowest tests are listed at the end, to see where the time goes.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 4); [ $$n -lt 4 ] && n=4; [ $$n -gt 8 ] && n=8; echo $$n)
PYTEST_ARGS ?= -n $(TEST_WORKERS) --dist worksteal --durations=30
test: setup
	@DJANGO_SETTINGS_MODULE=webapp.settings_test $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: setup
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .
	@$(BIN)/mypy .
	@$(BIN)/lint-imports --no-cache

# CHECK=1 exits non-zero when a bench misses a target (each a ratio to the same work done bare, same run).
bench: setup
	@$(BIN)/python -m bench $(if $(CHECK),--check) $(BENCH_ARGS)

# Long runs, not part of `make test` (about 10 minutes): the live layer soaked (SOAK_ARGS, default 3 minutes),
# the load runs on loopback (LOAD_ARGS, e.g. "--trajectories 2000"; scripts/reliability), then the
# figures table of docs/reliability.md redrawn from var/reliability/*.json. Fails if any run did not hold.
SOAK_ARGS ?= --minutes 3
reliability: setup
	@status=0; $(BIN)/python scripts/soak_live.py $(SOAK_ARGS) || status=1; \
	$(BIN)/python -m scripts.reliability $(LOAD_ARGS) || status=1; \
	$(BIN)/python -m scripts.reliability.report; exit $$status
