# mk/install.mk - `make install-test` (part of make test): the README's C
# recipe (prog.c, make install, pkg-config, rpath) built and run against a
# temporary prefix, and DESTDIR staging (tests/install_readme.sh).
TEST_EXTRA += install-test
.PHONY: install-test
install-test: all
	bash tests/install_readme.sh $(BUILD)
