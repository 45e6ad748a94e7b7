# mk/parquet.mk - the Parquet reader's codecs (src/data/parquet_codec.c,
# docs/FORMAT-PARQUET.md): Debian's libsnappy-dev (no .pc file on Debian 12:
# found by its header), zlib1g-dev, libzstd-dev, liblz4-dev, libbrotli-dev.
# A codec whose library is missing is left out and a page using it is
# refused with PAGEIN_E_UNSUPPORTED naming the codec; its tests skip.
PQ_HAVE_SNAPPY := $(shell test -f /usr/include/snappy-c.h && echo yes)
ifeq ($(PQ_HAVE_SNAPPY),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_SNAPPY
LIB_LDLIBS += -lsnappy
else
$(info mk/parquet.mk: libsnappy-dev not found: Parquet SNAPPY pages will be refused)
endif
define PQ_PKG
ifeq ($$(shell pkg-config --exists $(1) 2>/dev/null && echo yes),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_$(2) $$(shell pkg-config --cflags $(1))
LIB_LDLIBS += $$(shell pkg-config --libs $(1))
else
$$(info mk/parquet.mk: $(1) not found: Parquet $(2) pages will be refused)
endif
endef
$(eval $(call PQ_PKG,zlib,ZLIB))
$(eval $(call PQ_PKG,libzstd,ZSTD))
$(eval $(call PQ_PKG,liblz4,LZ4))
$(eval $(call PQ_PKG,libbrotlidec,BROTLI))
MK_DEPS += mk/parquet.mk
