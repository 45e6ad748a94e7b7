# mk/data.mk - optional parts of the training-data area.
#
# tools/slowfs (FUSE latency emulator) needs libfuse3-dev (Debian); without
# it slowfs is not built and the tests that need it skip with a reason.
HAVE_FUSE3 := $(shell pkg-config --exists fuse3 2>/dev/null && echo yes)

ifeq ($(HAVE_FUSE3),yes)
SLOWFS_BIN := $(BUILD)/slowfs
ALL_EXTRA += $(SLOWFS_BIN)
$(SLOWFS_BIN): tools/slowfs.c mk/data.mk
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g -Wall -Wextra $(if $(WERROR),-Werror) $(shell pkg-config --cflags fuse3) \
	  -o $@ tools/slowfs.c $(shell pkg-config --libs fuse3)
else
$(info mk/data.mk: libfuse3-dev not found: tools/slowfs not built, slowfs tests will skip)
endif

TEST_EXTRA += data-slowfs-test
.PHONY: data-slowfs-test
# The unit tests that need slowfs run in the normal runner (they skip without
# FUSE); this target says plainly whether they could run here.
data-slowfs-test: all
	@r=$$(SLOWFS=$(abspath $(BUILD))/slowfs bash tools/slowfs.sh check); \
	  if [ -n "$$r" ]; then echo "SKIP data-slowfs-test: $$r"; else \
	  PAGEIN_SLOWFS=$(abspath $(BUILD))/slowfs $(BUILD)/tests/run data_slowfs_counts data_slowfs_readers; fi

# io_uring for pagein_read_ranges (PAGEIN_RANGES_URING) needs liburing-dev;
# without it the flag falls back to threads.
HAVE_LIBURING := $(shell pkg-config --exists liburing 2>/dev/null && echo yes)
ifeq ($(HAVE_LIBURING),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_LIBURING $(shell pkg-config --cflags liburing)
LIB_LDLIBS += $(shell pkg-config --libs liburing)
endif
