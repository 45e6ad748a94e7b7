# mk/matrix.mk - `make bench`: the storage matrix (bench/matrix.sh;
# docs/BENCHMARKS.md, "storage matrix"). MATRIX_ARGS passes options, e.g.
# make bench MATRIX_ARGS="--size 128M --cells ext4,slowfs-1ms-ra128k".
MATRIX_ARGS ?=
.PHONY: bench-matrix
bench: bench-matrix
bench-matrix: all
	PAGEIN=$(abspath $(TOOL)) SLOWFS=$(abspath $(BUILD))/slowfs bash bench/matrix.sh --out $(BUILD)/matrix $(MATRIX_ARGS)
