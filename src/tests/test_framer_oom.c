/* test_framer_oom.c: every framer survives each allocation failing in turn: it reports OUT_OF_MEMORY
 * (or succeeds), never crashes, never leaks (run under ASan and valgrind by make check-c).
 * Linked with -Wl,--wrap=malloc,--wrap=realloc,--wrap=calloc (GLSB_WRAP_ALLOC, see the Makefile). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "framer.h"

void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_calloc(size_t a, size_t b);
void *__wrap_malloc(size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_calloc(size_t a, size_t b);

static long allocations_left = -1; /* -1: never fail */

static int fail_now(void)
{
	if (allocations_left < 0)
		return 0;
	return allocations_left-- == 0;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_calloc(size_t a, size_t b) { return fail_now() ? NULL : __real_calloc(a, b); }

#define CASE(type, input, frames) {type, input, sizeof(input) - 1, frames, 1 << 20, GLSB_OVERSIZED_FAIL}
static const struct {
	const char *type, *input;
	size_t len;
	size_t frames; /* what a run without failures yields, fed 3 bytes at a time */
	size_t max_frame;
	enum glsb_oversized oversized;
} cases[] = {
	CASE("lines", "{\"a\":1}\n{\"b\":22}\npartial", 3),
	/* cut lines (max_frame 8): one ended by its '\n', one by the end of the body */
	{"lines", "0123456789abc\nok\n0123456789abcdef", 33, 3, 8, GLSB_OVERSIZED_CUT},
	CASE("sse", "event: e\ndata: one\ndata: two\nid: 9\n\ndata: x\n\n", 2),
	CASE("connect", "\x00\x00\x00\x00\x02{}\x02\x00\x00\x00\x02{}", 2),
	CASE("raw", "abcdef", 2),
	/* an event-stream message with one string header ("a" = "b") and payload "hi" */
	CASE("eventstream", "\x00\x00\x00\x18\x00\x00\x00\x06\xdc\xd1\xa6\x1f\x01\x61\x07\x00\x01\x62\x68\x69"
			    "\x88\xe2\x1d\x9c", 1),
};

static size_t frames_made; /* frames queued by the last run of run_with_failure */

/* Runs one case with the Nth allocation failing; returns 1 when some allocation did fail. */
static int run_with_failure(size_t c, long n)
{
	allocations_left = n;
	glsb_framer *f = glsb_framer_new(cases[c].type, cases[c].max_frame);
	int failed = 0;
	if (!f) {
		failed = 1;
	} else {
		CHECK(glsb_framer_set_oversized(f, cases[c].oversized) == 0);
		glsb_frame_queue q = {0};
		/* Fed in small pieces so partial-frame buffers grow more than once. */
		for (size_t pos = 0; pos < cases[c].len && !failed; pos += 3) {
			size_t take = cases[c].len - pos < 3 ? cases[c].len - pos : 3;
			if (glsb_framer_feed(f, cases[c].input + pos, take, &q) != 0) {
				CHECK(f->error == GLSB_OUT_OF_MEMORY);
				failed = 1;
			}
		}
		if (!failed && glsb_framer_finish(f, &q) != 0) {
			CHECK(f->error == GLSB_OUT_OF_MEMORY);
			failed = 1;
		}
		allocations_left = -1;
		frames_made = q.count;
		glsb_queue_clear(&q);
		glsb_framer_free(f);
	}
	allocations_left = -1;
	return failed;
}

static void test_every_allocation_may_fail(void)
{
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		long n = 0;
		/* Fail the 0th, 1st, ... allocation until a run needs no failed allocation at all. */
		while (run_with_failure(c, n) && n < 10000)
			n++;
		CHECK(n > 0);      /* at least the framer itself was allocated */
		CHECK(n < 10000);  /* and the scenario ends */
		CHECK(frames_made == cases[c].frames); /* the run that needed no failure made every frame */
	}
}

int main(void)
{
	RUN(test_every_allocation_may_fail);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return CHECK_EXIT();
}
