/* fuzz_ws_args.c: libFuzzer target for `glsb-confine run`'s argument parser
 * (src/confine/ws_run_args.c). The input is NUL-separated words: the first byte says how many
 * of them are argv (after "run"), the rest are the helper's environment. Whatever they hold
 * (duplicate names, --env-allow repeated, missing values), nothing is written out of bounds
 * (ASan) and the parsed request keeps its invariants; aborts otherwise. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws_run_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t nargv = data[0] % 64;
	/* Exact-size copy so ASan sees any read past the end; one extra NUL ends the last word. */
	char *buf = malloc(size);
	CHECK(buf);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	size_t nwords = 0;
	for (size_t i = 0; i < size; i++)
		nwords += buf[i] == '\0';
	char **argv = calloc(nwords + 2, sizeof *argv);
	char **env = calloc(nwords + 1, sizeof *env);
	CHECK(argv && env);
	int argc = 0;
	size_t nenv = 0;
	argv[argc++] = "run";
	for (char *w = buf; w < buf + size; w += strlen(w) + 1) {
		if ((size_t)argc <= nargv)
			argv[argc++] = w;
		else
			env[nenv++] = w;
	}
	struct glsb_ws_run_req rq;
	struct glsb_ws_run_err err;
	int rc = glsb_ws_run_parse(argc, argv, env, &rq, &err);
	CHECK(rc >= -1 && rc <= 1);
	if (rc == -1) {
		CHECK(err.code && *err.code);
		CHECK(memchr(err.message, '\0', sizeof err.message));
	}
	if (rc == 0) {
		CHECK(rq.root && rq.argv && rq.argv[0] && rq.argv[0][0]);
		CHECK(rq.nenv <= (size_t)argc && rq.env[rq.nenv] == NULL);
		CHECK(rq.ncwd <= (size_t)argc);
		for (size_t i = 0; i < rq.nenv; i++) {
			const char *eq = strchr(rq.env[i], '=');
			CHECK(eq && eq != rq.env[i]);
			for (size_t j = 0; j < i; j++) /* each name once */
				CHECK(strcspn(rq.env[j], "=") != (size_t)(eq - rq.env[i]) ||
				      strncmp(rq.env[j], rq.env[i], (size_t)(eq - rq.env[i])));
		}
	}
	glsb_ws_run_req_free(&rq);
	glsb_ws_run_req_free(&rq); /* safe twice */
	free(argv);
	free(env);
	free(buf);
	return 0;
}
