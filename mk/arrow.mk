# mk/arrow.mk - the Arrow IPC reader (src/data/arrow*.c, docs/FORMAT-ARROW.md)
# inflates LZ4-frame and ZSTD record-batch bodies with Debian's liblz4-dev and
# libzstd-dev (scripts/deps.sh test). Without one of them the reader is still
# built and refuses batches compressed with that codec (PAGEIN_E_UNSUPPORTED,
# saying so); the tests of compressed fixtures then skip with the reason.
ifeq ($(shell pkg-config --exists liblz4 2>/dev/null && echo yes),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_LZ4 $(shell pkg-config --cflags liblz4)
LIB_LDLIBS += $(shell pkg-config --libs liblz4)
else
$(info mk/arrow.mk: liblz4-dev not found: LZ4-compressed Arrow batches will be refused)
endif
ifeq ($(shell pkg-config --exists libzstd 2>/dev/null && echo yes),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_ZSTD $(shell pkg-config --cflags libzstd)
LIB_LDLIBS += $(shell pkg-config --libs libzstd)
else
$(info mk/arrow.mk: libzstd-dev not found: ZSTD-compressed Arrow batches will be refused)
endif
