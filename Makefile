# goshim — one wildcard Makefile.
#
#   make          build/libgoshim.so and the launcher build/goshim
#   make test     unit tests (Criterion) and preload integration tests
#   make bench    native vs goshim benchmarks, ratios printed
#   make demo     the thread-per-connection demo (see README.md)
#   make debug    build/debug/libgoshim.so: GOSHIM_DCHECK, lock-order and
#                 contract checks live; make test-debug runs the unit and
#                 preload tests against it
#   make test-asan  unit tests under AddressSanitizer and UBSan
#   make deps     installs missing Debian packages (the targets above need it)
#   make install  PREFIX=/usr/local

ARCH    ?= $(shell uname -m)
PREFIX  ?= /usr/local
BUILD   := build

CC      := gcc
CXX     := g++
DEPFLAGS = -MMD -MP
WARN    := -Wall -Wextra -Wno-unused-parameter
OPT     ?= -O2
# DEFS: -DGOSHIM_DEBUG_BUILD in the debug build; SAN: sanitizer flags.
DEFS    ?=
SAN     ?=
COMMON  := $(OPT) $(DEFS) $(SAN) -g -fPIC -fno-omit-frame-pointer -fvisibility=hidden -D_GNU_SOURCE -I. $(WARN)
CXXFLAGS_LIB := -std=c++20 $(COMMON) -fno-exceptions -fno-rtti -fno-threadsafe-statics \
                -fno-asynchronous-unwind-tables -funwind-tables -ftls-model=initial-exec
CFLAGS_LIB   := -std=gnu11 $(COMMON) -fexceptions -ftls-model=initial-exec

JEMALLOC_A := /usr/lib/$(ARCH)-linux-gnu/libjemalloc_pic.a
# jemalloc's objects minus its C++ operator new/delete (the program's
# libstdc++ provides those, on top of malloc).
JEMALLOC_STAMP := $(BUILD)/jemalloc/.stamp

LIB_CXX := $(wildcard core/*.cpp shim/*.cpp syscalls/*.cpp arch/$(ARCH)/*.cpp)
LIB_C   := $(wildcard shim/*.c syscalls/*.c)
LIB_S   := $(wildcard arch/$(ARCH)/*.S)
LIB_OBJ := $(LIB_CXX:%.cpp=$(BUILD)/obj/%.o) $(LIB_C:%.c=$(BUILD)/obj/%.o) \
           $(LIB_S:%.S=$(BUILD)/obj/%.o)
CORE_OBJ := $(filter $(BUILD)/obj/core/% $(BUILD)/obj/syscalls/% $(BUILD)/obj/arch/%,$(LIB_OBJ))

LIB      := $(BUILD)/libgoshim.so
LAUNCHER := $(BUILD)/goshim

.PHONY: all deps test unit preload observe bench demo install clean
all: $(LIB) $(LAUNCHER)

# ---- dependencies -------------------------------------------------------------
DEB_PKGS := g++ make libjemalloc-dev libunwind-dev libcriterion-dev pkg-config python3 \
            procps time man-db util-linux stress-ng
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v rustc >/dev/null 2>&1 || missing="$$missing rustc"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# ---- the library --------------------------------------------------------------
$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_LIB) $(DEPFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_LIB) $(DEPFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(COMMON) $(DEPFLAGS) -c $< -o $@

$(JEMALLOC_STAMP): $(JEMALLOC_A)
	@rm -rf $(dir $@) && mkdir -p $(dir $@)
	cd $(dir $@) && ar x $(JEMALLOC_A) && rm -f jemalloc_cpp.pic.o && touch .stamp

# libgcc_s must come before libunwind among our dependencies: libunwind.so
# also defines _Unwind_*, and the program's C++ exceptions and glibc's
# forced unwinding must keep resolving them to libgcc_s (checked by
# tests/preload/cancel_cxx and tls_cxx).
$(LIB): $(LIB_OBJ) shim/exports.map $(JEMALLOC_STAMP)
	$(CC) -shared -o $@ $(LIB_OBJ) $(BUILD)/jemalloc/*.pic.o \
	  -Wl,--version-script=shim/exports.map -Wl,-Bsymbolic-functions -Wl,-z,now \
	  -Wl,-z,noexecstack -Wl,--no-undefined \
	  -Wl,--no-as-needed -lgcc_s -lunwind -ldl -lpthread -lm -lc

$(LAUNCHER): launcher/goshim.cpp core/size.hpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O2 -g -Wall -Wextra -I. -o $@ $<

# ---- tests --------------------------------------------------------------------
UNIT_SRC := $(wildcard tests/unit/*_test.cpp)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.cpp=$(BUILD)/tests/unit/%)
PRE_MOD  := $(wildcard tests/preload/mod_*.c)
PRE_C    := $(filter-out $(PRE_MOD),$(wildcard tests/preload/*.c))
PRE_CXX  := $(wildcard tests/preload/*.cpp)
PRE_BIN  := $(PRE_C:tests/preload/%.c=$(BUILD)/tests/preload/%) \
            $(PRE_CXX:tests/preload/%.cpp=$(BUILD)/tests/preload/%) \
            $(PRE_MOD:tests/preload/%.c=$(BUILD)/tests/preload/%.so)
# Integration programs know nothing of goshim: plain gcc/g++ -pthread
# (with the stack protector on every function).
PRE_CFLAGS := -O2 -g -Wall -pthread -D_GNU_SOURCE -fstack-protector-all

$(BUILD)/tests/unit/%: tests/unit/%.cpp $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O1 -g -I. -D_GNU_SOURCE $(DEFS) $(SAN) $(DEPFLAGS) \
	  -o $@ $< $(CORE_OBJ) -lcriterion -lgcc_s -lunwind -ldl -lpthread

$(BUILD)/tests/preload/%.so: tests/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -shared -o $@ $<

$(BUILD)/tests/preload/%: tests/preload/%.c tests/preload/common.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(PRE_CFLAGS) -o $@ $< -lm -ldl

$(BUILD)/tests/preload/%: tests/preload/%.cpp tests/preload/common.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 $(PRE_CFLAGS) -o $@ $<

OBS_C   := $(wildcard tests/observe/*.c)
OBS_BIN := $(OBS_C:tests/observe/%.c=$(BUILD)/tests/observe/%)

# -O0 -g: the dump test checks the functions the threads blocked in.
$(BUILD)/tests/observe/%: tests/observe/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O0 -g -Wall -pthread -D_GNU_SOURCE -o $@ $<

# Rust integration programs: plain rustc, std only (no crates, no network).
PRE_RS     := $(wildcard tests/preload/*.rs)
PRE_RS_BIN := $(PRE_RS:tests/preload/%.rs=$(BUILD)/tests/preload/%)

$(BUILD)/tests/preload/%: tests/preload/%.rs
	@mkdir -p $(dir $@)
	rustc --edition 2021 -O -o $@ $<

# Headers shared by a test and its helper process.
$(BUILD)/tests/preload/sync_pshared $(BUILD)/tests/preload/sync_pshared_helper: \
  tests/preload/sync_pshared.h

preload: $(PRE_RS_BIN)

unit: deps $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; timeout 300 $$t --jobs 2; done

preload: deps all $(PRE_BIN)
	@tests/run_preload.sh $(BUILD)

observe: deps all $(OBS_BIN)
	@tests/run_observe.sh $(BUILD)

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory preload
	@$(MAKE) --no-print-directory observe

# ---- debug and sanitizer builds ---------------------------------------------------
# The debug build checks the lock order (core/lockrank.hpp) at every
# acquisition and the g0 / no-P / signal-safe contracts (core/contract.hpp).
DEBUG_VARS := BUILD=$(BUILD)/debug OPT=-O1 DEFS=-DGOSHIM_DEBUG_BUILD
ASAN_VARS  := BUILD=$(BUILD)/asan OPT=-O1 DEFS=-DGOSHIM_DEBUG_BUILD \
              SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
.PHONY: debug test-debug test-asan
debug: deps
	@$(MAKE) --no-print-directory $(DEBUG_VARS) all

test-debug: deps
	@$(MAKE) --no-print-directory $(DEBUG_VARS) all
	@$(MAKE) --no-print-directory $(DEBUG_VARS) unit
	@$(MAKE) --no-print-directory $(DEBUG_VARS) preload

# (Leak checking off: the unit tests' fake Gs, Ps and Ms, and the
# runtime's arenas, are never freed on purpose.)
test-asan: deps
	@ASAN_OPTIONS=detect_leaks=0 $(MAKE) --no-print-directory $(ASAN_VARS) unit

# ---- benchmarks -----------------------------------------------------------------
BENCH_C   := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_C:bench/%.c=$(BUILD)/bench/%)

$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -pthread -D_GNU_SOURCE -o $@ $< -lm

bench: deps all $(BENCH_BIN)
	@bench/run.sh $(BUILD)

# ---- the demo: make demo ------------------------------------------------------------
DEMO_BIN := $(patsubst bench/demo/%.c,$(BUILD)/demo/%,$(wildcard bench/demo/*.c))

$(BUILD)/demo/%: bench/demo/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -pthread -D_GNU_SOURCE -o $@ $<

demo: deps all $(DEMO_BIN)
	@bench/demo/run.sh $(BUILD)

# ---- install --------------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/lib/goshim $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/goshim/libgoshim.so
	install -m 0755 $(LAUNCHER) $(DESTDIR)$(PREFIX)/bin/goshim
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 doc/goshim.1 $(DESTDIR)$(PREFIX)/share/man/man1/goshim.1

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
