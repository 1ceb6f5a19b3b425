/* ws_json.c: glsb-confine's one JSON writer (reports of `sandbox` and `doctor`, results of
 * `write` and `run`); always emits valid UTF-8 JSON whatever bytes it is given (fuzzed by
 * fuzz_ws_json). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_json.h"

void glsb_ws_buf_free(struct glsb_ws_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static int reserve(struct glsb_ws_buf *b, size_t extra)
{
	if (b->failed)
		return -1;
	if (extra <= b->cap - b->len)
		return 0;
	if (extra > SIZE_MAX / 2 - b->len) {
		b->failed = 1;
		return -1;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->failed = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void glsb_ws_buf_put(struct glsb_ws_buf *b, const void *s, size_t n)
{
	if (n == 0 || reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void glsb_ws_buf_puts(struct glsb_ws_buf *b, const char *s)
{
	glsb_ws_buf_put(b, s, strlen(s));
}

void glsb_ws_buf_printf(struct glsb_ws_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	if ((size_t)n < sizeof small) {
		glsb_ws_buf_put(b, small, (size_t)n);
		return;
	}
	if (reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s[0..n) (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 if the first byte does not start one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF; /* bounds for the second byte */
	if (c < 0x80)
		return 1;
	else if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

void glsb_ws_json_str(struct glsb_ws_buf *b, const void *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = str;
	glsb_ws_buf_put(b, "\"", 1);
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
			size_t j = i; /* copy a run of plain ASCII at once */
			while (j < n && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' && s[j] < 0x7f)
				j++;
			glsb_ws_buf_put(b, s + i, j - i);
			i = j;
			continue;
		}
		switch (c) {
		case '"': glsb_ws_buf_put(b, "\\\"", 2); i++; continue;
		case '\\': glsb_ws_buf_put(b, "\\\\", 2); i++; continue;
		case '\n': glsb_ws_buf_put(b, "\\n", 2); i++; continue;
		case '\r': glsb_ws_buf_put(b, "\\r", 2); i++; continue;
		case '\t': glsb_ws_buf_put(b, "\\t", 2); i++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			glsb_ws_buf_put(b, e, sizeof e);
			i++;
			continue;
		}
		size_t len = utf8_seq(s + i, n - i);
		if (len == 0) {
			glsb_ws_buf_put(b, "\xEF\xBF\xBD", 3); /* U+FFFD for one invalid byte */
			i++;
		} else {
			glsb_ws_buf_put(b, s + i, len);
			i += len;
		}
	}
	glsb_ws_buf_put(b, "\"", 1);
}

void glsb_ws_json_cstr(struct glsb_ws_buf *b, const char *s)
{
	if (!s)
		s = "";
	glsb_ws_json_str(b, s, strlen(s));
}

void glsb_ws_json_b64(struct glsb_ws_buf *b, const void *str, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = str;
	size_t out = (n + 2) / 3 * 4;
	if (reserve(b, out + 2))
		return;
	char *o = b->p + b->len;
	*o++ = '"';
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63];
		*o++ = tab[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)s[i] << 16;
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = '=';
		*o++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63];
		*o++ = '=';
	}
	*o++ = '"';
	b->len = (size_t)(o - b->p);
}

void glsb_ws_json_u64(struct glsb_ws_buf *b, unsigned long long v)
{
	char tmp[24];
	size_t i = sizeof tmp;
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	glsb_ws_buf_put(b, tmp + i, sizeof tmp - i);
}

static void json_int(struct glsb_ws_buf *b, int v)
{
	if (v < 0) {
		glsb_ws_buf_put(b, "-", 1);
		glsb_ws_json_u64(b, (unsigned long long)-(long long)v);
	} else
		glsb_ws_json_u64(b, (unsigned long long)v);
}

static void json_bool(struct glsb_ws_buf *b, int v)
{
	glsb_ws_buf_puts(b, v ? "true" : "false");
}

static void stream(struct glsb_ws_buf *b, const char *name, const struct glsb_ws_stream *s)
{
	glsb_ws_buf_puts(b, ",\"");
	glsb_ws_buf_puts(b, name);
	glsb_ws_buf_puts(b, "\":");
	glsb_ws_json_b64(b, s->data, s->len);
	glsb_ws_buf_puts(b, ",\"");
	glsb_ws_buf_puts(b, name);
	glsb_ws_buf_puts(b, "_byte_count\":");
	glsb_ws_json_u64(b, s->byte_count);
	glsb_ws_buf_puts(b, ",\"");
	glsb_ws_buf_puts(b, name);
	glsb_ws_buf_puts(b, "_byte_count_complete\":");
	json_bool(b, s->complete);
	glsb_ws_buf_puts(b, ",\"");
	glsb_ws_buf_puts(b, name);
	glsb_ws_buf_puts(b, "_truncated\":");
	json_bool(b, s->truncated);
}

int glsb_ws_json_run_result(struct glsb_ws_buf *b, const struct glsb_ws_run_result *r)
{
	glsb_ws_buf_puts(b, "{\"ok\":true,\"exit_code\":");
	if (r->exited)
		json_int(b, r->exit_code);
	else
		glsb_ws_buf_puts(b, "null");
	glsb_ws_buf_puts(b, ",\"signal\":");
	if (r->signaled)
		json_int(b, r->signal);
	else
		glsb_ws_buf_puts(b, "null");
	glsb_ws_buf_puts(b, ",\"timed_out\":");
	json_bool(b, r->timed_out);
	stream(b, "stdout", &r->out);
	stream(b, "stderr", &r->err);
	glsb_ws_buf_puts(b, "}");
	return b->failed ? -1 : 0;
}

int glsb_ws_json_write_result(struct glsb_ws_buf *b, unsigned long long bytes,
			      const char *path, size_t pathlen, int replaced)
{
	glsb_ws_buf_puts(b, "{\"ok\":true,\"bytes\":");
	glsb_ws_json_u64(b, bytes);
	glsb_ws_buf_puts(b, ",\"path\":");
	glsb_ws_json_str(b, path, pathlen);
	glsb_ws_buf_puts(b, ",\"replaced\":");
	json_bool(b, replaced);
	glsb_ws_buf_puts(b, "}");
	return b->failed ? -1 : 0;
}

int glsb_ws_json_error(struct glsb_ws_buf *b, const char *code, const char *message, size_t msglen)
{
	glsb_ws_buf_puts(b, "{\"ok\":false,\"error\":");
	glsb_ws_json_str(b, code, strlen(code));
	glsb_ws_buf_puts(b, ",\"message\":");
	glsb_ws_json_str(b, message, msglen);
	glsb_ws_buf_puts(b, "}");
	return b->failed ? -1 : 0;
}
