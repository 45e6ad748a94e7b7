/* test_core_helpers.c - the core's small helpers (src/internal.h,
 * src/core/endian.h): the growable buffer's printf and the little-endian
 * loads. White-box. */
#include "test.h"

#include "../src/internal.h"
#include "../src/core/endian.h"

/* pi_buf_printf: short and long (past its stack buffer) formats land whole;
 * pi_le16/32/64 read unaligned little-endian bytes. */
TEST(core_buf_printf_and_endian) {
    struct pi_buf b = {0};
    pi_buf_printf(&b, "%s=%d;", "a", 42);
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    pi_buf_printf(&b, "[%s]", big);
    CHECK(!b.oom);
    CHECK_EQ(b.n, 5 + 2 + 599);
    CHECK(b.p && memcmp(b.p, "a=42;[", 6) == 0 && b.p[b.n - 1] == ']');
    pi_buf_free(&b);
    static const uint8_t le[9] = {0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88};
    CHECK_EQ(pi_le16(le + 1), 0x0201);
    CHECK_EQ(pi_le32(le + 1), 0x04030201);
    CHECK(pi_le64(le + 1) == 0x8807060504030201ull);
    return PASS;
}
