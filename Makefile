# toktoktok: every target creates the virtual environment it needs.
#
#   make demo                 build the demo corpus and train the demo tokenizer
#   make test                 run the tests
#   make bench                benchmark against Hugging Face tokenizers and rustbpe
#   make bench-memory         peak RSS against working_set_mb, and sampling (benchmarks/results/MEMORY.md)
#   make bench-scale          toktoktok (local and Ray), rustbpe, HF on 0.1 / 0.3 / 1.2 GB of kernel source, 100 MB
#                             of English prose and 5 GB of several packages' text (benchmarks/results/SCALE.md;
#                             builds its corpora under SCALE_DATA with apt-get download, the
#                             prose from ../shared/corpora beside the checkout, skipped if absent;
#                             SCALE_REPS runs a point, the 5 GB point once; the merge loop alone on 1 and 2 threads
#                             at 1.2 GB, with a projection to more cores);
#                             then its shapes part: ingest of the same kernel text as parquet, Arrow, JSON lines, a folder, ...
#   make bench-superword      on 100 MB of English prose (../shared/corpora beside the checkout): subword then
#                             superword phases at three transition points against one plain phase (benchmarks/results/SUPERWORD.md)
#   make stage STAGE=train CONFIG=configs/demo.yaml [PHASE=English]
#                             run one stage of a config (ingest, train, export, run)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# two stamps: the demo needs the runtime dependencies alone, the tests their extras too
STAMP  := $(VENV)/.installed-$(HASH)
TESTS  := $(VENV)/.installed-test-$(HASH)

CONFIG ?= configs/demo.yaml
STAGE  ?= run
PHASE  ?=

SCALE_DATA ?= /work/scale-data
SCALE_REPS ?= 3

.PHONY: venv demo demo-data test bench bench-memory bench-scale bench-superword stage clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	rm -f $(VENV)/.installed-*
	touch $@

$(TESTS): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,ray]'
	touch $@

venv: $(TESTS)

demo-data: $(STAMP)
	$(BIN)/python data/build_demo.py data/demo

demo: demo-data
	$(BIN)/toktok compile
	$(BIN)/toktok run -c configs/demo.yaml

# The timed runs start toktok processes: byte-compile the project first, as pip does for an
# installed package (an editable install is compiled on first import, unless PYTHONDONTWRITEBYTECODE
# is set, as on the machine of the figures in benchmarks/: 0.1-0.25 s more a process)
COMPILE := $(BIN)/python -m compileall -q toktoktok stages

test: $(TESTS)
	$(BIN)/python -m pytest -q

bench: $(TESTS)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,bench]'
	$(COMPILE)
	$(BIN)/python benchmarks/run.py --section peers

bench-memory: $(TESTS)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,bench]'
	$(COMPILE)
	$(BIN)/python benchmarks/run.py --section memory

bench-scale: $(TESTS)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,ray,bench]'
	$(COMPILE)
	$(BIN)/python benchmarks/run.py --section scale --data $(SCALE_DATA) --reps $(SCALE_REPS)
	$(BIN)/python benchmarks/run.py --section shapes --data $(SCALE_DATA) --reps $(SCALE_REPS)

bench-superword: $(TESTS)
	$(BIN)/python -m pip install --quiet -e '.[test,plot,bench]'
	$(COMPILE)
	$(BIN)/python benchmarks/run.py --section superword

stage: $(STAMP)
	$(BIN)/toktok $(STAGE) -c $(CONFIG) $(if $(PHASE),--phase "$(PHASE)")

clean:
	rm -rf out data/demo
