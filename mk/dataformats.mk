# mk/dataformats.mk - codec libraries of the dataset-format table (src/data/,
# docs/TRAINING-DATA.md): libzstd (JSONL/text .zst, MDS .mds.zstd) and zlib
# (.gz, .tar.gz). Debian: libzstd-dev, zlib1g-dev (scripts/deps.sh test).
# Without them those inputs give PAGEIN_E_UNSUPPORTED naming the library.
HAVE_ZSTD := $(shell pkg-config --exists libzstd 2>/dev/null && echo yes)
ifeq ($(HAVE_ZSTD),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_ZSTD $(shell pkg-config --cflags libzstd)
LIB_LDLIBS += $(shell pkg-config --libs libzstd)
else
$(info mk/dataformats.mk: libzstd-dev not found: .zst/.mds.zstd shards will be refused)
endif
HAVE_ZLIB := $(shell pkg-config --exists zlib 2>/dev/null && echo yes)
ifeq ($(HAVE_ZLIB),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_ZLIB $(shell pkg-config --cflags zlib)
LIB_LDLIBS += $(shell pkg-config --libs zlib)
else
$(info mk/dataformats.mk: zlib1g-dev not found: .gz shards will be refused)
endif
MK_DEPS += mk/dataformats.mk
