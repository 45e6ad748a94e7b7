# mk/funclen.mk - no C function over 200 lines (scripts/funclen.sh names the
# exceptions); checked by every `make`, like scripts/layers.sh, and by
# tests/cli/funclen.test.sh.
.PHONY: funclen
ALL_EXTRA += funclen
funclen:
	@bash scripts/funclen.sh
