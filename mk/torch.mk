# torch.mk - PyTorch checkpoint tests against Debian's python3-torch:
# tests/torch_gen.py writes real torch.save checkpoints, tests/torch_check.py
# compares `pagein convert` with torch.load tensor by tensor and checks that
# malicious, legacy, compressed, truncated and corrupt files are refused.
# Skips with a reason when torch is not importable.
TORCH_TEST_DIR := $(BUILD)/torch-test
TEST_EXTRA += torch-test
.PHONY: torch-test
torch-test: $(TOOL)
	@if ! $(PY) -c 'import torch' >/dev/null 2>&1; then \
	  echo "SKIP torch-test: python3-torch is not installed (scripts/deps.sh test installs it)"; exit 0; fi; \
	rm -rf $(TORCH_TEST_DIR) && \
	$(PY) tests/torch_gen.py $(TORCH_TEST_DIR) && \
	$(PY) tests/torch_check.py $(TOOL) $(TORCH_TEST_DIR) && \
	echo "torch-test: passed"
