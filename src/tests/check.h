/* check.h: a tiny test harness for the C unit tests (one binary per file, non-zero exit on failure). */
#ifndef GLSB_CHECK_H
#define GLSB_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		check_count++;                                                        \
		if (!(cond)) {                                                        \
			check_failures++;                                             \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                     \
	} while (0)

#define CHECK_STR(a, b) CHECK(strcmp((a), (b)) == 0)
#define CHECK_MEM(a, b, n) CHECK(memcmp((a), (b), (n)) == 0)

/* Runs one test function and reports it in TAP-like form: "ok name" / "not ok name". */
#define RUN(fn)                                                                       \
	do {                                                                          \
		int before_ = check_failures;                                         \
		fn();                                                                 \
		printf("%s %s\n", check_failures == before_ ? "ok" : "not ok", #fn);  \
	} while (0)

#define CHECK_EXIT() (check_failures ? 1 : 0)

#endif
