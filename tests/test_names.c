/* test_names.c - unit tests for the map from names to ints (vm/core/names.h): binding, replacing, growing,
 * clearing, against a plain list searched from start to end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/core/names.h"

/* Thousands of names (grown from the smallest room, and from a hint),
 * some bound twice: every name gives the value bound last, any other
 * name the missing value, as the list says. */
static void test_against_a_list(void **state)
{
    (void)state;
    enum { N = 5000 };
    for (int hinted = 0; hinted < 2; hinted++) {
        fvm_arena a = {0};
        fvm_names m;
        fvm_names_init(&m, &a, hinted ? N : 0);
        const char *keys[N];
        int vals[N];
        uint64_t r = 88172645463325252u;
        for (int i = 0; i < N; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            /* a tenth of the names again: replaced */
            keys[i] = i % 10 == 9 ? keys[r % (uint64_t)i] : fvm_arena_printf(&a, "n%llu.%d", (unsigned long long)r, i);
            vals[i] = (int)(r % 1000);
            assert_true(fvm_names_put(&m, keys[i], vals[i]));
        }
        for (int i = 0; i < N; i++) {
            int want = -1;
            for (int j = N - 1; j >= 0 && want < 0; j--)
                if (!strcmp(keys[j], keys[i]))
                    want = vals[j];
            assert_int_equal(fvm_names_get(&m, keys[i], -7), want);
        }
        assert_int_equal(fvm_names_get(&m, "n", -7), -7);
        assert_int_equal(fvm_names_get(&m, "", -7), -7);
        assert_true(m.n < N && 2 * m.n <= m.cap);
        fvm_names_clear(&m);
        assert_int_equal(fvm_names_get(&m, keys[0], -7), -7);
        assert_true(fvm_names_put(&m, "", 3));
        assert_int_equal(fvm_names_get(&m, "", -7), 3);
        fvm_arena_free(&a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_a_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
