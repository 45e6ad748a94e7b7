# mk/cache.mk - page-cache tools (docs/PAGE-CACHE.md). `make test` runs
# bench/vmtouch.sh once, QUICK=1, on a tiny generated model so the script
# cannot rot; it is never timed there (docs/BENCHMARKS.md has the real runs).
TEST_EXTRA += bench-vmtouch-smoke
.PHONY: bench-vmtouch-smoke
bench-vmtouch-smoke: all
	@if ! command -v vmtouch >/dev/null; then \
	  echo "SKIP bench/vmtouch.sh: vmtouch is not installed (Debian package vmtouch; scripts/deps.sh bench)"; \
	else \
	  mkdir -p $(BUILD)/cache-smoke && rm -f $(BUILD)/cache-smoke/tiny.safetensors && \
	  $(TOOL) make-sample $(BUILD)/cache-smoke/tiny.safetensors --size 8M >/dev/null && \
	  QUICK=1 PAGEIN=$(TOOL) bash bench/vmtouch.sh $(BUILD)/cache-smoke/tiny.safetensors > $(BUILD)/cache-smoke/out.txt 2>&1 \
	    || { cat $(BUILD)/cache-smoke/out.txt; exit 1; }; \
	  echo "ok   bench/vmtouch.sh (QUICK=1, tiny model)"; \
	fi
