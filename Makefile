# Two entry points, each doing its own set-up from nothing: `make run`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# No model hub, no telemetry: everything runs offline.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export PREFECT_HOME ?= $(CURDIR)/.prefect
export TOKENIZERS_PARALLELISM := false

.PHONY: run test test-all lint bench bench-scale faults clean install postgres label-studio label-studio-install

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/csk run cicero

# The default suite (under 10 minutes on 2 cores): every rule, every reader against the bad-input
# corpus, an end-to-end flow per pipeline, a seeded subset of the fault trials. One pytest-xdist worker
# per CPU (each with its own Prefect test server): on 2 cores 9.5 minutes against 20 in one process.
# `test-all` adds the tests marked slow (real-sample flows, CICERO on a Dask cluster, the cron
# scheduler, the servers), in one process: they start servers on fixed ports.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n auto

# ruff, configured in pyproject.toml (CI runs it before the tests).
lint: $(STAMP)
	$(BIN)/ruff check .

test-all: $(STAMP)
	$(BIN)/python -m pytest -q

# Fault injection at every stage of DECO and CORECODE (kill -9, exceptions, full disk, lost and damaged artifacts).
faults: $(STAMP)
	$(BIN)/python bench/faults.py

bench: $(STAMP)
	$(BIN)/python bench/bench_embed_dedup.py

# Issue 14's figures at the papers' scale (about 85 minutes on 2 cores): CICERO at 1K-28K dialogues vs its
# compute floor, dedup growth, contention, the candidate filter and AF at 53K instances, GPU when present.
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py

# The PostgreSQL server tests/kernel/test_server.py starts for Prefect (Debian's package; it skips without it).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
	  { $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -q && \
	    $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -q --no-install-recommends postgresql; }

# Label Studio in its own venv (its pins are not ours), pinned, offline; Playwright drives Debian's chromium
# for the screenshots of the slow test (tests/kernel/test_label_studio.py).
LS_VENV := .venv-label-studio
$(LS_VENV)/.installed: docker/label-studio/requirements.txt docker/label-studio/requirements-screenshots.txt
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/python -m pip install -q -r docker/label-studio/requirements.txt -r docker/label-studio/requirements-screenshots.txt
	touch $@

label-studio-install: $(LS_VENV)/.installed

# A local server on 127.0.0.1:8089 (data in .label-studio/); then:
#   export LABEL_STUDIO_URL=http://127.0.0.1:8089 LABEL_STUDIO_API_KEY=$(LS_ADMIN_TOKEN)
LS_ADMIN_TOKEN ?= csk-local-admin-token-0123456789
label-studio: label-studio-install
	LS_DATA_DIR=$(CURDIR)/.label-studio LS_ADMIN_PASSWORD=$${LS_ADMIN_PASSWORD:-csk-admin-pass} \
	  LS_ADMIN_TOKEN=$(LS_ADMIN_TOKEN) docker/label-studio/serve.sh

clean:
	rm -rf artifacts .prefect
