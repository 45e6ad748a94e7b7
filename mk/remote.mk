# mk/remote.mk - the remote sources (http(s)://, s3://, gs://, hf://) and
# `pagein pull` need libcurl (Debian libcurl4-openssl-dev); pull's sha256/MD5
# verification needs libcrypto (libssl-dev). Without libcurl the remote
# sources are not built (src/source/{http,s3,hf}.c compile to nothing), the
# registry leaves them out, and their tests skip with a reason. Test servers:
# nginx (Debian) and s3rver (npm, installed into build/npm by
# tests/remote/servers.sh on first use). docs/REMOTE.md.
# Only the headers are needed at build time: libpagein does not link against
# either library but dlopen()s libcurl.so.4 on the first remote open
# (src/source/curl_dl.c) and libcrypto.so.3 on the first digest
# (src/core/digest.c), so that a run that opens no URL loads neither nor
# the ~30 libraries libcurl needs. dlopen is in libc since glibc 2.34;
# mk/gpu.mk adds -ldl for older ones.
HAVE_CURL := $(shell pkg-config --exists libcurl 2>/dev/null && echo yes)
ifeq ($(HAVE_CURL),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_CURL $(shell pkg-config --cflags libcurl)
HAVE_LIBCRYPTO := $(shell pkg-config --exists libcrypto 2>/dev/null && echo yes)
ifeq ($(HAVE_LIBCRYPTO),yes)
LIB_CFLAGS += -DPAGEIN_HAVE_LIBCRYPTO $(shell pkg-config --cflags libcrypto)
endif
else
$(info mk/remote.mk: libcurl not found (Debian libcurl4-openssl-dev): remote sources not built, their tests will skip)
endif
MK_DEPS += src/source/remote.h

# bench/remote.sh once, QUICK=1 (16 MiB), so that it cannot rot; never
# timed (docs/BENCHMARKS.md has the real runs). make test runs the same
# through tests/cli/svg.test.sh (`pagein bench remote --svg`, QUICK=1, with
# these checks), not as a stage of its own.
.PHONY: bench-remote-smoke
bench-remote-smoke: all
	@if [ "$(HAVE_CURL)" != yes ]; then echo "SKIP bench/remote.sh: built without libcurl"; \
	elif ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then echo "SKIP bench/remote.sh: nginx is not installed"; \
	else rm -rf $(BUILD)/remote-smoke && mkdir -p $(BUILD)/remote-smoke/home && \
	  HOME=$(abspath $(BUILD))/remote-smoke/home QUICK=1 PAGEIN=$(abspath $(TOOL)) bash bench/remote.sh --json > $(BUILD)/remote-smoke/out.json 2>&1 \
	    || { cat $(BUILD)/remote-smoke/out.json; exit 1; }; \
	  left=$$(cd $(BUILD)/remote-smoke/home && find . -mindepth 1 | head); \
	  [ -z "$$left" ] || { echo "bench/remote.sh wrote into HOME: $$left"; exit 1; }; \
	  grep -q '"pull": [0-9]' $(BUILD)/remote-smoke/out.json || { echo "bench/remote.sh: pull did not run:"; cat $(BUILD)/remote-smoke/out.json; exit 1; }; \
	  echo "ok   bench/remote.sh (QUICK=1, 16 MiB)"; \
	fi
