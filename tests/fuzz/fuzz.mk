# tests/fuzz/fuzz.mk — libFuzzer harnesses over the pure modules (routing, params, job
# validation, ids, config). `make fuzz` installs clang (scripts/deps.sh fuzz) and runs this
# from the repo root:
#
#   make fuzz                                   build, then fuzz every target FUZZ_SECONDS (60) each
#   make fuzz FUZZ_SECONDS=600 FUZZ_JOBS=2      longer, two processes per target (-fork=2)
#   make -f tests/fuzz/fuzz.mk run T="job ids"  only some targets
#   make -f tests/fuzz/fuzz.mk build            just build build-fuzz/fuzz_<target>
#   make -f tests/fuzz/fuzz.mk merge            add the scratch finds that reach new coverage
#                                               to tests/fuzz/corpus/<target>/ (-set_cover_merge=1)
#   make -f tests/fuzz/fuzz.mk cmin             minimise tests/fuzz/corpus/<target>/ from scratch
#   make -f tests/fuzz/fuzz.mk repro T=job IN=tests/fuzz/crashes/job/crash-...
#
# Everything is built with clang into build-fuzz/ (never build/): the src/*/*.c the targets need
# with -fsanitize=fuzzer-no-link,address,undefined, each fuzzer with -fsanitize=fuzzer,...
# A run reads tests/fuzz/corpus/<t>/ and tests/fuzz/regressions/<t>/ and writes new inputs
# only to build-fuzz/corpus/<t>/ (scratch), so the committed corpus grows only through
# `merge`. Crashes, timeouts and leaks land in tests/fuzz/crashes/<t>/ (git-ignored): copy
# real findings into tests/fuzz/regressions/<t>/, where `make unit` replays them.

FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 1
FUZZ_FLAGS   ?=
T            ?= router params job ids config
FUZZ_DIR     := tests/fuzz

FUZZ_TARGETS := router params job ids config
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -g -O1 -std=c11 -D_GNU_SOURCE -pthread -Wall -Wextra -Wno-unused-parameter \
                -Isrc $(FUZZ_SAN) $(shell pkg-config --cflags jansson 2>/dev/null)
FUZZ_LIBS    := $(shell pkg-config --libs jansson 2>/dev/null) -pthread -lm

# Modules under test: pure, and needing nothing but jansson and libc.
FUZZ_SRC     := core/router http/params core/job base/jscan core/ids core/config base/log
FUZZ_OBJ     := $(FUZZ_SRC:%=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

# Dictionaries: HTTP paths and parameter names, JSON tokens and job fields, INI keys.
DICTS_router := $(FUZZ_DIR)/http.dict
DICTS_params := $(FUZZ_DIR)/http.dict $(FUZZ_DIR)/json.dict
DICTS_job    := $(FUZZ_DIR)/json.dict
DICTS_ids    := $(FUZZ_DIR)/ids.dict
DICTS_config := $(FUZZ_DIR)/ini.dict

.PHONY: all build run merge cmin repro clean
all: build run

build: $(FUZZ_BIN) $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%.dict)

$(FUZZ_BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%.o: $(FUZZ_DIR)/fuzz_%.c $(FUZZ_DIR)/targets.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/fuzz_%.o $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

.SECONDEXPANSION:
$(FUZZ_BUILD)/%.dict: $$(DICTS_$$*)
	@mkdir -p $(dir $@)
	cat $^ > $@

# Run every target in T (tests/fuzz/run.sh: corpus dirs, scratch output, artifacts, verdict).
run: build
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_FLAGS="$(FUZZ_FLAGS)" \
	    sh $(FUZZ_DIR)/run.sh $(T)

# Merge: add to tests/fuzz/corpus/<t>/ only the scratch finds that reach new coverage
# (libFuzzer -set_cover_merge=1 into the first directory: a greedy set cover, smaller than
# -merge=1); the named seed files stay as they are.
merge: build
	@for t in $(T); do \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	    $(FUZZ_BUILD)/fuzz_$$t -set_cover_merge=1 -timeout=10 -rss_limit_mb=2048 $(FUZZ_DIR)/corpus/$$t \
	        $(FUZZ_BUILD)/corpus/$$t >$(FUZZ_BUILD)/merge_$$t.log 2>&1 || { cat $(FUZZ_BUILD)/merge_$$t.log; exit 1; }; \
	    echo "merge: $$t: $$(grep -o 'MERGE-OUTER: [0-9]* new files' $(FUZZ_BUILD)/merge_$$t.log), now $$(ls $(FUZZ_DIR)/corpus/$$t | wc -l) files"; \
	done

# Minimise from scratch: the smallest set of the committed corpus that keeps its coverage
# replaces tests/fuzz/corpus/<t>/ (seed names are lost for the inputs kept under a hash name;
# review with git status before committing).
cmin: build
	@for t in $(T); do \
	    rm -rf $(FUZZ_BUILD)/cmin/$$t && mkdir -p $(FUZZ_BUILD)/cmin/$$t || exit 1; \
	    $(FUZZ_BUILD)/fuzz_$$t -set_cover_merge=1 -timeout=10 -rss_limit_mb=2048 $(FUZZ_BUILD)/cmin/$$t \
	        $(FUZZ_DIR)/corpus/$$t >$(FUZZ_BUILD)/cmin_$$t.log 2>&1 || { cat $(FUZZ_BUILD)/cmin_$$t.log; exit 1; }; \
	    [ -n "$$(ls -A $(FUZZ_BUILD)/cmin/$$t)" ] || { echo "cmin: $$t came out empty" >&2; exit 1; }; \
	    rm -f $(FUZZ_DIR)/corpus/$$t/* && cp $(FUZZ_BUILD)/cmin/$$t/* $(FUZZ_DIR)/corpus/$$t/ || exit 1; \
	    echo "cmin: $$t: $$(ls $(FUZZ_DIR)/corpus/$$t | wc -l) files"; \
	done

# Re-run one input with full diagnostics.
repro: build
	UBSAN_OPTIONS=print_stacktrace=1 $(FUZZ_BUILD)/fuzz_$(T) -runs=1 $(IN)

clean:
	rm -rf $(FUZZ_BUILD)

-include $(wildcard $(FUZZ_BUILD)/obj/*.d $(FUZZ_BUILD)/*.d)
