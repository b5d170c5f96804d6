# toktoktok: every target creates the virtual environment it needs.
#
#   make demo                 build the demo corpus and train the demo tokenizer
#   make test                 run the tests
#   make bench                benchmark against Hugging Face tokenizers and rustbpe
#   make bench-memory         peak RSS against working_set_mb, and sampling (benchmarks/MEMORY.md)
#   make stage STAGE=train CONFIG=configs/demo.yaml [PHASE=English]
#                             run one stage of a config (ingest, train, export, run)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

CONFIG ?= configs/demo.yaml
STAGE  ?= run
PHASE  ?=

.PHONY: venv demo demo-data test bench bench-memory stage clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plot,ray]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

demo-data: $(STAMP)
	$(BIN)/python data/build_demo.py data/demo

demo: demo-data
	$(BIN)/toktok run -c configs/demo.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,bench]'
	$(BIN)/python benchmarks/bench.py

bench-memory: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,bench]'
	$(BIN)/python benchmarks/bench_memory.py

stage: $(STAMP)
	$(BIN)/toktok $(STAGE) -c $(CONFIG) $(if $(PHASE),--phase "$(PHASE)")

clean:
	rm -rf out data/demo
