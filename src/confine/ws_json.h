/* ws_json.h: glsb-confine's one JSON writer: a growable buffer, strings, base64 and numbers, and
 * the result objects of `write` and `run` (no I/O). `sandbox` and `doctor` build their reports
 * with it too. */
#ifndef GLSB_WS_JSON_H
#define GLSB_WS_JSON_H

#include <stddef.h>

/* A growable byte buffer. Zero-initialise; after any allocation failure every
 * later append is a no-op and `failed` stays set. glsb_ws_buf_free() is safe twice. */
struct glsb_ws_buf {
	char *p;
	size_t len, cap;
	int failed;
};

void glsb_ws_buf_free(struct glsb_ws_buf *b);
void glsb_ws_buf_put(struct glsb_ws_buf *b, const void *s, size_t n);
void glsb_ws_buf_puts(struct glsb_ws_buf *b, const char *s);
/* Append printf-style text (JSON punctuation, numbers; never strings from outside: use
 * glsb_ws_json_str for those). */
void glsb_ws_buf_printf(struct glsb_ws_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON string literal. Valid UTF-8 passes through (with JSON escapes); each
 * byte that is not part of a valid UTF-8 sequence becomes U+FFFD, so the output
 * is always valid UTF-8 JSON. Use base64 for bytes that must survive exactly. */
void glsb_ws_json_str(struct glsb_ws_buf *b, const void *s, size_t n);
/* The same for a NUL-terminated string (NULL is written as ""). */
void glsb_ws_json_cstr(struct glsb_ws_buf *b, const char *s);
/* A JSON string holding the standard base64 (RFC 4648, padded) of s[0..n). */
void glsb_ws_json_b64(struct glsb_ws_buf *b, const void *s, size_t n);
void glsb_ws_json_u64(struct glsb_ws_buf *b, unsigned long long v);

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
int glsb_ws_json_run_result(struct glsb_ws_buf *b, const struct glsb_ws_run_result *r);
int glsb_ws_json_write_result(struct glsb_ws_buf *b, unsigned long long bytes,
			      const char *path, size_t pathlen, int replaced);
int glsb_ws_json_error(struct glsb_ws_buf *b, const char *code, const char *message, size_t msglen);

#endif
