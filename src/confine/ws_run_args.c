/* ws_run_args.c: `glsb-confine run`'s arguments, parsed without I/O: every array is sized by
 * what can go into it (argc bounds the --env and --env-allow entries, whatever the environment
 * holds), so no input can overflow it; fuzzed by fuzz_ws_args. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_path.h"
#include "ws_run_args.h"
#include "ws_util.h"

__attribute__((format(printf, 3, 4))) static int fail(struct glsb_ws_run_err *err, const char *code,
						      const char *fmt, ...)
{
	va_list ap;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return -1;
}

static int parse_timeout(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno == ERANGE || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* Length of the name of a KEY=VALUE entry (up to '='), or of the whole string without '='. */
static size_t key_len(const char *kv)
{
	return strcspn(kv, "=");
}

static int has_key(char *const *list, size_t n, const char *key, size_t kl)
{
	for (size_t j = 0; j < n; j++)
		if (key_len(list[j]) == kl && !strncmp(list[j], key, kl))
			return 1;
	return 0;
}

void glsb_ws_run_req_free(struct glsb_ws_run_req *rq)
{
	free(rq->cwd);
	free(rq->env);
	rq->cwd = NULL;
	rq->env = NULL;
	rq->ncwd = rq->nenv = 0;
}

int glsb_ws_run_parse(int argc, char **argv, char **env, struct glsb_ws_run_req *rq,
		      struct glsb_ws_run_err *err)
{
	size_t cap = argc > 0 ? (size_t)argc : 1;
	const char **allow;

	memset(rq, 0, sizeof *rq);
	rq->timeout = GLSB_WS_RUN_DEFAULT_TIMEOUT;
	rq->max_output = GLSB_WS_RUN_DEFAULT_MAX_OUTPUT;
	rq->cwd = calloc(cap, sizeof *rq->cwd);
	/* one slot per option word at most (--env and --env-allow each take one), plus NULL */
	rq->env = calloc(cap + 1, sizeof *rq->env);
	allow = calloc(cap, sizeof *allow);
	if (!rq->cwd || !rq->env || !allow) {
		free(allow);
		return fail(err, "out_of_memory", "parsing arguments");
	}
	size_t nallow = 0;
	int i = 1, rc = -1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--"))
			break;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			free(allow);
			return 1;
		} else if (i + 1 < argc && !strcmp(a, "--root")) {
			rq->root = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--cwd")) {
			const char *c = argv[++i];
			enum glsb_ws_path_err e = glsb_ws_name_check(c, strlen(c));
			if (e == GLSB_WS_PATH_EMPTY_COMPONENT) {
				fail(err, "empty_component", "a --cwd component is empty");
				goto out;
			}
			if (e != GLSB_WS_PATH_OK) {
				fail(err, glsb_ws_path_code(e), "--cwd component '%s': %s", c,
				     glsb_ws_path_message(e));
				goto out;
			}
			rq->cwd[rq->ncwd++] = c;
		} else if (i + 1 < argc && !strcmp(a, "--env")) {
			char *kv = argv[++i];
			size_t kl = key_len(kv);
			if (!kv[kl] || kl == 0) {
				fail(err, "usage", "--env wants KEY=VALUE with a non-empty KEY, got '%s'", kv);
				goto out;
			}
			if (has_key(rq->env, rq->nenv, kv, kl)) {
				fail(err, "usage", "--env %.*s given twice", (int)kl, kv);
				goto out;
			}
			rq->env[rq->nenv++] = kv;
		} else if (i + 1 < argc && !strcmp(a, "--env-allow")) {
			const char *name = argv[++i];
			if (!*name || strchr(name, '=')) {
				fail(err, "usage", "--env-allow wants a variable name, got '%s'", name);
				goto out;
			}
			allow[nallow++] = name;
		} else if (i + 1 < argc && !strcmp(a, "--timeout")) {
			if (parse_timeout(argv[++i], &rq->timeout)) {
				fail(err, "usage", "--timeout wants a number of seconds, got '%s'", argv[i]);
				goto out;
			}
		} else if (i + 1 < argc && !strcmp(a, "--max-output")) {
			if (glsb_ws_parse_u64(argv[++i], &rq->max_output) ||
			    rq->max_output > GLSB_WS_RUN_MAX_MAX_OUTPUT) {
				fail(err, "usage", "--max-output wants a decimal integer in [0, 2^31], got '%s'",
				     argv[i]);
				goto out;
			}
		} else {
			fail(err, "usage", "unknown or incomplete option '%s' (see glsb-confine run --help)", a);
			goto out;
		}
	}
	/* Each allowed name once, from our environment as getenv would find it, unless --env gave
	 * it: the env array has room for every option word, whatever the environment holds. */
	for (size_t k = 0; k < nallow; k++) {
		size_t nl = strlen(allow[k]);
		if (has_key(rq->env, rq->nenv, allow[k], nl))
			continue; /* given with --env (which wins), or asked before */
		for (char **e = env; e && *e; e++)
			if (key_len(*e) == nl && (*e)[nl] == '=' && !strncmp(*e, allow[k], nl)) {
				rq->env[rq->nenv++] = *e;
				break;
			}
	}
	if (!rq->root) {
		fail(err, "usage", "--root is required");
		goto out;
	}
	if (i >= argc || i + 1 >= argc) {
		fail(err, "usage", "the program goes after '--': glsb-confine run [options] -- ARGV...");
		goto out;
	}
	if (!argv[i + 1][0]) {
		fail(err, "not_found", "the program name (argv[0]) is empty");
		goto out;
	}
	rq->argv = argv + i + 1;
	rc = 0;
out:
	free(allow);
	return rc;
}
