# mk/python.mk - the Python binding (python/): `import pagein`.
#
#   make                  also builds $(BUILD)/python/pagein/ (the package and
#                         the _pagein extension, libpagein.a linked in) when
#                         python3-dev is installed
#   make python-test      pytest on python/tests (part of `make test`); prints
#                         SKIP with the reason when python3-dev, numpy or
#                         pytest is missing
#   make python-san-test  the same under ASan+UBSan (preloaded; not in make test)
#   make install-python   copies the built package into PYTHON_SITE
#                         (default: the interpreter's /usr/local site dir)
#
# The extension uses only <pagein.h>. Sanitizer builds skip it (the
# interpreter is not built with the sanitizer runtime).

PY_INCLUDE := $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT_SUFFIX := $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX") or ".so")' 2>/dev/null)
HAVE_PYDEV := $(if $(PY_INCLUDE),$(wildcard $(PY_INCLUDE)/Python.h))

PY_PKG := $(BUILD)/python/pagein
PY_EXT := $(PY_PKG)/_pagein$(PY_EXT_SUFFIX)
PY_MODULES := $(sort $(wildcard python/pagein/*.py))
PY_COPIES := $(PY_MODULES:python/pagein/%=$(PY_PKG)/%)

.PHONY: python python-test python-san-test install-python print-lib-ldlibs print-py-srcs print-py-defs

ifneq ($(HAVE_PYDEV),)
ifeq ($(SANITIZE),)
ALL_EXTRA += python
endif
endif
TEST_EXTRA += python-test

python: $(PY_EXT) $(PY_COPIES)

# The extension's units (python/src/pagein_py.h lists them): one per area.
# Optional parts add theirs (mk/gpu.mk: python/src/gpu.c and PY_DEFS
# -DPAGEIN_PY_GPU).
PY_SRCS += python/src/module.c python/src/model.c python/src/cache.c python/src/writers.c \
           python/src/remote.c python/src/data.c python/src/dist.c python/src/dcp.c
PY_OBJS = $(patsubst python/src/%.c,$(BUILD)/obj/python/%.o,$(PY_SRCS))

ifneq ($(HAVE_PYDEV),)
$(BUILD)/obj/python/%.o: python/src/%.c python/src/pagein_py.h include/pagein.h mk/python.mk mk/gpu.mk
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PY_DEFS) -fno-strict-aliasing -isystem $(PY_INCLUDE) -c $< -o $@

$(PY_EXT): $(PY_OBJS) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) -shared $(SAN_LDFLAGS) -o $@ $(PY_OBJS) $(LIBA) -Wl,--exclude-libs,ALL $(LDLIBS_CORE) $(LIB_LDLIBS)
else
$(PY_EXT):
	@echo "python: SKIP: Python.h not found for $(PY) (install python3-dev: scripts/deps.sh python)"
endif

$(PY_PKG)/%.py: python/pagein/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# pytest, from the repository root so tests find tests/data/real; two
# pytest processes at once, each on half the test files by measured time
# (python/tests/shards.py; many tests wait on servers, child processes or
# torch.distributed ranks), each one's output printed when both are done.
PYTEST = PYTHONPATH=$(abspath $(BUILD)/python) PYTHONDONTWRITEBYTECODE=1 PAGEIN_BUILD=$(abspath $(BUILD)) \
  $(PY) -m pytest -q -p no:cacheprovider
python-test:
	@if [ -z "$(HAVE_PYDEV)" ]; then \
	  echo "python-test: SKIP: python3-dev is not installed (Python.h missing for $(PY))"; exit 0; fi; \
	if ! $(PY) -c 'import numpy' 2>/dev/null; then \
	  echo "python-test: SKIP: numpy is not importable by $(PY) (install python3-numpy)"; exit 0; fi; \
	if ! $(PY) -c 'import pytest' 2>/dev/null; then \
	  echo "python-test: SKIP: pytest is not importable by $(PY) (install python3-pytest)"; exit 0; fi; \
	$(MAKE) --no-print-directory python || exit 1; \
	shards=$$($(PY) python/tests/shards.py) || exit 1; \
	a=$$(echo "$$shards" | sed -n 1p); b=$$(echo "$$shards" | sed -n 2p); \
	$(PYTEST) $$a > $(BUILD)/pytest.0.log 2>&1 & p0=$$!; \
	$(PYTEST) $$b > $(BUILD)/pytest.1.log 2>&1 & p1=$$!; \
	wait $$p0; r0=$$?; wait $$p1; r1=$$?; \
	cat $(BUILD)/pytest.0.log $(BUILD)/pytest.1.log; \
	[ $$r0 -eq 0 ] && [ $$r1 -eq 0 ] || { echo "python-test: failed (pytest exit $$r0 and $$r1)"; exit 1; }

# The interpreter's own site directory under PREFIX (Debian:
# /usr/local/lib/python3.X/dist-packages), else the posix_prefix scheme's.
# The same tests with the extension and library under ASan+UBSan (the
# interpreter is not instrumented: the runtimes are preloaded). Not part of
# `make test` (slow); run it after changing python/src/*.c.
PY_SAN_BUILD := build-pysan
python-san-test:
	$(MAKE) --no-print-directory BUILD=$(PY_SAN_BUILD) SANITIZE=address,undefined python
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  PYTHONPATH=$(abspath $(PY_SAN_BUILD)/python) PYTHONDONTWRITEBYTECODE=1 \
	  $(PY) -m pytest -q -p no:cacheprovider python/tests

PYTHON_SITE ?= $(shell $(PY) -c 'import site, sysconfig; p = "$(PREFIX)".rstrip("/") + "/"; \
  d = [s for s in site.getsitepackages() if s.startswith(p)]; \
  print(d[0] if d else sysconfig.get_path("platlib", "posix_prefix", vars={"platbase": "$(PREFIX)", "base": "$(PREFIX)"}))' 2>/dev/null)

install-python: python
	@[ -n "$(PYTHON_SITE)" ] || { echo "install-python: cannot find the site directory; set PYTHON_SITE"; exit 2; }
	install -d $(DESTDIR)$(PYTHON_SITE)/pagein
	install -m 644 $(PY_COPIES) $(DESTDIR)$(PYTHON_SITE)/pagein/
	install -m 755 $(PY_EXT) $(DESTDIR)$(PYTHON_SITE)/pagein/

# For python/setup.py: the extra libraries libpagein.a needs, and the
# extension's sources and defines.
print-lib-ldlibs:
	@echo $(LDLIBS_CORE) $(LIB_LDLIBS)
print-py-srcs:
	@echo $(PY_SRCS)
print-py-defs:
	@echo $(PY_DEFS)

CLEAN_EXTRA += python/build python/pagein.egg-info $(PY_SAN_BUILD)
