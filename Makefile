# goshim — one wildcard Makefile.
#
#   make          build/libgoshim.so and the launcher build/goshim
#   make test     unit tests (Criterion), preload integration tests, real programs
#                 (make programs), observability tests
#   make bench    native vs goshim vs Go benchmarks, ratios printed
#                 (make bench-results copies the table into bench/RESULTS.md)
#   make bench-db MariaDB + sysbench oltp_read_write, native vs goshim (bench/db.sh)
#   make demo     the thread-per-connection demo (see README.md)
#   make debug    build/debug/libgoshim.so: GOSHIM_DCHECK, lock-order and
#                 contract checks live; make test-debug runs the unit and
#                 preload tests against it
#   make test-asan  unit tests under AddressSanitizer and UBSan
#   make deps     installs missing Debian packages (the targets above need it)
#   make clang-check  everything built with clang in build/clang, warnings
#                 are errors (needs Debian's clang package); then
#                 make CC=clang CXX=clang++ BUILD=build/clang test  runs it
#   make test-distros [DISTROS=trixie]  make test in Debian 13, 12, 11 chroots
#   make install  PREFIX=/usr/local

HOST_ARCH := $(shell uname -m)
ARCH    ?= $(HOST_ARCH)
PREFIX  ?= /usr/local

# Cross builds (ARCH=aarch64 on an x86-64 machine): the Debian cross
# toolchain, the arm64 builds of jemalloc, libunwind and Criterion unpacked
# into a sysroot of the build's own ($(SYSROOT), made by `make deps`), and
# every test program run under qemu-user ($(EMU)).
ifeq ($(ARCH),$(HOST_ARCH))
BUILD   := build
CROSS   :=
SYSROOT :=
EMU     :=
EMU_UNIT :=
TIMEOUT_SCALE := 1
EMU_THREADS := 0
else
BUILD   := build/$(ARCH)
CROSS   := $(ARCH)-linux-gnu-
SYSROOT := $(CURDIR)/build/$(ARCH)/sysroot
# qemu-user runs the program with the cross toolchain's C library; the
# tests' helper libraries (Criterion's) come from the sysroot.
EMU     := qemu-$(ARCH) -L /usr/$(ARCH)-linux-gnu
# The unit tests need Criterion's libraries: the whole sysroot (its own C
# library, the same glibc release as the cross toolchain's).
EMU_UNIT := qemu-$(ARCH) -L $(SYSROOT)
# Emulation is 5-20 times slower: every test timeout is scaled.
TIMEOUT_SCALE := 8
# qemu-user's own RCU thread, in every emulated process's thread count.
EMU_THREADS := 1
endif
UNIT_TMO = $$((300 * $(TIMEOUT_SCALE)))

CC      := $(CROSS)gcc
CXX     := $(CROSS)g++
DEPFLAGS = -MMD -MP
# The library builds without a warning with gcc 12 and 14 and clang 14 and
# 19 (tested: make test-distros, make clang-check); WERROR=1 makes that a rule.
WARN    := -Wall -Wextra $(if $(WERROR),-Werror)
OPT     ?= -O2
# DEFS: -DGOSHIM_DEBUG_BUILD in the debug build; SAN: sanitizer flags.
DEFS    ?=
SAN     ?=
COMMON  = $(OPT) $(DEFS) $(SAN) -g -fPIC -fno-omit-frame-pointer -fvisibility=hidden -D_GNU_SOURCE -I. \
          $(SYSROOT_INC) $(WARN)
# -foptimize-sibling-calls in every build (-O2 has it, the debug build's
# -O1 does not): a shim that passes a call on to libc (a program signal
# handler's poll, read, ...) must do it with a tail call, so that no goshim
# frame lies between libc's cancellable system call and the program's code
# and pthread_cancel can unwind the handler there (handler_cancel_safe;
# tests/preload/cancel_wait_in_handler failed in the debug build).
SIBCALL := -foptimize-sibling-calls
CXXFLAGS_LIB = -std=c++20 $(COMMON) $(SIBCALL) -fno-exceptions -fno-rtti -fno-threadsafe-statics \
                -fno-asynchronous-unwind-tables -funwind-tables -ftls-model=initial-exec
CFLAGS_LIB   = -std=gnu11 $(COMMON) $(SIBCALL) -fexceptions -ftls-model=initial-exec

JEMALLOC_A := $(SYSROOT)/usr/lib/$(ARCH)-linux-gnu/libjemalloc_pic.a
OBJCOPY    := $(CROSS)objcopy
# The sysroot's headers come after the toolchain's (only Criterion's and
# libunwind's are needed from it); libunwind is linked statically there,
# so the library needs nothing at run time beyond the C and C++ libraries.
ifneq ($(SYSROOT),)
SYSROOT_INC := -idirafter $(SYSROOT)/usr/include -idirafter $(SYSROOT)/usr/include/$(ARCH)-linux-gnu
# (No -L into the sysroot: its libc.so script names the target's absolute
# paths; the cross toolchain's C library is the one linked against.)
SYSROOT_LIB := -Wl,-rpath-link,$(SYSROOT)/usr/lib/$(ARCH)-linux-gnu \
               -Wl,-rpath-link,$(SYSROOT)/lib/$(ARCH)-linux-gnu
CRITERION_LIB := $(SYSROOT)/usr/lib/$(ARCH)-linux-gnu/libcriterion.so
UNWIND_LIB  := $(SYSROOT)/usr/lib/$(ARCH)-linux-gnu/libunwind.a \
               $(SYSROOT)/usr/lib/$(ARCH)-linux-gnu/libunwind-$(ARCH).a \
               $(SYSROOT)/usr/lib/$(ARCH)-linux-gnu/liblzma.a
else
UNWIND_LIB  := -lunwind
CRITERION_LIB := -lcriterion
endif
# jemalloc's objects minus its C++ operator new/delete (the program's
# libstdc++ provides those, on top of malloc), with their pthread mutex,
# condvar and thread calls renamed to core/jemalloc_glue.cpp's (the
# allocator's locks must never call into goshim's runtime, nor it into
# them).
JEMALLOC_STAMP := $(BUILD)/jemalloc/.stamp
JEMALLOC_SYMS  := core/jemalloc_glue.syms

LIB_CXX := $(wildcard core/*.cpp shim/*.cpp syscalls/*.cpp arch/$(ARCH)/*.cpp)
LIB_C   := $(wildcard shim/*.c syscalls/*.c)
LIB_S   := $(wildcard arch/$(ARCH)/*.S)
LIB_OBJ := $(LIB_CXX:%.cpp=$(BUILD)/obj/%.o) $(LIB_C:%.c=$(BUILD)/obj/%.o) \
           $(LIB_S:%.S=$(BUILD)/obj/%.o)
CORE_OBJ := $(filter $(BUILD)/obj/core/% $(BUILD)/obj/syscalls/% $(BUILD)/obj/arch/%,$(LIB_OBJ))

LIB      := $(BUILD)/libgoshim.so
LAUNCHER := $(BUILD)/goshim

.PHONY: all deps deps-bench bench-results test unit preload programs observe bench bench-db demo install clean test-distros clang-check deps-list
all: $(LIB) $(LAUNCHER)

# ---- dependencies -------------------------------------------------------------
DEB_PKGS := g++ make libjemalloc-dev libunwind-dev libcriterion-dev pkg-config python3 \
            procps time man-db util-linux stress-ng \
            git ripgrep pigz zstd xz-utils lbzip2 mariadb-server mariadb-client libmariadb-dev \
            memcached perl ruby erlang-base nginx-light apache2 \
            pbzip2 graphicsmagick ffmpeg nodejs default-jdk-headless unbound \
            libsqlite3-dev tinyproxy fio
# Packages only the benchmarks need (make deps-bench; make bench-db).
BENCH_DEB_PKGS := sysbench golang-go
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

deps-bench: deps
	@missing=""; for p in $(BENCH_DEB_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq $$missing; \
	fi

# Cross builds: the cross toolchain and qemu-user from Debian, and the
# target's jemalloc, libunwind and Criterion (with what they depend on)
# downloaded by debootstrap --foreign and unpacked with dpkg-deb -x into
# $(SYSROOT) (never `dpkg --add-architecture`, which would change the
# host's package set).
ifneq ($(SYSROOT),)
DEB_ARCH_aarch64 := arm64
DEB_ARCH   := $(or $(DEB_ARCH_$(ARCH)),$(ARCH))
CROSS_PKGS := crossbuild-essential-$(DEB_ARCH) qemu-user debootstrap
SYSROOT_STAMP := $(SYSROOT)/.stamp
deps: $(SYSROOT_STAMP)
$(SYSROOT_STAMP):
	@missing=""; for p in $(CROSS_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq $$missing; \
	fi
	@set -e; SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	suite=$$(. /etc/os-release && echo $$VERSION_CODENAME); \
	dl=$(dir $(SYSROOT))debootstrap; \
	mkdir -p $(dir $(SYSROOT)); \
	if ! ls $$dl/var/cache/apt/archives/libcriterion-dev_*.deb >/dev/null 2>&1; then \
	  rm -rf $$dl; \
	  echo "debootstrap --arch=$(DEB_ARCH) --foreign $$suite: downloading the $(DEB_ARCH) packages"; \
	  $$SUDO debootstrap --arch=$(DEB_ARCH) --foreign --variant=minbase \
	    --include=libjemalloc-dev,libunwind-dev,libcriterion-dev $$suite $$dl >$$dl.log 2>&1 || \
	    { tail -n 20 $$dl.log; exit 1; }; \
	fi; \
	rm -rf $(SYSROOT) && mkdir -p $(SYSROOT); \
	for d in $$dl/var/cache/apt/archives/*.deb; do dpkg-deb -x $$d $(SYSROOT); done; \
	touch $@; echo "sysroot: $(SYSROOT)"
endif

# The packages `make deps` makes sure of (tests/distros.sh keeps its cached
# chroots in step with this list).
deps-list:
	@echo $(DEB_PKGS) rustc

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

$(JEMALLOC_STAMP): $(JEMALLOC_A) $(JEMALLOC_SYMS)
	@rm -rf $(dir $@) && mkdir -p $(dir $@)
	cd $(dir $@) && ar x $(JEMALLOC_A) && rm -f jemalloc_cpp.pic.o && \
	  for o in *.pic.o; do $(OBJCOPY) --redefine-syms=$(CURDIR)/$(JEMALLOC_SYMS) $$o || exit 1; done && \
	  touch .stamp

# libgcc_s must come before libunwind among our dependencies: libunwind.so
# also defines _Unwind_*, and the program's C++ exceptions and glibc's
# forced unwinding must keep resolving them to libgcc_s (checked by
# tests/preload/cancel_cxx and tls_cxx).
$(LIB): $(LIB_OBJ) shim/exports.map $(JEMALLOC_STAMP)
	$(CC) -shared -o $@ $(LIB_OBJ) $(BUILD)/jemalloc/*.pic.o \
	  -Wl,--version-script=shim/exports.map -Wl,-Bsymbolic-functions -Wl,-z,now \
	  -Wl,-z,noexecstack -Wl,--no-undefined \
	  -Wl,--no-as-needed -lgcc_s $(UNWIND_LIB) -ldl -lpthread -lm -lc
	@# core/tls.cpp skips re-copying the library's own TLS image (.tdata) into a
	@# recycled block whose goroutine never stored a key value: that image must
	@# be jemalloc's je_tsd_tls alone (goshim's own __thread variables zero):
	@# no other TLS symbol with a size in .tdata, and .tdata no larger than
	@# je_tsd_tls. (Size-0 symbols name no storage: aarch64's mapping symbol
	@# $$d and the linker's _TLS_MODULE_BASE_ sit in .tdata there.)
	@n=$$(readelf -SW $@ | sed -n 's/^ *\[ *\([0-9]*\)\] \.tdata .*/\1/p'); \
	  secsz=$$(readelf -SW $@ | sed -n 's/^ *\[ *[0-9]*\] \.tdata  *[A-Z]*  *[0-9a-f]*  *[0-9a-f]*  *\([0-9a-f]*\) .*/\1/p'); \
	  secsz=$$((0x$${secsz:-0})); \
	  bad=$$(readelf -sW $@ | awk -v n="$$n" '$$4=="TLS" && $$7==n && $$3!=0 && $$8!="je_tsd_tls" {print $$8}'); \
	  jesz=$$(readelf -sW $@ | awk -v n="$$n" '$$4=="TLS" && $$7==n && $$8=="je_tsd_tls" && $$2~/^0+$$/ {print $$3}'); \
	  if [ -n "$$bad" ] || [ "$$secsz" -gt "$${jesz:-0}" ]; then \
	    echo "libgoshim.so: initialized TLS besides je_tsd_tls: $${bad:-.tdata is $$secsz bytes, je_tsd_tls $${jesz:-0}}" >&2; \
	    rm -f $@; exit 1; fi
	@# Sequentially consistent stores go through sc_store (core/scstore.hpp:
	@# qemu-user does not keep an aarch64 stlr before a later ldar).
	@if grep -nE '__atomic_store_n\([^;]*__ATOMIC_SEQ_CST|\.store\([^;]*memory_order_seq_cst|\.store\([^,;]*\);' \
	    $(LIB_CXX) $(wildcard core/*.hpp shim/*.hpp syscalls/*.hpp arch/$(ARCH)/*.hpp) | grep -v '^core/scstore.hpp'; then \
	  echo "libgoshim.so: a seq_cst store not written as sc_store (core/scstore.hpp)" >&2; rm -f $@; exit 1; fi

$(LAUNCHER): launcher/goshim.cpp core/size.hpp core/numparse.hpp
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

# Criterion < 2.4 (Debian 11) does not compile as C++20: see criterion_compat.h.
CRITERION_COMPAT := $(shell pkg-config --exists criterion 2>/dev/null && \
  ! pkg-config --atleast-version=2.4 criterion && echo -include tests/unit/criterion_compat.h)

$(BUILD)/tests/unit/%: tests/unit/%.cpp $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O1 -g -I. -D_GNU_SOURCE $(DEFS) $(SAN) $(SYSROOT_INC) $(CRITERION_COMPAT) $(DEPFLAGS) \
	  -o $@ $< $(CORE_OBJ) $(SYSROOT_LIB) $(CRITERION_LIB) -lgcc_s $(UNWIND_LIB) -ldl -lpthread

$(BUILD)/tests/preload/%.so: tests/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -shared -o $@ $<

$(BUILD)/tests/preload/%: tests/preload/%.c tests/preload/common.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(PRE_CFLAGS) -o $@ $< -lm -ldl -lrt

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

# A rustc without edition 2021 (1.48 in Debian 11) gets a stub that says so
# and exits 77: the runner counts it as SKIP, never as a pass.
$(BUILD)/tests/preload/%: tests/preload/%.rs
	@mkdir -p $(dir $@)
	@if [ -n "$(CROSS)" ]; then \
	  echo "$@: no Rust standard library for $(ARCH) here: a stub that exits 77"; \
	  printf '#include <stdio.h>\nint main(void) { fputs("no Rust standard library for $(ARCH) on the build machine\\n", stderr); return 77; }\n' | \
	    $(CC) -x c -o $@ -; \
	elif rustc --edition 2021 --print sysroot >/dev/null 2>&1; then \
	  echo "rustc --edition 2021 -O -o $@ $<"; rustc --edition 2021 -O -o $@ $<; \
	else \
	  echo "$@: $$(rustc --version) has no edition 2021: a stub that exits 77"; \
	  printf '#!/bin/sh\necho "needs rustc 1.56 or later (edition 2021); this is %s" >&2\nexit 77\n' \
	    "$$(rustc --version)" >$@ && chmod +x $@; \
	fi

# Headers shared by a test and its helper process.
$(patsubst tests/preload/%.c,$(BUILD)/tests/preload/%,$(wildcard tests/preload/mutex_starve_*.c)): \
  tests/preload/mutex_starve_kinds.h
$(BUILD)/tests/preload/mutex_pi_pshared: tests/preload/mutex_pi_boost.c
$(BUILD)/tests/preload/mutex_pi_cancel_pshared: tests/preload/mutex_pi_cancel.c
$(BUILD)/tests/preload/sync_pshared $(BUILD)/tests/preload/sync_pshared_helper: \
  tests/preload/sync_pshared.h
$(BUILD)/tests/preload/dbmem_idle_return $(BUILD)/tests/preload/dbmem_idle_return_wait: \
  tests/preload/dbmem_burst.h

preload: $(PRE_RS_BIN)

# Emulated runs: tests/emu/execwrap.so lets a program of the target exec
# one (Criterion re-executes each unit test binary) under the emulator.
EXECWRAP := $(BUILD)/tests/emu/execwrap.so
$(EXECWRAP): tests/emu/execwrap.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -fPIC -shared -o $@ $< -ldl
ifneq ($(EMU),)
EMU_PRELOAD := -E LD_PRELOAD=$(CURDIR)/$(EXECWRAP)
EMU_VARS    := EMU_EXEC="$(EMU_UNIT)"
UNIT_DEPS   := $(EXECWRAP)
endif

unit: deps $(UNIT_BIN) $(UNIT_DEPS)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; \
	  $(EMU_VARS) timeout $(UNIT_TMO) $(EMU_UNIT) $(EMU_PRELOAD) $$t --jobs 2; done

preload: deps all $(PRE_BIN) $(UNIT_DEPS)
	@TEST_EMU="$(EMU)" TEST_TRUE=$(SYSROOT)/bin/true TEST_TIMEOUT_SCALE=$(TIMEOUT_SCALE) \
	  TEST_EMU_THREADS=$(EMU_THREADS) TEST_EMU_PRELOAD=$(if $(EMU),$(CURDIR)/$(EXECWRAP)) \
	  OBJDUMP=$(CROSS)objdump \
	  tests/run_preload.sh $(BUILD)

observe: deps all $(OBS_BIN) $(BUILD)/tests/preload/pshared_sem_exit
	@tests/run_observe.sh $(BUILD)

# Real programs (Debian's and tests/programs/src): tests/run_programs.sh.
PROG_DIR := $(BUILD)/tests/programs
PROG_BIN := $(PROG_DIR)/http_client $(PROG_DIR)/db_client $(PROG_DIR)/db_kill $(PROG_DIR)/threads_cxx \
            $(PROG_DIR)/threads_rust $(PROG_DIR)/threads_sqlite

$(PROG_DIR)/http_client: tests/programs/src/http_client.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(PRE_CFLAGS) -o $@ $<

$(PROG_DIR)/db_client: tests/programs/src/db_client.c tests/programs/src/server_tasks.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(PRE_CFLAGS) $$(pkg-config --cflags libmariadb) -o $@ $< \
	  $$(pkg-config --libs libmariadb)

$(PROG_DIR)/db_kill: tests/programs/src/db_kill.c tests/programs/src/server_tasks.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(PRE_CFLAGS) $$(pkg-config --cflags libmariadb) -o $@ $< \
	  $$(pkg-config --libs libmariadb)

$(PROG_DIR)/threads_sqlite: tests/programs/src/threads_sqlite.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(PRE_CFLAGS) -o $@ $< -lsqlite3

$(PROG_DIR)/threads_cxx: tests/programs/src/threads_cxx.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 $(PRE_CFLAGS) -o $@ $<

# A rustc without edition 2021 (1.48, Debian 11) gets a stand-in that exits
# 77: tests/run_programs.sh reports the case as SKIP with its reason.
$(PROG_DIR)/threads_rust: tests/programs/src/threads_rust.rs
	@mkdir -p $(dir $@)
	@if rustc --edition 2021 --print crate-name $< >/dev/null 2>&1; then \
	  echo "rustc --edition 2021 -O -o $@ $<"; rustc --edition 2021 -O -o $@ $<; \
	else \
	  printf '#!/bin/sh\necho "needs rustc 1.56 or later (edition 2021); this is %s" >&2\nexit 77\n' \
	    "$$(rustc --version 2>/dev/null | cut -d' ' -f1-2)" >$@ && chmod +x $@; \
	fi

programs: deps all $(PROG_BIN)
	@tests/run_programs.sh $(BUILD)

# A cross build (ARCH=aarch64) runs the unit and preload tests under
# emulation; the real programs are the host's Debian binaries, and the
# observability tests drive the launcher and the host's tools: not run.
test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory preload
ifeq ($(EMU),)
	@$(MAKE) --no-print-directory programs
	@$(MAKE) --no-print-directory observe
else
	@echo "programs, observe: not run for a cross build (ARCH=$(ARCH)): they need the host's programs and tools"
endif

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
# runtime's arenas, are never freed on purpose; SEGV is left to the tests
# that expect it: stack_test's guard.)
test-asan: deps
	@ASAN_OPTIONS=detect_leaks=0:handle_segv=0 $(MAKE) --no-print-directory $(ASAN_VARS) unit

clang-check:
	@command -v clang >/dev/null && command -v clang++ >/dev/null || \
	  { echo "clang-check: clang is missing (apt-get install clang)"; exit 2; }
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/clang CC=clang CXX=clang++ WERROR=1 \
	  all $(UNIT_BIN:$(BUILD)/%=$(BUILD)/clang/%) $(PRE_BIN:$(BUILD)/%=$(BUILD)/clang/%) \
	  $(OBS_BIN:$(BUILD)/%=$(BUILD)/clang/%)
	@echo "clang-check: $$(clang --version | head -n 1): no warning"

# Builds and runs `make deps` and `make test` in fresh chroots of Debian 13,
# 12 and 11 (tests/distros.sh; root, debootstrap; the pristine roots are
# cached in $$GOSHIM_DISTRO_CACHE, default /root/.cache/goshim-distros).
# One suite: make test-distros DISTROS=trixie
DISTROS ?= trixie bookworm bullseye
test-distros:
	@tests/distros.sh $(DISTROS)

# ---- benchmarks -----------------------------------------------------------------
BENCH_C   := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_C:bench/%.c=$(BUILD)/bench/%)

$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -pthread -D_GNU_SOURCE -o $@ $< -lm

# The Go column: bench/go/NAME, the same workloads in Go (standard library
# only, so the build is offline; Debian's golang-go, installed by
# deps-bench for the benchmarks only).
BENCH_GO_SRC   := $(wildcard bench/go/go.mod bench/go/*/*.go bench/go/*/*/*.go)
BENCH_GO_STAMP := $(BUILD)/bench/go/.stamp
$(BENCH_GO_STAMP): $(BENCH_GO_SRC) | deps-bench
	@mkdir -p $(dir $@)
	cd bench/go && env GOCACHE=$(CURDIR)/$(BUILD)/gocache GOPATH=$(CURDIR)/$(BUILD)/gopath \
	  GOPROXY=off GOFLAGS= GO111MODULE=on GOTOOLCHAIN=local \
	  go build -o $(CURDIR)/$(BUILD)/bench/go/ ./...
	@touch $@

# make bench: the table (build/bench/results.md); make bench-results then
# puts that table into bench/RESULTS.md.
bench: deps deps-bench all $(BENCH_BIN) $(BENCH_GO_STAMP)
	@bench/run.sh $(BUILD)

bench-results:
	@bench/update_results.sh $(BUILD)/bench/results.md bench/RESULTS.md

# MariaDB + sysbench oltp_read_write, native vs goshim (issue 16).
bench-db: deps-bench all
	@bench/db.sh $(BUILD)

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

# (build/<arch>/ of a cross build holds a sysroot: its *.d are not ours.)
-include $(shell find $(BUILD) \( -name sysroot -o -name debootstrap \) -prune -o -name '*.d' -type f -print 2>/dev/null)
