# RemusDB — top-level build.  GNU make; C11; dependencies from Debian.
#
#   make            build remusdbd, remusdbctl and the tools (build/)
#   make check      install deps, build with ASan+UBSan, run unit + e2e
#                   tests, the manual pages' and packaging checks
#   make check-long the tests too long for make check's budget (marked
#                   "# check-long:"; every MariaDB test: its build alone
#                   would take a third of it) and make check-xen
#   make demo       install deps, build, run a protected VM and a failover drill
#   make drill      the power-pull drill -> build/drill/report.json
#   make drill-pg   DRILLS=K power pulls of a PostgreSQL VM under load
#                   -> build/drill/pg-report.json (default K=3)
#   make soak       CYCLES=K lifecycles of a protected PostgreSQL VM under
#                   load (pull, failover, resync, migrate or a second
#                   pull; a link cut, witness and daemon restarts once
#                   each) -> build/soak/report.json (default K=20; not
#                   in make check)
#   make bench      benchmarks -> build/bench/checkpoint.json, devices.json, link.json,
#                   codec.json, pgbench.json, sysbench.json, readtrack.json,
#                   reprotect.json
#   make kmod       remusdb.ko for the test guest's kernel -> build/kmod/
#   make dbms       the patched DBMS servers (dbms-patches/), cached by
#                   source+patch hash -> build/dbms/
#   make man        the manual pages -> build/man/ (checked: no warnings);
#                   also checks remusdbctl's bash completion and the
#                   systemd unit (verify, Type=notify, watchdog) and
#                   the Grafana dashboard (PromQL, metric names)
#   make fuzz       libFuzzer on the stream, protocol and NBD decoders
#                   (FUZZ_SECONDS each, default 60)
#   make deb        Debian packages -> build/deb/: remusdb (hosts),
#                   remusdb-xen (a Xen dom0, beside remusdb), remusdb-dkms
#                   and remusdb-guest (the guest); packaging in
#                   tools/debian (tools/mkdeb.sh)
#   make check-packaging
#                   make deb, then install them in a clean Debian root,
#                   boot it with systemd and run the unit there; DKMS
#                   builds remusdb.ko for the guest's kernel
#   make xenhost    the Xen test host (Xen 4.17 + a PV dom0, for QEMU's
#                   TCG) -> build/xenhost/ (tools/mkxenhost.sh, cached)
#   make check-xen  boot it under QEMU, xl create a PV domU, the Xen
#                   backend checkpoints and restores it, then the
#                   failover drill: remusdbd protecting the domU in dom0,
#                   a power pull; times as JSON (the last step of make
#                   check-long; tests/xen/boot-smoke.sh, docs/xen-host.md)
#
# Conventions: every .c under dom0-daemon/ and hypervisor/ except main files
# goes into librdb.a.  A unit test is tests/unit/test_NAME.c; a line
# "RDB-WRAP: sym1 sym2" in it links it with -Wl,--wrap=sym for each symbol.

CC      ?= cc
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS  ?= -O2 -g
PKGS    := jansson liblz4 libcurl openssl libxxhash
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
INCS    := -Idom0-daemon -Idom0-daemon/lib -Ihypervisor -Iguest-kmod/include/uapi

ifeq ($(SAN),1)
B       := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
B       := build
SANFLAGS :=
endif

ALL_CFLAGS = $(CSTD) $(WARN) $(CPPFLAGS) $(CFLAGS) $(SANFLAGS) $(INCS) $(PKG_CFLAGS) -MMD -MP
LDLIBS  := $(PKG_LIBS) -lpthread -lm
# remusdbctl's libvirt domains (tools/remusdbctl/virt.c, domxml.c): libvirt
# and libxml2 are linked into remusdbctl only, never into the daemon.
CTL_PKGS := libvirt libxml-2.0
CTL_CFLAGS := $(shell pkg-config --cflags $(CTL_PKGS) 2>/dev/null)
CTL_LIBS := $(shell pkg-config --libs $(CTL_PKGS) 2>/dev/null)
XML_LIBS := $(shell pkg-config --libs libxml-2.0 2>/dev/null)

MAIN_SRCS := dom0-daemon/main.c
LIB_SRCS := $(filter-out $(MAIN_SRCS),$(wildcard dom0-daemon/*.c dom0-daemon/lib/*.c hypervisor/*.c hypervisor/qemu/*.c hypervisor/xen/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
CTL_SRCS := $(wildcard tools/remusdbctl/*.c)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(B)/tests/%)
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(B)/bench/%)
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_BINS := $(HELPER_SRCS:tests/helpers/%.c=build/helpers/%) \
	build/helpers/remusdb-eventd build/helpers/kmodtest
# remusdb.ko for the test guest's pinned kernel (tools/mkguest.sh)
KMOD_KVER := 6.1.0-56-amd64
KMOD_KDIR := /usr/src/linux-headers-$(KMOD_KVER)
# Workloads run on the host against the guest's DBMS (libpq: dynamic).
WORKLOAD_BINS := build/workload/ledger

.PHONY: all setup qemu guest check check-long unit e2e demo drill drill-pg soak bench fuzz clean kmod dbms dbms-pg man \
	deb check-packaging xenhost check-xen

all: $(B)/remusdbd $(B)/remusdbctl $(HELPER_BINS) $(BENCH_BINS) $(WORKLOAD_BINS) build/dbms/fakekmod.so \
	build/harness/crashfs

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/librdb.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/remusdbd: $(B)/obj/dom0-daemon/main.o $(B)/librdb.a
	$(CC) $(CFLAGS) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/obj/tools/remusdbctl/%.o: ALL_CFLAGS += $(CTL_CFLAGS) -Itools/remusdbctl

$(B)/remusdbctl: $(CTL_SRCS:%.c=$(B)/obj/%.o) $(B)/librdb.a
	$(CC) $(CFLAGS) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(CTL_LIBS) $(LDLIBS)

# remusdbctl's pure parts (domain XML, the backup's QEMU arguments) under
# test: libxml2, no libvirt.
CTL_PURE_OBJS := $(B)/obj/tools/remusdbctl/domxml.o $(B)/obj/tools/remusdbctl/domxml_undo.o \
	$(B)/obj/tools/remusdbctl/qemuargv.o
$(B)/obj/tests/unit/test_domxml.o: ALL_CFLAGS += $(CTL_CFLAGS) -Itools/remusdbctl
$(B)/tests/test_domxml: $(B)/obj/tests/unit/test_domxml.o $(CTL_PURE_OBJS) $(B)/librdb.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SANFLAGS) $(LDFLAGS) -o $@ $^ -lcmocka $(XML_LIBS) $(LDLIBS)

$(B)/bench/%: $(B)/obj/tests/bench/%.o $(B)/librdb.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SANFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Helpers run inside the guest or in test namespaces: static, no sanitizer.
build/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -static -o $@ $<
build/helpers/diskseq build/helpers/seqsrv: tests/helpers/seqrec.h

# the Xen stream parser over xl's real streams, in the Xen host's dom0
XCSTAT_SRCS := tests/helpers/xcstat.c hypervisor/xen/xc_stream.c hypervisor/xen/xen_state.c \
	dom0-daemon/lib/buf.c dom0-daemon/lib/sockutil.c dom0-daemon/lib/clock.c
build/helpers/xcstat: $(XCSTAT_SRCS) hypervisor/xen/xc_stream.h hypervisor/xen/xen_state.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 $(INCS) -o $@ $(XCSTAT_SRCS)

# xenrecv (tests/helpers/xenrecv.c): the Xen backend driven as the daemon
# drives it, in the Xen test host's dom0.  It and xcstat link libc only
# (dom0 is Debian 12 as this host; none of our other libraries there).
# Not static: a static xcstat once died in glibc's startup (__ctype_init,
# its TLS) in dom0 under TCG, the next run of the same file did not.
XENRECV_SRCS := tests/helpers/xenrecv.c hypervisor/xen/backend.c \
	hypervisor/xen/xen_state.c hypervisor/xen/xc_stream.c hypervisor/proc.c hypervisor/sdunit.c \
	dom0-daemon/lib/buf.c dom0-daemon/lib/clock.c dom0-daemon/lib/log.c \
	dom0-daemon/lib/cpulist.c dom0-daemon/lib/sockutil.c dom0-daemon/lib/fileio.c
build/helpers/xenrecv: $(XENRECV_SRCS) hypervisor/hv.h hypervisor/xen/xen_state.h hypervisor/xen/xen_helper.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 $(INCS) -o $@ $(XENRECV_SRCS)

# unitspawn (tests/helpers/unitspawn.c): hypervisor/sdunit.c under a real
# systemd, in the packaging test's container (Debian 12 as this host:
# libc only, as xenrecv)
UNITSPAWN_SRCS := tests/helpers/unitspawn.c hypervisor/sdunit.c hypervisor/proc.c \
	dom0-daemon/lib/clock.c dom0-daemon/lib/log.c dom0-daemon/lib/cpulist.c dom0-daemon/lib/fileio.c
build/helpers/unitspawn: $(UNITSPAWN_SRCS) hypervisor/sdunit.h hypervisor/proc.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 $(INCS) -o $@ $(UNITSPAWN_SRCS)

# The Xen backend's helper (hypervisor/xen/xen_helper.h): the one program
# linked with Xen's libraries (libxen-dev), run in a Xen dom0.
XENHELPER_SRCS := hypervisor/xen/helper/remusdb-xen.c hypervisor/xen/helper/vifrelay.c \
	hypervisor/xen/vif_frame.c dom0-daemon/lib/clock.c
XEN_PKGS := xenlight xenguest xencontrol xenstore xentoollog
$(B)/remusdb-xen: $(XENHELPER_SRCS) hypervisor/xen/xen_helper.h hypervisor/xen/xen_state.h \
	hypervisor/xen/vif_frame.h hypervisor/xen/helper/vifrelay.h
	@mkdir -p $(dir $@)
	@pkg-config --exists $(XEN_PKGS) || { echo "remusdb-xen needs libxen-dev (tools/setup-deps.sh)" >&2; exit 1; }
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) $(CPPFLAGS) $(CFLAGS) $(INCS) $$(pkg-config --cflags $(XEN_PKGS)) $(LDFLAGS) -o $@ $(XENHELPER_SRCS) $$(pkg-config --libs $(XEN_PKGS))

# The ledger: libpq always, MariaDB Connector/C with its driver.
LEDGER_SRCS := tests/workload/ledger.c tests/workload/ledger_pg.c \
	$(wildcard tests/workload/ledger_my.c)
LEDGER_PKGS := libpq $(if $(wildcard tests/workload/ledger_my.c),libmariadb)
build/workload/ledger: $(LEDGER_SRCS) tests/workload/ledger_db.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -g $$(pkg-config --cflags $(LEDGER_PKGS)) -o $@ \
		$(LEDGER_SRCS) $$(pkg-config --libs $(LEDGER_PKGS))

# A power loss for the primary's disk image (tests/crashfs/crashfs.c)
build/harness/crashfs: tests/crashfs/crashfs.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -g $$(pkg-config --cflags fuse3) -o $@ $< $$(pkg-config --libs fuse3)

# remusdb.ko faked in user space, for the DBMS patches' host tests
build/dbms/fakekmod.so: tests/dbms/fakekmod.c guest-kmod/include/uapi/remusdb.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -fPIC -shared -o $@ $< -ldl

build/helpers/remusdb-eventd: guest-kmod/remusdb-eventd.c guest-kmod/include/uapi/remusdb.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -static -o $@ $<

build/helpers/kmodtest: guest-kmod/tests/kmodtest.c guest-kmod/include/uapi/remusdb.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -static -o $@ $<

# Built out of the source tree: Kbuild writes its objects next to the
# sources it is given.
kmod:
	@test -d $(KMOD_KDIR) || { echo "kmod: $(KMOD_KDIR) missing (make setup)"; exit 1; }
	@mkdir -p build/kmod/include/uapi
	cp -u guest-kmod/remusdb.c guest-kmod/Kbuild build/kmod/
	cp -u guest-kmod/include/uapi/remusdb.h build/kmod/include/uapi/
	$(MAKE) -C $(KMOD_KDIR) M=$(CURDIR)/build/kmod modules

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(B)/librdb.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SANFLAGS) $(LDFLAGS) -o $@ $< $(B)/librdb.a \
		$(patsubst %,-Wl$(comma)--wrap=%,$(shell sed -n 's/.*RDB-WRAP:\(.*\)\*\/.*/\1/p;s/.*RDB-WRAP:\(.*\)$$/\1/p' tests/unit/$*.c)) \
		-lcmocka $(LDLIBS)
comma := ,

setup:
	bash tools/setup-deps.sh

qemu: setup
	bash hypervisor/qemu/build-test-qemu.sh

# run-layers.sh reads the daemon's objects (tests/file-cycles.sh): main.o
# is not in librdb.a, so it is built here, before the recipe runs.
# test_remusdbctl runs the built remusdbctl ($(B)/remusdbctl).
unit: $(TEST_BINS) $(B)/obj/dom0-daemon/main.o $(B)/remusdbctl
	RDB_BUILD=$(B) bash tests/run-layers.sh
	bash tests/run-unit.sh $(TEST_BINS)

check: setup
	$(MAKE) SAN=1 all unit
	$(MAKE) SAN=1 man
	$(MAKE) check-packaging
	$(MAKE) kmod
	$(MAKE) dbms-pg
	bash tests/run-dbms.sh
	bash hypervisor/qemu/build-test-qemu.sh >/dev/null
	RDB_BUILD=build/san bash tests/run-e2e.sh

# What does not fit make check's budget (CI's 90 minutes on an empty
# cache, builds included): the tests marked "# check-long: WHY" (each
# says what covers it in make check), e2e and DBMS host tests, among them
# every MariaDB test (the MariaDB build alone took 30 min cold here), and
# the Xen drill.  Run before an issue is resolved.
check-long: setup
	$(MAKE) SAN=1 all
	$(MAKE) kmod
	$(MAKE) dbms
	RDB_DBMS_SET=long bash tests/run-dbms.sh
	bash hypervisor/qemu/build-test-qemu.sh >/dev/null
	RDB_E2E_SET=long RDB_BUILD=build/san bash tests/run-e2e.sh
	$(MAKE) check-xen

# Only the server binaries the tests use; a cached build returns at once.
# dbms-pg: PostgreSQL alone (make check's tests need no MariaDB).
dbms: dbms-pg
	bash dbms-patches/mariadb-10.11/build.sh >/dev/null

dbms-pg: setup build/dbms/fakekmod.so
	bash dbms-patches/postgresql-15/build.sh >/dev/null

# The demo builds only what it shows (no MariaDB: its drills run
# PostgreSQL), each step announced with its estimate on 2 cores, cached
# in /var/cache/remusdb: seconds once built.
demo: setup
	@echo "make demo: builds what the drills run, once (cached in /var/cache/remusdb):"
	@echo "  the test QEMU (~4 min), remusdbd and its tools (~1 min), the guest's"
	@echo "  kernel module (<1 min), the patched PostgreSQL (~2-3.5 min) and the test"
	@echo "  guests (~1-2 min), then three drills (~2 min). On an empty cache, 2 cores:"
	@echo "  about 12 minutes; cached: about 2."
	@echo "==> [1/5] the test QEMU, from Debian's source and hypervisor/qemu/ (~4 min the first time)"
	bash hypervisor/qemu/build-test-qemu.sh >/dev/null
	@echo "==> [2/5] remusdbd, remusdbctl, the test helpers (~1 min)"
	$(MAKE) --no-print-directory all >/dev/null
	@echo "==> [3/5] the guest's kernel module, remusdb.ko (<1 min)"
	$(MAKE) --no-print-directory kmod >/dev/null
	@echo "==> [4/5] PostgreSQL 15 with the commit-protection patch (~2-3.5 min the first time)"
	bash dbms-patches/postgresql-15/build.sh >/dev/null
	@echo "==> [5/5] the drills: the test guests are built on the way (~1-2 min the first time)"
	RDB_BUILD=build bash tests/drill.sh --demo

drill: all
	RDB_BUILD=$(B) bash tests/drill.sh

# DRILLS=K power pulls of a protected PostgreSQL VM under load
drill-pg: setup all kmod dbms
	RDB_BUILD=$(B) bash tests/drill-pg.sh --drills $(or $(DRILLS),3)

# CYCLES=K lifecycles of a protected PostgreSQL VM (tests/soak/soak.sh)
soak: setup all kmod dbms
	bash hypervisor/qemu/build-test-qemu.sh >/dev/null
	RDB_BUILD=$(B) bash tests/soak/soak.sh --cycles $(or $(CYCLES),20)

bench: setup all kmod dbms
	RDB_BUILD=$(B) bash tests/bench/checkpoint.sh
	RDB_BUILD=$(B) bash tests/bench/devices.sh
	RDB_BUILD=$(B) bash tests/bench/link.sh
	RDB_BUILD=$(B) bash tests/bench/codec.sh
	RDB_BUILD=$(B) bash tests/bench/pgbench.sh
	RDB_BUILD=$(B) bash tests/bench/sysbench.sh
	RDB_BUILD=$(B) bash tests/bench/readtrack.sh
	RDB_BUILD=$(B) bash tests/bench/reprotect.sh
	RDB_BUILD=$(B) bash tests/bench/switchover.sh

# remusdbd(8), remusdbctl(8), remusdb.conf(5), remusdb-vm.conf(5) ->
# build/man/, checked: no groff or man -l warning, every option listed
man: $(B)/remusdbctl $(B)/remusdbd
	RDB_BUILD=$(B) bash tests/run-man.sh
	RDB_BUILD=$(B) bash tests/run-completion.sh
	RDB_BUILD=$(B) bash tests/run-systemd.sh
	bash tests/run-dashboard.sh

fuzz: setup
	bash tests/run-fuzz.sh

# A copy of the tree with tools/debian as debian/, built by
# dpkg-buildpackage -b (remusdbd and remusdbctl by this Makefile)
deb: setup
	bash tools/mkdeb.sh

# The packages in a clean debootstrapped root (cached), systemd booted in
# a container there (tests/run-packaging.sh)
check-packaging: deb build/helpers/unitspawn
	bash tests/run-packaging.sh

# Xen 4.17 with a PV dom0 under QEMU's TCG (docs/xen-host.md)
xenhost: setup
	bash tools/mkxenhost.sh

check-xen: setup
	bash tests/xen/boot-smoke.sh

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
