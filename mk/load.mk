# load.mk - the load engine's private header (src/load/load.h) is a
# dependency of every object, like the top-level headers, so a change to
# struct pagein_model rebuilds everything that uses it.
MK_DEPS += $(wildcard src/load/*.h)
