# hourglass — build, run and test.
#
#   make            build build/hourglassd
#   make run        install what is missing, start private Redis + MariaDB under .run/, run the daemon
#   make test       the same set-up, then make lint, unit (Check), crondiff and integration tests (the console's
#                   browser tests among them: chromium + playwright-core, see tests/browser)
#   make bench      benchmark suite (see docs/performance.md)
#   make soak       the fault suite's faults at random for SOAK_MINUTES (default 10; SOAK_SEED
#                   replays a run), judged by its history checker; not part of make test
#   make SANITIZE=address,undefined test
#   make unit-valgrind   unit tests under valgrind
#   make WERROR=1   warnings are errors (CI sets this)
#   make install    PREFIX (default /usr/local) and DESTDIR honoured; make uninstall (scripts/install.sh)
#   make deb        build/hourglass_<version>_<arch>.deb with dpkg-deb (scripts/deb.sh)
#   make crondiff   cron.c against a brute-force reference around DST transitions (run by make test)

CC       ?= cc
BUILD    ?= build
PKGS     := libevent libevent_pthreads libevent_openssl hiredis jansson mysqlclient libssl libcrypto \
            librabbitmq
SANITIZE ?=
WERROR   ?=
OPT      ?= -O2

WARN := -Wall -Wextra -Wformat=2 -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wcast-align -Wwrite-strings -Wvla -Wno-unused-parameter
ifneq ($(WERROR),)
WARN += -Werror
endif

CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -pthread $(WARN) -Isrc -I$(BUILD)
LDLIBS  += -pthread -lm

ifneq ($(SANITIZE),)
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
BUILD   := build-san
endif

# pkg-config is only asked once the packages exist (scripts/deps.sh installs them).
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

LUA      := $(sort $(wildcard src/redis/lua/*.lua))
CONSOLE  := $(sort $(wildcard console/*))
SRC      := $(sort $(wildcard src/*/*.c))
LIB_SRC  := $(filter-out src/process/main.c,$(SRC))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/%.o) $(BUILD)/lua_scripts.o $(BUILD)/console_files.o \
            $(BUILD)/openapi_json.o
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# Programs the integration tests drive (tests/tools/x.c -> $(BUILD)/tests/x), e.g. amqp_publish
TOOL_SRC := $(sort $(wildcard tests/tools/*.c))
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/%)

.PHONY: all deps run test lint unit unit-valgrind integration soak bench bench-quick fuzz format clean stack-stop
.PHONY: install uninstall deb crondiff
all: $(BUILD)/hourglassd

$(BUILD)/hourglassd: $(BUILD)/process/main.o $(BUILD)/libhourglass.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

$(BUILD)/libhourglass.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: src/%.c | $(BUILD)/.dir
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

# Lua scripts are embedded at build time as one Redis Functions library; src/redis/lua/lib.lua
# is its shared part (scripts/embed-lua.py).
$(BUILD)/lua_scripts.c: $(LUA) scripts/embed-lua.py | $(BUILD)/.dir
	python3 scripts/embed-lua.py $(LUA) > $@.tmp && mv $@.tmp $@

$(BUILD)/lua_scripts.o: $(BUILD)/lua_scripts.c
	$(CC) $(CFLAGS) -c -o $@ $<

# The operator's console (console/*) is embedded the same way, each file with its ETag.
$(BUILD)/console_files.c: $(CONSOLE) scripts/embed-console.sh | $(BUILD)/.dir
	sh scripts/embed-console.sh $(CONSOLE) > $@.tmp && mv $@.tmp $@

$(BUILD)/console_files.o: $(BUILD)/console_files.c src/api/api_console.h
	$(CC) $(CFLAGS) -c -o $@ $<

# The API's description (docs/openapi.yaml) is served as GET /openapi.json: converted to JSON
# here, with Debian's python3 + python3-yaml (scripts/deps.sh), and embedded with its ETag.
PYTHON3 := $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
$(BUILD)/openapi_json.c: docs/openapi.yaml scripts/embed-openapi.py | $(BUILD)/.dir
	$(PYTHON3) scripts/embed-openapi.py docs/openapi.yaml > $@.tmp && mv $@.tmp $@

$(BUILD)/openapi_json.o: $(BUILD)/openapi_json.c src/api/api_openapi.h
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhourglass.a | $(BUILD)/.dir
	@mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS) $(PKG_CFLAGS) $(shell pkg-config --cflags check 2>/dev/null) -o $@ $< \
	    $(BUILD)/libhourglass.a $(CHECK_LIBS) $(PKG_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/tools/%.c $(BUILD)/libhourglass.a | $(BUILD)/.dir
	@mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libhourglass.a $(PKG_LIBS) $(LDLIBS)

$(BUILD)/.dir:
	@mkdir -p $(BUILD)
	@touch $@

deps:
	@sh scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/run.sh $(BUILD)/hourglassd

unit: $(UNIT_BIN)
	@sh scripts/run-unit.sh $(UNIT_BIN)

# Unit tests under valgrind (no fork, so leaks are seen): any error or definite leak fails.
unit-valgrind: $(UNIT_BIN)
	@for t in $(UNIT_BIN); do \
	    CK_FORK=no valgrind -q --error-exitcode=9 --leak-check=full \
	        --errors-for-leak-kinds=definite,indirect $$t >/dev/null || { echo "valgrind: $$t failed"; exit 1; }; \
	    echo "valgrind: $$t clean"; \
	done

test:
	@sh scripts/deps.sh test
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory openapi-lint
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory crondiff
	@$(MAKE) --no-print-directory integration

integration: $(BUILD)/hourglassd $(TOOL_BIN)
	@HOURGLASSD=$(abspath $(BUILD)/hourglassd) HG_TOOLS=$(abspath $(BUILD)/tests) \
	    sh scripts/run-integration.sh $(T)

# Faults at random (tests/soak.py, docs/operations.md "Fault suite"): SOAK_MINUTES, SOAK_SEED.
SOAK_MINUTES ?= 10
SOAK_SEED    ?=
soak: $(BUILD)/hourglassd
	@HOURGLASSD=$(abspath $(BUILD)/hourglassd) SOAK_MINUTES=$(SOAK_MINUTES) SOAK_SEED=$(SOAK_SEED) \
	    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
	    $$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 ) tests/soak.py

bench: deps all
	@sh scripts/deps.sh bench
	@sh bench/run.sh full $(BUILD)/hourglassd

bench-quick: deps all
	@sh scripts/deps.sh bench
	@sh bench/run.sh quick $(BUILD)/hourglassd

# Installing (scripts/install.sh has the layout). The version is the daemon's own (-v), read
# from its one definition so the package and the binary cannot disagree.
VERSION    := $(shell sed -n 's/^\#define HOURGLASS_VERSION *"\([^"]*\)".*/\1/p' src/process/main.c)
PREFIX     ?= /usr/local
DESTDIR    ?=
SYSCONFDIR ?= /etc
INSTALL_ENV = DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" SYSCONFDIR="$(SYSCONFDIR)" BIN="$(abspath $(BUILD)/hourglassd)" \
              $(if $(BINDIR),BINDIR="$(BINDIR)") $(if $(DATADIR),DATADIR="$(DATADIR)") \
              $(if $(DOCDIR),DOCDIR="$(DOCDIR)") $(if $(MANDIR),MANDIR="$(MANDIR)") \
              $(if $(UNITDIR),UNITDIR="$(UNITDIR)")

install: $(BUILD)/hourglassd
	@$(INSTALL_ENV) sh scripts/install.sh install

uninstall:
	@$(INSTALL_ENV) sh scripts/install.sh uninstall

deb: $(BUILD)/hourglassd
	@BIN="$(abspath $(BUILD)/hourglassd)" VERSION="$(VERSION)" OUT="$(abspath $(BUILD))" sh scripts/deb.sh

# The cron differential test: a bounded, seeded run (tests/crondiff/crondiff.py; CRONDIFF_SEED
# replays another set of random expressions), its driver built with this build's flags.
CRONDIFF_SEED ?= 1
$(BUILD)/tests/crondiff-drv: tests/crondiff/drv.c $(BUILD)/libhourglass.a | $(BUILD)/.dir
	@mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/libhourglass.a $(PKG_LIBS) $(LDLIBS)

crondiff: $(BUILD)/tests/crondiff-drv
	@python3 tests/crondiff/crondiff.py --drv $(abspath $<) $(CRONDIFF_SEED)

fuzz:
	@sh scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory -f tests/fuzz/fuzz.mk

# The formatter: Debian 12's clang-format 14 with .clang-format; `make lint` (run by `make test`)
# fails on any drift, so run this before committing C.
FORMAT_FILES = $(wildcard src/*/*.c src/*/*.h tests/unit/*.c tests/unit/*.h tests/tools/*.c tests/fuzz/*.c \
                          tests/fuzz/*.h bench/*.c bench/*.h)
format:
	clang-format -i $(FORMAT_FILES)

lint:
	@sh scripts/lint.sh

# docs/openapi.yaml through a standard linter (@redocly/cli, pinned in tests/openapi/).
.PHONY: openapi-lint
openapi-lint:
	@sh tests/openapi/lint.sh

stack-stop:
	@sh scripts/stack.sh stop .run

clean:
	rm -rf build build-san

-include $(wildcard $(BUILD)/*/*.d)
