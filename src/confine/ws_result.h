/* ws_result.h: the result objects of `write`, `run` and `read` (REPORT.md), as JSON (no I/O). */
#ifndef GLSB_WS_RESULT_H
#define GLSB_WS_RESULT_H

#include <stddef.h>

#include "json.h"

/* One captured stream of `run`. */
struct glsb_ws_stream {
	const unsigned char *data; /* the first len bytes the program wrote */
	size_t len;
	unsigned long long byte_count; /* bytes observed in total (>= len) */
	int complete;  /* byte_count is the full count (the pipe reached EOF) */
	int truncated; /* byte_count > len */
};

struct glsb_ws_run_result {
	int exited, exit_code;  /* exit_code valid when exited */
	int signaled, signal;   /* signal valid when signaled */
	int timed_out;
	struct glsb_ws_stream out, err;
};

/* Each appends one complete JSON object (no newline) and returns 0, or -1 if
 * the buffer failed to grow. */
int glsb_ws_json_run_result(struct glsb_jbuf *b, const struct glsb_ws_run_result *r);
int glsb_ws_json_write_result(struct glsb_jbuf *b, unsigned long long bytes,
			      const char *path, size_t pathlen, int replaced);
int glsb_ws_json_error(struct glsb_jbuf *b, const char *code, const char *message, size_t msglen);

#endif
