# lockgate: `make` builds build/lockgate; `make run` starts it on the local
# store; `make test` installs what is missing and runs every suite.

CC      ?= cc
PKGS    := libmicrohttpd jansson libcurl libjwt openssl
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
# `make WERROR=1` (CI, .ci/run) turns every warning into an error, for gcc
# and for clang (the fuzz objects) alike.
WERROR  ?=
CFLAGS  += -std=gnu11 $(WARN) $(if $(filter 1,$(WERROR)),-Werror) -D_GNU_SOURCE -I. -Ibuild/gen -pthread
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LDLIBS  = $(PKG_LIBS) -pthread -lm
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined

LIB_SRC  := $(filter-out server/main.c,$(wildcard rt/*.c gcs/*.c api/*.c server/*.c)) \
            build/gen/web_assets.c
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_LIB := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
TOOL_SRC := $(wildcard tests/tools/*.c)
BENCH_SRC:= $(wildcard bench/*.c)
WEB      := $(sort $(wildcard web/*.html web/*.css web/*.js web/*.svg web/*.ico)) \
            $(wildcard client/lockctl)

OBJ      := $(patsubst %.c,build/obj/%.o,$(LIB_SRC))
AOBJ     := $(patsubst %.c,build/asan/obj/%.o,$(LIB_SRC))
UNIT     := $(patsubst tests/unit/%.c,build/tests/%,$(UNIT_SRC))
AUNIT    := $(patsubst tests/unit/%.c,build/asan/tests/%,$(UNIT_SRC))
TOOLS    := $(patsubst tests/tools/%.c,build/tools/%,$(TOOL_SRC))
BENCHES  := $(patsubst bench/%.c,build/bench/%,$(BENCH_SRC))

# Fuzzing (issue 24): one libFuzzer harness per input surface in
# tests/fuzz/, linked with the project's objects built by clang under the
# same sanitizers.  `make fuzz` runs each FUZZ_S seconds; `make test` runs
# each a few seconds and replays tests/fuzz/regressions/.
FUZZ_CC  ?= clang
FUZZ_S   ?= 300
FUZZ_JOBS ?= 1
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
            -fno-omit-frame-pointer
FUZZ_SRC := $(wildcard tests/fuzz/*.c)
FUZZ     := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))
FOBJ     := $(patsubst %.c,build/fuzz/obj/%.o,$(LIB_SRC))
FUZZ_LIB := build/fuzz/obj/tests/unit/auth_testutil.o
# The gs:// answer harnesses answer the client's requests themselves, and
# check a retry's pause instead of sleeping it.
FUZZ_WRAP := -Wl,--wrap=gcs_http_perform -Wl,--wrap=rt_sleep
.SECONDARY: $(FOBJ) $(FUZZ_LIB)

.PHONY: all deps-build deps-lint deps-test run test unit unit-asan e2e browser lint interop bench \
        docker clean check-tools soak fuzz fuzz-build bench-shutdown
.DEFAULT_GOAL := all

# deps-build first, then the build: under `make -j` the two would otherwise
# run at once and compile against headers not yet installed.
all: deps-build
	@$(MAKE) --no-print-directory build/lockgate

# Installs missing Debian packages (only when missing; needs root then).
deps-build:
	@sh scripts/deps.sh build
deps-lint:
	@sh scripts/deps.sh lint
deps-test:
	@sh scripts/deps.sh test

build/gen/web_assets.c: $(WEB) build/embed
	@mkdir -p $(@D)
	build/embed $@ $(WEB)

build/embed: scripts/embed.c
	@mkdir -p $(@D)
	$(CC) -O1 $(WARN) -o $@ $<

build/obj/%.o: %.c $(wildcard */*.h) | build/gen/web_assets.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

build/asan/obj/%.o: %.c $(wildcard */*.h) | build/gen/web_assets.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -c -o $@ $<

build/fuzz/obj/%.o: %.c $(wildcard */*.h) | build/gen/web_assets.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c -o $@ $<

build/fuzz/%: tests/fuzz/%.c $(wildcard tests/fuzz/*.h) $(FOBJ) $(FUZZ_LIB)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer $(PKG_CFLAGS) \
	    -Itests/unit -o $@ $< $(FOBJ) $(FUZZ_LIB) \
	    $(if $(filter gs_%,$*),$(FUZZ_WRAP)) $(LDLIBS)

build/lockgate: build/obj/server/main.o $(OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/asan/lockgate: build/asan/obj/server/main.o $(AOBJ)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

build/tests/%: tests/unit/%.c $(UNIT_LIB) $(OBJ) $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB) $(OBJ) $(LDLIBS) -lcmocka

build/asan/tests/%: tests/unit/%.c $(UNIT_LIB) $(AOBJ) $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) $(PKG_CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB) $(AOBJ) $(LDLIBS) -lcmocka

build/tools/%: tests/tools/%.c $(OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(OBJ) $(LDLIBS)

build/bench/%: bench/%.c $(OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(OBJ) $(LDLIBS)

# `make run PORT=9090`; LOCKGATE_LISTEN and LOCKGATE_STORE, when set, win
# (a flag would override them).  PORT alone would mean 0.0.0.0 (Cloud Run),
# where the development mode refuses to start: here it means loopback.
RUN_FLAGS = $(if $(LOCKGATE_LISTEN),,--listen 127.0.0.1:$(or $(PORT),8080)) \
            $(if $(LOCKGATE_STORE),,--store file://./lockgate-data)
run: all
	./build/lockgate $(RUN_FLAGS)

test: deps-test
	@$(MAKE) --no-print-directory -j$$(nproc) build/lockgate build/asan/lockgate \
	    $(UNIT) $(AUNIT) $(TOOLS) $(BENCHES) $(FUZZ)
	@sh tests/run.sh

unit: $(UNIT) $(TOOLS)
	@sh tests/run.sh unit

e2e: build/lockgate build/asan/lockgate $(TOOLS) $(BENCHES)
	@sh tests/run.sh e2e

fuzz-build: deps-test $(FUZZ)

# Every harness FUZZ_S seconds (default 300), one after the other: one
# line per harness, "fuzz NAME: N execs, C crashes", and a closing line.
# FUZZ_RUNS=N (optional): each also stops after N executions.
# FUZZ_JOBS=J (default 1): J harnesses at a time, the slowest first.
# Then FUZZ_S seconds of hostile HTTP requests against a running server
# (tests/e2e/test_edge_fuzz.sh), on mem:// and on gs:// (the fake).
fuzz: fuzz-build build/asan/lockgate $(TOOLS)
	@FUZZ_S=$(FUZZ_S) FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_JOBS=$(FUZZ_JOBS) \
	    sh tests/fuzz/run.sh fuzz $(notdir $(FUZZ))
	@EDGE_FUZZ_S=$(FUZZ_S) sh tests/e2e/test_edge_fuzz.sh
	@EDGE_FUZZ_S=$(FUZZ_S) LG_STORE=gs sh tests/e2e/test_edge_fuzz.sh

lint: deps-lint
	@sh scripts/lint.sh

bench: deps-test build/lockgate $(BENCHES) $(TOOLS)
	@sh bench/run.sh

# SIGTERM with 1,000 waiters and 64 busy holders: the time to exit, every
# waiter answered 503, no held lease lost (a figure, not a test).
bench-shutdown: deps-test build/lockgate
	@python3 bench/shutdown.py --bin build/lockgate

# The soak (issue 24): gs:// (3 instances, fake GCS with faults) then
# file:// (2 processes), with kill -9, stalled and crashed jobs, on
# exclusive locks, semaphores and shared locks; the checker judges the
# recorded history.  SOAK_S seconds of load in all
# (the default keeps the whole run, checker included, within 10 minutes);
# it fails under SOAK_MIN_GRANTS grants (default: 190 per second of load,
# so >= 100,000 at the default).  SOAK_BIN: the lockgate to soak.
SOAK_S   ?= 540
SOAK_BIN ?= build/asan/lockgate
soak: deps-test build/lockgate build/asan/lockgate build/tools/fake_gcs
	python3 tests/soak/soak.py --seconds $(SOAK_S) --bin $(SOAK_BIN) \
	    --min-grants $${SOAK_MIN_GRANTS:-$$(( $(SOAK_S) * 190 ))}

# Interop (not part of `make test`): programs others wrote, run against
# lockgate and against the fake that stands for them (tests/interop):
# firebase-tools' Cloud Storage emulator, and Google's own Node.js client.
# Needs node 20 or newer and, the first time, the npm registry (about
# 300 MB into build/interop); fails, saying so, when it cannot run.
interop: deps-test build/asan/lockgate build/tools/fake_gcs
	@sh tests/interop/run.sh

docker:
	docker build -f docker/Dockerfile -t lockgate .

clean:
	rm -rf build
