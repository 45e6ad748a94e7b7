# mk/remote.mk - the remote sources (http(s)://, s3://, gs://, hf://) and
# `pagein pull` need libcurl (Debian libcurl4-openssl-dev); pull's sha256/MD5
# verification needs libcrypto (libssl-dev). Without libcurl the remote
# sources are not built (src/source/{http,s3,hf}.c compile to nothing), the
# registry leaves them out, and their tests skip with a reason. Test servers:
# nginx (Debian) and s3rver (npm, installed into build/npm by
# tests/remote/servers.sh on first use). docs/REMOTE.md.
HAVE_CURL := $(shell pkg-config --exists libcurl 2>/dev/null && echo yes)
ifeq ($(HAVE_CURL),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_CURL $(shell pkg-config --cflags libcurl)
LIB_LDLIBS += $(shell pkg-config --libs libcurl)
HAVE_LIBCRYPTO := $(shell pkg-config --exists libcrypto 2>/dev/null && echo yes)
ifeq ($(HAVE_LIBCRYPTO),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_LIBCRYPTO $(shell pkg-config --cflags libcrypto)
LIB_LDLIBS += $(shell pkg-config --libs libcrypto)
endif
else
$(info mk/remote.mk: libcurl not found (Debian libcurl4-openssl-dev): remote sources not built, their tests will skip)
endif
MK_DEPS += src/source/remote.h
