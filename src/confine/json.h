/* json.h: glsb-confine's one JSON writer, used by every command: a growable buffer, strings,
 * base64 and numbers (no I/O). */
#ifndef GLSB_JSON_H
#define GLSB_JSON_H

#include <stddef.h>

/* A growable byte buffer. Zero-initialise; after any allocation failure every
 * later append is a no-op and `failed` stays set. glsb_jbuf_free() is safe twice. */
struct glsb_jbuf {
	char *p;
	size_t len, cap;
	int failed;
};

void glsb_jbuf_free(struct glsb_jbuf *b);
void glsb_jbuf_put(struct glsb_jbuf *b, const void *s, size_t n);
void glsb_jbuf_puts(struct glsb_jbuf *b, const char *s);
/* Append printf-style text (JSON punctuation, numbers; never strings from outside: use
 * glsb_json_str for those). */
void glsb_jbuf_printf(struct glsb_jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON string literal. Valid UTF-8 passes through (with JSON escapes); each
 * byte that is not part of a valid UTF-8 sequence becomes U+FFFD, so the output
 * is always valid UTF-8 JSON. Use base64 for bytes that must survive exactly. */
void glsb_json_str(struct glsb_jbuf *b, const void *s, size_t n);
/* The same for a NUL-terminated string (NULL is written as ""). */
void glsb_json_cstr(struct glsb_jbuf *b, const char *s);
/* A JSON string holding the standard base64 (RFC 4648, padded) of s[0..n). */
void glsb_json_b64(struct glsb_jbuf *b, const void *s, size_t n);
void glsb_json_u64(struct glsb_jbuf *b, unsigned long long v);

#endif
