# api_fence.test.sh - include/pagein.h's fence: a program that
# includes pagein.h without PAGEIN_EXPERIMENTAL compiles (-Werror) and runs
# against the stable core, and does not see the experimental names; with
# the macro it does.
. "$REPO/tests/cli/lib.sh"
set -u
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "no C compiler ($CC)"; exit 77; }
BUILD=$(dirname "$PAGEIN")
[ -f "$BUILD/libpagein.a" ] || { echo "no $BUILD/libpagein.a"; exit 77; }
LIBS=$(make -s -C "$REPO" BUILD="$BUILD" print-lib-ldlibs 2>/dev/null) || LIBS="-lpthread -lm -ldl"
FLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pedantic -I$REPO/include"

# the stable core: files, models, strategies, errors, dtypes, writers, page-cache tools
cat > "$TMP/stable.c" <<'C'
#include <pagein.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    if (argc < 2) return 2;
    float v[4] = {1, 2, 3, 4};
    uint64_t shape[1] = {4};
    pagein_write_tensor t = {"model.layers.0.w", PAGEIN_DTYPE_F32, 1, shape, v, NULL, NULL};
    pagein_write_opts wo = PAGEIN_WRITE_OPTS_INIT;
    if (pagein_safetensors_write(argv[1], &t, 1, &wo) != 0) return 3;
    pagein_model *m = NULL;
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = (pagein_strategy)pagein_strategy_from_name("populate");
    if (pagein_model_open(&m, argv[1], &o) != 0) {
        fprintf(stderr, "%s: %s\n", pagein_strerror(-1), pagein_last_error_detail());
        return 4;
    }
    const pagein_tensor *x = pagein_model_tensor_get(m, "model.layers.0.w");
    const void *d = NULL;
    int ok = x && pagein_model_tensor_data(m, x, &d) == 0 && d && memcmp(d, v, sizeof v) == 0;
    pagein_model_close(m);
    pagein_cache_file *c = NULL;
    pagein_residency r;
    int rc = pagein_cache_open(&c, argv[1]);
    if (rc == 0) rc = pagein_cache_residency(c, 0, pagein_cache_size(c), &r);
    pagein_cache_close(c);
    printf("%s %d %d %d\n", ok ? "ok" : "bad", (int)pagein_dtype_from_name("BF16", 4) == (int)PAGEIN_DTYPE_BF16,
           pagein_is_url("/x"), rc);
    return ok ? 0 : 5;
}
C
expect_exit 0 $CC $FLAGS -o "$TMP/stable" "$TMP/stable.c" "$BUILD/libpagein.a" $LIBS
expect_exit 0 "$TMP/stable" "$TMP/m.safetensors"
expect_contains "ok 1 0 0"

# the experimental names are not declared without the macro
for name in pagein_dataset_open pagein_reader_open pagein_pipe_open pagein_read_ranges pagein_pull \
            pagein_source_open pagein_model_io_facts pagein_gpu_load_model pagein_dist_plan_new; do
  n=$(echo '#include <pagein.h>' | $CC -std=c11 -E -I"$REPO/include" - | grep -c "\b$name\b")
  [ "$n" = 0 ] || fail "$name is visible without PAGEIN_EXPERIMENTAL"
  n=$(printf '#define PAGEIN_EXPERIMENTAL\n#include <pagein.h>\n' | $CC -std=c11 -E -I"$REPO/include" - | grep -c "\b$name\b")
  [ "$n" != 0 ] || fail "$name is not declared with PAGEIN_EXPERIMENTAL"
done
cat > "$TMP/young.c" <<'C'
#include <pagein.h>
int main(void) { return pagein_pull("http://127.0.0.1:1/x", 0, 0, 0) == 0; }
C
expect_exit 1 $CC $FLAGS -c -o "$TMP/young.o" "$TMP/young.c"
expect_contains "pagein_pull"
expect_exit 0 $CC $FLAGS -DPAGEIN_EXPERIMENTAL -c -o "$TMP/young.o" "$TMP/young.c"
# C++ sees the same stable core
if command -v c++ >/dev/null; then
  echo '#include <pagein.h>
int main() { return pagein_version() == 0; }' > "$TMP/cxx.cc"
  expect_exit 0 c++ -Wall -Werror -I"$REPO/include" -c -o "$TMP/cxx.o" "$TMP/cxx.cc"
fi
echo "ok"
