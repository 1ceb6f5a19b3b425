/* json.c: glsb-confine's one JSON writer and its growable buffer, used by every command (the
 * reports of `sandbox` and `doctor`, the control channel's replies, the results of `write`, `run`
 * and `read`); always emits valid UTF-8 JSON whatever bytes it is given (fuzzed by fuzz_ws_json). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

void glsb_jbuf_free(struct glsb_jbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static int reserve(struct glsb_jbuf *b, size_t extra)
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

void glsb_jbuf_put(struct glsb_jbuf *b, const void *s, size_t n)
{
	if (n == 0 || reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void glsb_jbuf_puts(struct glsb_jbuf *b, const char *s)
{
	glsb_jbuf_put(b, s, strlen(s));
}

void glsb_jbuf_printf(struct glsb_jbuf *b, const char *fmt, ...)
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
		glsb_jbuf_put(b, small, (size_t)n);
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

void glsb_json_str(struct glsb_jbuf *b, const void *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = str;
	glsb_jbuf_put(b, "\"", 1);
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
			size_t j = i; /* copy a run of plain ASCII at once */
			while (j < n && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' && s[j] < 0x7f)
				j++;
			glsb_jbuf_put(b, s + i, j - i);
			i = j;
			continue;
		}
		switch (c) {
		case '"': glsb_jbuf_put(b, "\\\"", 2); i++; continue;
		case '\\': glsb_jbuf_put(b, "\\\\", 2); i++; continue;
		case '\n': glsb_jbuf_put(b, "\\n", 2); i++; continue;
		case '\r': glsb_jbuf_put(b, "\\r", 2); i++; continue;
		case '\t': glsb_jbuf_put(b, "\\t", 2); i++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			glsb_jbuf_put(b, e, sizeof e);
			i++;
			continue;
		}
		size_t len = utf8_seq(s + i, n - i);
		if (len == 0) {
			glsb_jbuf_put(b, "\xEF\xBF\xBD", 3); /* U+FFFD for one invalid byte */
			i++;
		} else {
			glsb_jbuf_put(b, s + i, len);
			i += len;
		}
	}
	glsb_jbuf_put(b, "\"", 1);
}

void glsb_json_cstr(struct glsb_jbuf *b, const char *s)
{
	if (!s)
		s = "";
	glsb_json_str(b, s, strlen(s));
}

void glsb_json_b64(struct glsb_jbuf *b, const void *str, size_t n)
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

void glsb_json_u64(struct glsb_jbuf *b, unsigned long long v)
{
	char tmp[24];
	size_t i = sizeof tmp;
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	glsb_jbuf_put(b, tmp + i, sizeof tmp - i);
}
