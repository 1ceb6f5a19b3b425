/* fuzz_ws_json.c: libFuzzer target for glsb-confine's JSON result encoder
 * (src/confine/json.c, ws_result.c): whatever the bytes, the output is one valid JSON
 * object in valid UTF-8, strings round-trip (invalid bytes as U+FFFD) and
 * base64 decodes back to the exact input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "ws_result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

/* A small strict JSON checker: enough grammar for what the encoder emits. */
struct rd {
	const unsigned char *s;
	size_t n, i;
};

static int peek(struct rd *r) { return r->i < r->n ? r->s[r->i] : -1; }

static int lit(struct rd *r, const char *w)
{
	size_t l = strlen(w);
	if (r->n - r->i < l || memcmp(r->s + r->i, w, l))
		return 0;
	r->i += l;
	return 1;
}

static int hexd(int c)
{
	return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
		: (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

/* Strict UTF-8 length of the sequence at s (0 = invalid). */
static size_t utf8_len(const unsigned char *s, size_t n, uint32_t *cp)
{
	if (s[0] < 0x80) { *cp = s[0]; return 1; }
	size_t l = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
	if (!l || l > n || s[0] > 0xF4)
		return 0;
	uint32_t v = s[0] & (0x7F >> l);
	for (size_t i = 1; i < l; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3F);
	}
	static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
	if (v < min[l] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return l;
}

/* Parse a string; the decoded bytes go to out (if not NULL). */
static int str(struct rd *r, unsigned char *out, size_t *olen)
{
	size_t o = 0;
	if (peek(r) != '"')
		return 0;
	r->i++;
	for (;;) {
		int c = peek(r);
		if (c < 0 || c < 0x20)
			return 0;
		if (c == '"') {
			r->i++;
			break;
		}
		if (c == '\\') {
			r->i++;
			int e = peek(r);
			r->i++;
			unsigned char b;
			switch (e) {
			case '"': b = '"'; break;
			case '\\': b = '\\'; break;
			case '/': b = '/'; break;
			case 'n': b = '\n'; break;
			case 'r': b = '\r'; break;
			case 't': b = '\t'; break;
			case 'b': b = '\b'; break;
			case 'f': b = '\f'; break;
			case 'u': {
				uint32_t v = 0;
				for (int k = 0; k < 4; k++) {
					int d = hexd(peek(r));
					if (d < 0)
						return 0;
					v = v << 4 | (uint32_t)d;
					r->i++;
				}
				if (v >= 0x80) /* the encoder only escapes controls */
					return 0;
				b = (unsigned char)v;
				break;
			}
			default: return 0;
			}
			if (out)
				out[o] = b;
			o++;
			continue;
		}
		uint32_t cp;
		size_t l = utf8_len(r->s + r->i, r->n - r->i, &cp);
		if (!l)
			return 0;
		if (out)
			memcpy(out + o, r->s + r->i, l);
		o += l;
		r->i += l;
	}
	if (olen)
		*olen = o;
	return 1;
}

static int value(struct rd *r)
{
	int c = peek(r);
	if (c == '"')
		return str(r, NULL, NULL);
	if (c == 't')
		return lit(r, "true");
	if (c == 'f')
		return lit(r, "false");
	if (c == 'n')
		return lit(r, "null");
	if (c == '-' || (c >= '0' && c <= '9')) {
		if (c == '-')
			r->i++;
		if (peek(r) < '0' || peek(r) > '9')
			return 0;
		if (peek(r) == '0') {
			r->i++;
			return !(peek(r) >= '0' && peek(r) <= '9');
		}
		while (peek(r) >= '0' && peek(r) <= '9')
			r->i++;
		return 1;
	}
	return 0;
}

/* A flat object of string keys; returns the number of members or -1. */
static int object(struct rd *r)
{
	int n = 0;
	if (!lit(r, "{"))
		return -1;
	if (lit(r, "}"))
		return 0;
	do {
		if (!str(r, NULL, NULL) || !lit(r, ":") || !value(r))
			return -1;
		n++;
	} while (lit(r, ","));
	return lit(r, "}") && r->i == r->n ? n : -1;
}

/* Find "key": and return the offset of its value. */
static size_t find(const struct glsb_jbuf *b, const char *key)
{
	char pat[64];
	size_t l = strlen(key);
	pat[0] = '"';
	memcpy(pat + 1, key, l);
	pat[l + 1] = '"';
	pat[l + 2] = ':';
	l += 3;
	for (size_t i = 0; i + l <= b->len; i++)
		if (!memcmp(b->p + i, pat, l))
			return i + l;
	abort();
}

static size_t b64dec(const char *s, size_t n, unsigned char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	CHECK(n % 4 == 0);
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		uint32_t v = 0;
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			char c = s[i + k];
			if (c == '=') {
				CHECK(i + 4 == n && k >= 2);
				pad++;
				v <<= 6;
				continue;
			}
			CHECK(!pad);
			const char *q = memchr(tab, c, 64);
			CHECK(q);
			v = v << 6 | (uint32_t)(q - tab);
		}
		out[o++] = (unsigned char)(v >> 16);
		if (pad < 2)
			out[o++] = (unsigned char)(v >> 8);
		if (pad < 1)
			out[o++] = (unsigned char)v;
	}
	return o;
}

/* Decoded string bytes equal the input with each invalid UTF-8 byte as U+FFFD. */
static void check_string_roundtrip(const unsigned char *in, size_t n, const unsigned char *dec, size_t dl)
{
	size_t i = 0, j = 0;
	while (i < n) {
		uint32_t cp;
		size_t l = utf8_len(in + i, n - i, &cp);
		if (l) {
			CHECK(j + l <= dl && !memcmp(dec + j, in + i, l));
			i += l;
			j += l;
		} else {
			CHECK(j + 3 <= dl && !memcmp(dec + j, "\xEF\xBF\xBD", 3));
			i++;
			j += 3;
		}
	}
	CHECK(j == dl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Split the input: stdout bytes | stderr bytes | message; flags from byte 0. */
	unsigned flags = size ? data[0] : 0;
	const uint8_t *rest = size ? data + 1 : data;
	size_t rl = size ? size - 1 : 0;
	size_t a = rl * (flags % 5) / 8, c = (rl - a) / 2;
	struct glsb_ws_run_result r = {
		.exited = flags & 1, .exit_code = (int)(flags * 1234567u) - 400,
		.signaled = (flags >> 1) & 1, .signal = (int)(flags >> 2),
		.timed_out = (flags >> 3) & 1,
		.out = {rest, a, (unsigned long long)a + (flags & 16 ? 0xFFFFFFFFFFULL : 0), flags & 32, flags & 16},
		.err = {rest + a, c, (unsigned long long)c * (flags & 64 ? 3 : 1), flags & 128, 0},
	};
	const uint8_t *msg = rest + a + c;
	size_t ml = rl - a - c;

	struct glsb_jbuf b = {0};
	CHECK(glsb_ws_json_run_result(&b, &r) == 0);
	struct rd rd = {(const unsigned char *)b.p, b.len, 0};
	CHECK(object(&rd) == 12);
	unsigned char *dec = malloc(rl + 4);
	CHECK(dec);
	size_t at = find(&b, "stdout") + 1;
	const char *end = memchr(b.p + at, '"', b.len - at);
	CHECK(end);
	size_t dl = b64dec(b.p + at, (size_t)(end - (b.p + at)), dec);
	CHECK(dl == a && !memcmp(dec, rest, a));
	at = find(&b, "stderr") + 1;
	end = memchr(b.p + at, '"', b.len - at);
	CHECK(end);
	dl = b64dec(b.p + at, (size_t)(end - (b.p + at)), dec);
	CHECK(dl == c && !memcmp(dec, rest + a, c));
	free(dec);
	glsb_jbuf_free(&b);

	/* Error objects and write results carry arbitrary bytes as strings. */
	struct glsb_jbuf e = {0};
	CHECK(glsb_ws_json_error(&e, "io_error", (const char *)msg, ml) == 0);
	rd = (struct rd){(const unsigned char *)e.p, e.len, 0};
	CHECK(object(&rd) == 3);
	unsigned char *sdec = malloc(3 * ml + 1);
	CHECK(sdec);
	rd = (struct rd){(const unsigned char *)e.p, e.len, find(&e, "message")};
	size_t sl = 0;
	CHECK(str(&rd, sdec, &sl));
	check_string_roundtrip(msg, ml, sdec, sl);
	glsb_jbuf_free(&e);

	struct glsb_jbuf w = {0};
	CHECK(glsb_ws_json_write_result(&w, (unsigned long long)size << 20, (const char *)msg, ml, flags & 1) == 0);
	rd = (struct rd){(const unsigned char *)w.p, w.len, 0};
	CHECK(object(&rd) == 4);
	rd = (struct rd){(const unsigned char *)w.p, w.len, find(&w, "path")};
	CHECK(str(&rd, sdec, &sl));
	check_string_roundtrip(msg, ml, sdec, sl);
	free(sdec);
	glsb_jbuf_free(&w);
	glsb_jbuf_free(&w); /* safe twice */
	return 0;
}
