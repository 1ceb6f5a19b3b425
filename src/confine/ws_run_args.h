/* ws_run_args.h: `glsb-confine run`'s arguments, parsed without I/O (fuzzed by fuzz_ws_args). */
#ifndef GLSB_WS_RUN_ARGS_H
#define GLSB_WS_RUN_ARGS_H

#include <stddef.h>

#define GLSB_WS_RUN_DEFAULT_TIMEOUT 30.0
#define GLSB_WS_RUN_DEFAULT_MAX_OUTPUT (1024ULL * 1024)
#define GLSB_WS_RUN_MAX_MAX_OUTPUT (1ULL << 31)

struct glsb_ws_run_req {
	const char *root;
	const char **cwd; /* ncwd single names */
	size_t ncwd;
	char **env; /* NULL-terminated: the --env values, then the --env-allow ones */
	size_t nenv;
	double timeout;
	unsigned long long max_output;
	char **argv; /* NULL-terminated, from the caller's argv */
};

/* Why parsing stopped: code is a result code ("usage", "slash_in_name", ...). */
struct glsb_ws_run_err {
	const char *code;
	char message[512];
};

/* Parse argv[1..argc) (argv[0] is the command name). env is the helper's own environment, where
 * --env-allow NAME finds its value (the first NAME=, as getenv does; a name asked twice, or also
 * given with --env, counts once). Returns 0 with rq filled, 1 when --help was asked, or -1 with
 * err set. rq owns its arrays (glsb_ws_run_req_free, also after a failure); the strings are
 * argv's and env's. */
int glsb_ws_run_parse(int argc, char **argv, char **env, struct glsb_ws_run_req *rq,
		      struct glsb_ws_run_err *err);
void glsb_ws_run_req_free(struct glsb_ws_run_req *rq);

#endif
