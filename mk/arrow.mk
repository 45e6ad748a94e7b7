# mk/arrow.mk - the Arrow IPC reader (src/data/arrow*.c, ds_arrow.c,
# docs/FORMAT-ARROW.md) inflates LZ4-frame record-batch bodies with Debian's
# liblz4-dev (scripts/deps.sh test); ZSTD bodies use libzstd, which
# mk/dataformats.mk adds (PAGEIN_HAVE_ZSTD). Without a library the reader is
# still built and refuses batches compressed with that codec
# (PAGEIN_E_UNSUPPORTED, naming the library); the tests of compressed
# fixtures then skip with the reason.
ifeq ($(shell pkg-config --exists liblz4 2>/dev/null && echo yes),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_LZ4 $(shell pkg-config --cflags liblz4)
LIB_LDLIBS += $(shell pkg-config --libs liblz4)
else
$(info mk/arrow.mk: liblz4-dev not found: LZ4-compressed Arrow batches will be refused)
endif
MK_DEPS += mk/arrow.mk
