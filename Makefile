# posenc: `make` builds the library, the tool and the tests into build/; `make test` runs them.
.DEFAULT_GOAL := all
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
# -O2 with GCC's full loop vectorizer (at -O2 alone GCC 12 vectorizes only loops of a known
# trip count, which left the packing, finiteness and accumulation loops scalar: the fused
# backward at T=64 spent a third of its time there). Vectorizing never reorders a float sum
# (no -ffast-math), so results are the same bits; -fno-math-errno lets sqrtf vectorise too
# (nothing here reads errno). A compiler without the cost-model flag (clang) gets the rest.
VECT    := $(shell echo 'int main(void){return 0;}' | $(CC) -Werror -fvect-cost-model=dynamic -x c - -o /dev/null 2>/dev/null && echo -fvect-cost-model=dynamic)
OPT     ?= -O2 -ftree-vectorize $(VECT) -fno-math-errno
CFLAGS  ?=
SAN     ?=

# -Wno-missing-field-initializers: a compound literal leaves the fields it does not name zero, as C
# defines (the methods' pe_param_spec rows name the model conventions only where they hold)
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-missing-field-initializers
BASE     := -std=c11 -D_POSIX_C_SOURCE=200809L -fPIC $(OPT) -g $(WARN) -Iinclude -Isrc $(SAN)
# OpenBLAS for the projections when present (Debian: libopenblas-dev); plain loops otherwise.
BLAS     := $(shell pkg-config --exists openblas 2>/dev/null && echo yes)
ifeq ($(BLAS),yes)
  BASE    += -DPE_BLAS $(shell pkg-config --cflags openblas)
  LIBBLAS := $(shell pkg-config --libs openblas)
endif
# The trainer (train/, posenc train|compare): OpenMP for parallel runs when the compiler has it,
# cairo for compare's plot (Debian: libcairo2-dev).
OMP      := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
ifeq ($(shell pkg-config --exists cairo fontconfig 2>/dev/null && echo yes),yes)
  TRAIN_CFLAGS := -DPE_CAIRO $(shell pkg-config --cflags cairo fontconfig)
  LIBCAIRO     := $(shell pkg-config --libs cairo fontconfig)
endif
# Data-parallel training (posenc train under mpirun; train/dist.c): Open MPI when pkg-config finds
# it (Debian: libopenmpi-dev); MPI=0 builds without it, as a machine without Open MPI does (in a
# BUILD folder of its own: the objects do not record which it was).
MPI      ?= $(shell pkg-config --exists ompi 2>/dev/null && echo 1 || echo 0)
ifeq ($(MPI),1)
  MPI_CFLAGS := -DPE_MPI $(shell pkg-config --cflags ompi)
  LIBMPI     := $(shell pkg-config --libs ompi)
endif
ALL_CFLAGS := $(BASE) $(CFLAGS)
LDLIBS     := -ljansson $(LIBBLAS) -lm $(OMP)

LIB_SRC := $(wildcard src/*.c src/exec/*.c src/absolute/*.c src/rotary/*.c src/bias/*.c src/relative/*.c)
IO_SRC  := $(wildcard tools/*.c)
CLI_SRC := $(wildcard cli/*.c)
TRAIN_SRC := $(wildcard train/*.c)
TEST_SRC:= $(wildcard tests/unit/test_*.c)
TESTS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
HARNESS := $(BUILD)/obj/tests/unit/harness.o

LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
IO_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(IO_SRC))
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))
TRAIN_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TRAIN_SRC))

# every Python of the build and tests: the project's pinned environment (scripts/deps.sh makes it)
PY := $(abspath .venv/bin/python)

.PHONY: all run demo compare results results-shard results-merge readme plots deps venv test unit cli-test conformance reference python-test asan valgrind fuzz fuzz-coverage fixtures install clean bench bench-readme

# run: the README's first command: Debian packages, the build, then the default comparison (C
# only: it needs no Python environment)
run: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory compare

# demo: every method on a built-in random layer (see `posenc help`)
demo: $(BUILD)/posenc
	$(BUILD)/posenc demo

# compare: the extrapolation experiment (every method, 3 seeds; under 10 min on 2 cores): table,
# CSV and plot into $(BUILD)/compare; tracked files stay as they are
compare: $(BUILD)/posenc
	$(BUILD)/posenc compare --out $(BUILD)/compare

# results: the whole experiment in one go (compare --full, about 12 CPU-hours on an AVX-512 EPYC:
# compare --full --estimate): doc/results.md, its tables, CSVs and plots in doc/results. In pieces:
# make results-shard SHARD=K (K = 0 .. 5, about 2 CPU-hours each; run again, it continues where it
# stopped) writes shard K's run files into doc/results/runs, and make results-merge builds the page
# from every shard's files there (README: --shard K/N and --merge)
RESULTS_SHARDS ?= 6
results: $(BUILD)/posenc
	$(BUILD)/posenc compare --full --out doc/results --results doc/results.md --readme README.md
results-shard: $(BUILD)/posenc
	@test -n "$(SHARD)" || { echo "make results-shard: give SHARD=K, K in 0 .. $$(($(RESULTS_SHARDS) - 1))"; exit 2; }
	$(BUILD)/posenc compare --full --shard $(SHARD)/$(RESULTS_SHARDS) --out doc/results/runs
results-merge: $(BUILD)/posenc
	$(BUILD)/posenc compare --full --merge doc/results/runs --out doc/results --results doc/results.md --readme README.md

# readme: what the README shows, regenerated on this machine: the comparison into doc/compare and
# the README's table, and the pictures into doc/img (bench-readme: the speed summary)
readme: $(BUILD)/posenc
	$(BUILD)/posenc compare --out doc/compare --readme README.md
	@$(MAKE) --no-print-directory plots PLOTS=doc/img

# plots: the README's pictures (posenc plot) and the analyze table into PLOTS ($(BUILD)/img; make
# readme: doc/img); the attention picture is of a small model trained here (a few seconds), on a
# text short enough for its characters to label the axes at this size
PLOTS ?= $(BUILD)/img
plots: $(BUILD)/posenc
	@mkdir -p $(PLOTS)
	$(BUILD)/posenc plot encoding --method sinusoidal --sin_layout concat --length 128 --width 128 --size 800x500 -o $(PLOTS)/encoding_sinusoidal.png
	$(BUILD)/posenc plot similarity --method rope --heads 1 --width 128 --length 512 --size 800x450 -o $(PLOTS)/similarity_rope.png
	$(BUILD)/posenc plot relative --method t5 --length 96 --size 700x560 -o $(PLOTS)/relative_t5.png
	$(BUILD)/posenc plot relative --method alibi --heads 4 --length 64 --size 800x600 -o $(PLOTS)/relative_alibi.png
	$(BUILD)/posenc train --method alibi --steps 600 --width 64 --layers 2 --length 64 --eval 1 --eval-tokens 1024 --quiet --save $(BUILD)/plots_alibi.safetensors > /dev/null
	$(BUILD)/posenc plot attention --checkpoint $(BUILD)/plots_alibi.safetensors --layer 1 --input "let vupo be 4812. vupo is 4812." --size 900x900 -o $(PLOTS)/attention_alibi_trained.png
	$(BUILD)/posenc analyze -o $(PLOTS)/analyze.csv

# deps: install the Debian packages the build and tests need (only those missing); venv: those and
# the pinned Python environment .venv (python/requirements.txt) that the tests run in
deps:
	@bash scripts/deps.sh --no-venv
venv:
	@bash scripts/deps.sh

# all: libposenc.a, libposenc.so, the posenc tool and the unit tests
all: $(BUILD)/libposenc.a $(BUILD)/libposenc.so $(BUILD)/posenc $(TESTS) $(BUILD)/examples/decode $(BUILD)/examples/api

# each object and test program depends on the headers it includes (-MMD: the .d files beside them)
DEPFLAGS := -MMD -MP
-include $(wildcard $(BUILD)/obj/src/*.d $(BUILD)/obj/src/*/*.d $(BUILD)/obj/cli/*.d $(BUILD)/obj/train/*.d $(BUILD)/obj/tools/*.d $(BUILD)/obj/tests/unit/*.d $(BUILD)/tests/*.d $(BUILD)/examples/*.d)

# what the packages found decide (BLAS, cairo, MPI, OpenMP) is part of every object: the stamp
# changes when they do, so a build started before scripts/deps.sh is rebuilt, not kept (an
# object from before OpenBLAS was installed runs the plain loops, 30x slower, and says nothing)
FLAGS_NOW   := $(CC) $(ALL_CFLAGS) $(OMP) $(TRAIN_CFLAGS) $(MPI_CFLAGS) $(LDLIBS) $(LIBCAIRO) $(LIBMPI)
FLAGS_STAMP := $(BUILD)/.flags
ifneq ($(shell cat $(FLAGS_STAMP) 2>/dev/null),$(strip $(FLAGS_NOW)))
  $(shell mkdir -p $(BUILD) && echo '$(strip $(FLAGS_NOW))' > $(FLAGS_STAMP))
endif

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "CC $<"; $(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/libposenc.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# the shared library carries its SONAME (ABI 0); make install puts libposenc.so.0.<version> and the
# two links beside it
SOVERSION := 0
VERSION   := $(shell sed -n 's/^#define PE_VERSION "\(.*\)"/\1/p' include/posenc/core.h)
# only the public API's pe_ symbols are exported (src/libposenc.map)
$(BUILD)/libposenc.so: $(LIB_OBJ) src/libposenc.map
	$(CC) -shared $(SAN) -Wl,-soname,libposenc.so.$(SOVERSION) -Wl,--version-script=src/libposenc.map -o $@ $(LIB_OBJ) $(LDLIBS)

# internal tooling (safetensors, random layers) shared by the tool, tests and benchmarks
$(BUILD)/libposenc_io.a: $(IO_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(TRAIN_OBJ) $(BUILD)/obj/cli/train.o $(BUILD)/obj/cli/compare.o $(BUILD)/obj/cli/compare_tables.o $(BUILD)/obj/cli/compare_run.o: ALL_CFLAGS += $(OMP) $(TRAIN_CFLAGS)
$(BUILD)/obj/train/dist.o: ALL_CFLAGS += $(MPI_CFLAGS)
# the executors (src/exec: fused, decode, their kernels and threads): OpenMP when the compiler has it
$(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/exec/*.c)) $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard cli/bench*.c)): ALL_CFLAGS += $(OMP)
# the figures of `posenc plot` (cli/draw.c) draw with cairo too
$(BUILD)/obj/cli/draw.o: ALL_CFLAGS += $(TRAIN_CFLAGS)

$(BUILD)/posenc: $(CLI_OBJ) $(TRAIN_OBJ) $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a
	$(CC) $(SAN) $(OMP) -o $@ $^ $(LIBCAIRO) $(LIBMPI) $(LDLIBS)

# examples/decode.c: the engine API (KV cache) as a user links it, posenc.h only
$(BUILD)/examples/decode: examples/decode.c $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -o $@ $< $(BUILD)/libposenc.a $(LDLIBS)

# examples/api.c: the README's ten lines as a program, posenc.h only
$(BUILD)/examples/api: examples/api.c $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -o $@ $< $(BUILD)/libposenc.a $(LDLIBS)

# the property metrics of `posenc analyze` (cli/props.c) are tested alone
$(BUILD)/tests/test_analyze: tests/unit/test_analyze.c $(HARNESS) $(BUILD)/obj/cli/props.o $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -Icli -o $@ $< $(HARNESS) $(BUILD)/obj/cli/props.o $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a -lcmocka $(LDLIBS)

# the trainer's tests link the trainer
$(BUILD)/tests/test_train: tests/unit/test_train.c $(HARNESS) $(TRAIN_OBJ) $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) $(OMP) -o $@ $< $(HARNESS) $(TRAIN_OBJ) $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a -lcmocka $(LIBCAIRO) $(LIBMPI) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(HARNESS) $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -o $@ $< $(HARNESS) $(BUILD)/libposenc_io.a $(BUILD)/libposenc.a -lcmocka $(LDLIBS)

# test: Debian's packages and the Python environment (scripts/deps.sh: only what is missing), the
# build, unit tests, CLI tests, the public conformance cases, the reference's own check, the
# Python package's tests, then unit and CLI tests again under ASan+UBSan
test:
	@bash scripts/deps.sh
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit cli-test conformance reference python-test
	@$(MAKE) --no-print-directory asan

# The contract's public cases: the project's copy (tests/conformance, with doc/spec), and those of
# ../shared/conformance too when a checkout has it beside it (it may hold cases the copy lacks).
CONF   := tests/conformance
SHARED := $(patsubst %/check.py,%,$(wildcard ../shared/conformance/check.py))

# reference: the PyTorch reference of tests/ref against the public conformance cases (the
# layer, then the projected form and attn_mask, then multi-axis positions)
reference:
	@for d in $(CONF)/cases $(CONF)/cases-keys $(CONF)/cases-multiaxis $(if $(SHARED),$(SHARED)/cases $(SHARED)/cases-keys $(SHARED)/cases-multiaxis); do \
	    echo "== $$d"; $(PY) tests/ref/check_reference.py $$d | tail -1; \
	    $(PY) tests/ref/check_reference.py $$d > /dev/null || exit 1; done

# python-test: the Python package (python/) with pytest: tests/python against the library, the reference, the public cases
python-test: $(BUILD)/libposenc.so $(BUILD)/posenc
	POSENC_LIBRARY=$(abspath $(BUILD)/libposenc.so) POSENC_CLI=$(abspath $(BUILD)/posenc) OPENBLAS_NUM_THREADS=1 \
	    $(PY) -m pytest -q -p no:cacheprovider tests/python

# unit: every tests/unit/test_*.c (cmocka)
unit: $(TESTS)
	@set -e; for t in $(TESTS); do echo "== $$t"; POSENC_FIXTURES=tests/fixtures $$t; done

# cli-test: exit status 2, one-line message and no output on bad input
cli-test: $(BUILD)/posenc $(BUILD)/examples/decode $(BUILD)/examples/api
	@bash tests/cli/test_cli.sh $(BUILD)/posenc
	@bash tests/cli/test_encode.sh $(BUILD)/posenc
	@bash tests/cli/test_compare.sh $(BUILD)/posenc
	@bash tests/cli/test_shards.sh $(BUILD)/posenc
	@bash tests/cli/test_mpi.sh $(BUILD)/posenc
	@bash tests/cli/test_slurm.sh $(BUILD)/posenc
	@bash tests/cli/test_bench.sh $(BUILD)/posenc
	@bash tests/cli/test_convert_rope.sh $(BUILD)/posenc
	@bash tests/cli/test_plot.sh $(BUILD)/posenc
	@bash tests/cli/test_generate.sh $(BUILD)/posenc
	@bash tests/cli/test_multiaxis.sh $(BUILD)/posenc
	@bash tests/cli/test_hf_config.sh $(BUILD)/posenc
	@bash tests/cli/test_gguf.sh $(BUILD)/posenc
	@bash tests/cli/test_reliability.sh $(BUILD)/posenc
	@bash tests/cli/test_args.sh $(BUILD)/posenc
	@bash tests/cli/test_install.sh $(BUILD)/posenc
	@bash tests/cli/test_layout.sh $(BUILD)/posenc
	@$(BUILD)/examples/decode
	@$(BUILD)/examples/api

# conformance: the public cases for every implemented method, the projected-form and attn_mask
# cases (cases-keys), tests/fixtures, and ../shared's cases where present, through the checker
conformance: $(BUILD)/posenc
	@bash tests/conformance.sh $(BUILD)/posenc $(CONF)/cases
	@for d in $(CONF)/cases-keys $(CONF)/cases-multiaxis tests/fixtures $(if $(SHARED),$(SHARED)/cases $(SHARED)/cases-keys $(SHARED)/cases-multiaxis); do \
	    $(PY) $(CONF)/check.py $(BUILD)/posenc $$d > $(BUILD)/conformance.log 2>&1; rc=$$?; \
	    echo "$$d: $$(tail -1 $(BUILD)/conformance.log)"; \
	    [ $$rc -eq 0 ] || { grep -v '^PASS' $(BUILD)/conformance.log; exit 1; }; done

# asan: everything rebuilt with AddressSanitizer and UndefinedBehaviorSanitizer, unit + CLI tests
asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" unit cli-test

# fuzz: libFuzzer harnesses (tests/fuzz, clang) over the safetensors reader + pe_attend, the
# settings, hf_config, checkpoint loading, the argument parser of the CLI (args), the KV cache
# against the projected form (cache), paged keys against contiguous ones (paged), SPANS (positions) and the fused path against the
# reference path (fused), with ASan and UBSan, FUZZ_SECONDS each (seed corpora: the public
# cases, tests/hf, tests/fuzz/seeds_*, written by tests/fuzz/make_seeds.py for cache and fused);
# findings go to build-fuzz/findings.
# FUZZ_HARNESSES=NAME... runs only those.
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OMP := $(shell echo 'int main(void){return 0;}' | clang -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
FUZZ_HARNESSES := attend config hf_config checkpoint args cache positions fused gguf paged
# the harnesses' own compile: the build's flags without its optimisation (GCC's vectorizer flags
# are not clang's)
FUZZ_BASE := $(filter-out $(OPT),$(BASE))
# the trainer's objects that checkpoint loading needs (not plot.c: no cairo)
FUZZ_TRAIN := $(patsubst %,obj/train/%.o,trainer options model model_input conventions state data optim kernels env)
# for harness $$h, built in folder $$B: its seeds, and the objects it links besides the libraries
FUZZ_CASE = case $$h in attend) seeds="$(CONF)/cases $(CONF)/cases-keys $(CONF)/cases-multiaxis";; \
        hf_config) seeds=tests/hf;; checkpoint|args|cache|positions|fused|gguf) seeds=tests/fuzz/seeds_$$h;; *) seeds=tests/fuzz/seeds_config;; esac; \
    case $$h in checkpoint) extra="$(addprefix $$B/,$(FUZZ_TRAIN))";; *) extra=;; esac
fuzz:
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang OPT="-O1 -g" SAN="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" \
	    build-fuzz/libposenc.a build-fuzz/libposenc_io.a $(addprefix build-fuzz/,$(FUZZ_TRAIN))
	@mkdir -p build-fuzz/findings
	@set -e; B=build-fuzz; for h in $(FUZZ_HARNESSES); do $(FUZZ_CASE); \
	    clang $(FUZZ_BASE) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -o build-fuzz/fuzz_$$h tests/fuzz/fuzz_$$h.c $$extra \
	        build-fuzz/libposenc_io.a build-fuzz/libposenc.a -ljansson $(LIBBLAS) -lm $(FUZZ_OMP); \
	    mkdir -p build-fuzz/corpus_$$h; \
	    echo "== fuzz_$$h ($(FUZZ_SECONDS) s)"; \
	    build-fuzz/fuzz_$$h -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	        -artifact_prefix=build-fuzz/findings/$$h- build-fuzz/corpus_$$h $$seeds 2>&1 | \
	        grep -E "^stat::number_of_executed_units|^stat::peak_rss|ERROR|SUMMARY|Done" ; \
	    test -z "$$(ls build-fuzz/findings | grep "^$$h-" | grep -v "^$$h-slow-unit-")" || \
	        { echo "fuzz_$$h found a crash: build-fuzz/findings"; exit 1; }; \
	    ls build-fuzz/findings | grep "^$$h-slow-unit-" | sed 's/^/  slow (not a failure): /' || true; \
	done

# fuzz-coverage: each harness rebuilt with clang's source coverage (build-fuzz/cov, no sanitizers)
# and run once over its corpus (build-fuzz/corpus_NAME: what make fuzz kept) and seeds; the line
# coverage of all of src/ (every library object is linked), of train/ for checkpoint and cli/
# for args, per harness into build-fuzz/coverage.txt, the per-file tables beside it (build-fuzz/cov/NAME.DIR.txt),
# then every harness's profile merged: the line coverage of each file of src/ (cov/all.src.txt).
# Not part of make test or CI.
FUZZ_COV := -fprofile-instr-generate -fcoverage-mapping
fuzz-coverage:
	@$(MAKE) --no-print-directory BUILD=build-fuzz/cov CC=clang OPT="-O0 -g" SAN="-fsanitize=fuzzer-no-link $(FUZZ_COV)" \
	    build-fuzz/cov/libposenc.a build-fuzz/cov/libposenc_io.a $(addprefix build-fuzz/cov/,$(FUZZ_TRAIN))
	@set -e; B=build-fuzz/cov; : > build-fuzz/coverage.txt; for h in $(FUZZ_HARNESSES); do $(FUZZ_CASE); \
	    clang $(FUZZ_BASE) -O0 -g -fsanitize=fuzzer $(FUZZ_COV) -o $$B/fuzz_$$h tests/fuzz/fuzz_$$h.c $$extra \
	        -Wl,--whole-archive $$B/libposenc_io.a $$B/libposenc.a -Wl,--no-whole-archive -ljansson $(LIBBLAS) -lm $(FUZZ_OMP); \
	    mkdir -p build-fuzz/corpus_$$h; rm -f $$B/$$h.profraw; \
	    LLVM_PROFILE_FILE=$$B/$$h.profraw $$B/fuzz_$$h -runs=0 build-fuzz/corpus_$$h $$seeds > $$B/$$h.log 2>&1; \
	    llvm-profdata merge -sparse $$B/$$h.profraw -o $$B/$$h.profdata; \
	    n=$$(sed -n 's/.*seed corpus: files: \([0-9]*\).*/\1/p' $$B/$$h.log); \
	    case $$h in checkpoint) dirs="src train";; args) dirs="src cli";; *) dirs=src;; esac; \
	    for d in $$dirs; do \
	        llvm-cov report $$B/fuzz_$$h -instr-profile=$$B/$$h.profdata $$d/ > $$B/$$h.$$d.txt; \
	        awk -v h=$$h -v d=$$d -v n=$$n '$$1 == "TOTAL" { printf "%-11s %-6s lines %6s (%d of %d), functions %s, regions %s; %d inputs\n", \
	            h, d "/", $$10, $$8 - $$9, $$8, $$7, $$4, n }' $$B/$$h.$$d.txt | tee -a build-fuzz/coverage.txt; \
	    done; \
	done; \
	objs=; for h in $(FUZZ_HARNESSES); do objs="$${objs:+$$objs -object }$$B/fuzz_$$h"; done; \
	llvm-profdata merge -sparse $(patsubst %,$$B/%.profdata,$(FUZZ_HARNESSES)) -o $$B/all.profdata; \
	llvm-cov report $$objs -instr-profile=$$B/all.profdata src/ > $$B/all.src.txt; \
	echo "== every harness together, line coverage per file of src/ (below 60 %: *)" | tee -a build-fuzz/coverage.txt; \
	awk '$$1 ~ /\.c$$/ { c = $$10; sub("%", "", c); printf "%-28s %7s%s\n", $$1, $$10, c + 0 < 60 ? " *" : "" }' $$B/all.src.txt | \
	    tee -a build-fuzz/coverage.txt

# valgrind: the unit tests under memcheck (slow)
valgrind: $(TESTS)
	@set -e; for t in $(TESTS); do POSENC_FIXTURES=tests/fixtures valgrind -q --error-exitcode=1 --leak-check=full --suppressions=tests/valgrind.supp $$t; done

# fixtures: regenerate tests/fixtures with the PyTorch references (.venv's torch), the
# trainer's model included (tests/fixtures/train)
fixtures:
	$(PY) tests/ref/make_fixtures.py tests/fixtures
	$(PY) tests/ref/train_ref.py tests/fixtures/train

# bench: `posenc bench` (RoPE vs copy, fused vs reference vs PyTorch eager, memory; a few minutes), then
# bench/torch_lm.py (a small LM on posenc.torch against plain PyTorch, 1 and 2 threads)
bench: $(BUILD)/posenc $(BUILD)/libposenc.so
	$(BUILD)/posenc bench
	POSENC_LIBRARY=$(abspath $(BUILD)/libposenc.so) $(PY) bench/torch_lm.py

# bench-readme: the same, then the summary between <!-- bench:begin --> and <!-- bench:end --> in README.md
bench-readme: $(BUILD)/posenc
	$(BUILD)/posenc bench --reps 5 --readme README.md

# install: header, libraries and pkg-config file under PREFIX
install: $(BUILD)/libposenc.a $(BUILD)/libposenc.so $(BUILD)/posenc
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -d $(DESTDIR)$(PREFIX)/include/posenc
	install -m 644 include/posenc.h include/posenc_methods.def include/posenc_keys.def $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/posenc/*.h $(DESTDIR)$(PREFIX)/include/posenc/
	install -m 644 $(BUILD)/libposenc.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libposenc.so $(DESTDIR)$(PREFIX)/lib/libposenc.so.$(VERSION)
	ln -sf libposenc.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libposenc.so.$(SOVERSION)
	ln -sf libposenc.so.$(SOVERSION) $(DESTDIR)$(PREFIX)/lib/libposenc.so
	install -m 755 $(BUILD)/posenc $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@LIBS@|$(LDLIBS)|' posenc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/posenc.pc

# clean: remove every build folder
clean:
	rm -rf build build-asan
