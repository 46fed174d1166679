/*
 * check_arena.c: the per-request arena.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <check.h>

#include "arena.h"
#include "suites.h"

static bool
aligned(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

static bool
all_zero(const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

START_TEST(test_alloc_aligned_zeroed)
{
	struct pn_arena *a = pn_arena_new();
	size_t	sizes[] = {0, 1, 3, 15, 16, 17, 100, 8191, 8192, 8193, 16383, 16384, 16385, 100000};
	size_t	i, total = 0;

	ck_assert_uint_eq(pn_arena_used(a), 0);
	for (i = 0; i < PN_ARRAY_LEN(sizes); i++) {
		unsigned char *p = pn_arena_alloc(a, sizes[i]);

		ck_assert_ptr_nonnull(p);
		ck_assert_msg(aligned(p), "%zu bytes not 16-byte aligned", sizes[i]);
		ck_assert_msg(all_zero(p, sizes[i]), "%zu bytes not zeroed", sizes[i]);
		memset(p, 0xa5, sizes[i]);	/* ASan/valgrind: the whole size is ours */
		total += sizes[i];
		ck_assert_uint_eq(pn_arena_used(a), total);
	}
	pn_arena_free(a);
}
END_TEST

/* Allocations never overlap, whether they share a block, open a new one or
 * get a block of their own. */
START_TEST(test_no_overlap)
{
	struct pn_arena *a = pn_arena_new();
	unsigned char *p[300];
	size_t	n[300], i, j;

	for (i = 0; i < PN_ARRAY_LEN(p); i++) {
		n[i] = i % 7 == 0 ? 9000 + i : (i * 37) % 600 + 1;
		p[i] = pn_arena_alloc(a, n[i]);
		memset(p[i], (int)(i & 0xff), n[i]);
	}
	for (i = 0; i < PN_ARRAY_LEN(p); i++)
		for (j = 0; j < n[i]; j++)
			if (p[i][j] != (unsigned char)(i & 0xff))
				ck_abort_msg("allocation %zu overwritten at byte %zu", i, j);
	pn_arena_free(a);
}
END_TEST

START_TEST(test_reset)
{
	struct pn_arena *a = pn_arena_new();
	unsigned char *first, *p;
	int	round;

	first = pn_arena_alloc(a, 10);
	for (round = 0; round < 50; round++) {
		pn_arena_reset(a);
		ck_assert_uint_eq(pn_arena_used(a), 0);
		/* the first block is kept: the same address comes back, zeroed */
		p = pn_arena_alloc(a, 10);
		ck_assert_ptr_eq(p, first);
		ck_assert(all_zero(p, 10));
		memset(p, 1, 10);
		/* big and many-block requests are released by the next reset */
		memset(pn_arena_alloc(a, 1 << 20), 2, 1 << 20);
		for (int i = 0; i < 40; i++)
			memset(pn_arena_alloc(a, 1000), 3, 1000);
		ck_assert_uint_eq(pn_arena_used(a), 10 + (1 << 20) + 40 * 1000);
	}
	pn_arena_free(a);
	pn_arena_free(NULL);	/* NULL-safe, as arena.h says */
}
END_TEST

START_TEST(test_strings)
{
	struct pn_arena *a = pn_arena_new();
	char	big[20000];
	const char *s;
	unsigned char *m;

	ck_assert_str_eq(pn_arena_strdup(a, ""), "");
	ck_assert_str_eq(pn_arena_strdup(a, "shop-a"), "shop-a");
	ck_assert_str_eq(pn_arena_strndup(a, "shop-a", 4), "shop");
	ck_assert_str_eq(pn_arena_strndup(a, "shop-a", 0), "");
	/* memdup copies NUL bytes and still terminates */
	m = pn_arena_memdup(a, "a\0b", 3);
	ck_assert_int_eq(memcmp(m, "a\0b", 4), 0);
	ck_assert_ptr_nonnull(pn_arena_memdup(a, NULL, 0));
	ck_assert_str_eq(pn_arena_printf(a, "%s/%d", "notify", 42), "notify/42");
	ck_assert_str_eq(pn_arena_printf(a, "%s", ""), "");
	/* a printf longer than a block */
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	s = pn_arena_printf(a, "<%s>", big);
	ck_assert_uint_eq(strlen(s), sizeof(big) + 1);
	ck_assert_int_eq(s[0], '<');
	ck_assert_int_eq(s[sizeof(big)], '>');
	s = pn_arena_strdup(a, big);
	ck_assert_str_eq(s, big);
	pn_arena_free(a);
}
END_TEST

Suite *
suite_arena(void)
{
	Suite  *s = suite_create("arena");
	TCase  *tc = tcase_create("arena");

	tcase_add_test(tc, test_alloc_aligned_zeroed);
	tcase_add_test(tc, test_no_overlap);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_strings);
	suite_add_tcase(s, tc);
	return s;
}
