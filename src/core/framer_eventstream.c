/* framer_eventstream.c: AWS event stream messages (application/vnd.amazon.eventstream), CRC-checked. */
#include <stdint.h>
#include <string.h>

#include "codec.h"
#include "framer_eventstream.h"

/* total_length (4) + headers_length (4) + prelude_crc (4); the message ends with message_crc (4). */
#define PRELUDE 12
#define MIN_MESSAGE 16

static uint32_t be32(const unsigned char *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

int glsb_es_next_header(const char *block, size_t len, size_t *pos, glsb_es_header *h)
{
	const unsigned char *b = (const unsigned char *)block;
	size_t i = *pos;
	if (i == len)
		return 0;
	size_t name_len = b[i++];
	if (name_len == 0 || len - i < name_len + 1)
		return -1;
	memset(h, 0, sizeof *h);
	h->name = block + i;
	h->name_len = name_len;
	i += name_len;
	h->type = b[i++];
	static const size_t int_size[] = {0, 0, 1, 2, 4, 8, 0, 0, 8};
	switch (h->type) {
	case 0:
	case 1:
		break;
	case 2:
	case 3:
	case 4:
	case 5:
	case 8: {
		size_t n = int_size[h->type];
		if (len - i < n)
			return -1;
		uint64_t v = 0;
		for (size_t k = 0; k < n; k++)
			v = (v << 8) | b[i + k];
		/* sign-extend from n bytes (two's complement, big-endian) */
		if (n < 8 && (v >> (8 * n - 1)) & 1)
			v |= ~(uint64_t)0 << (8 * n);
		h->integer = (long long)v;
		i += n;
		break;
	}
	case 6:
	case 7: {
		if (len - i < 2)
			return -1;
		size_t n = ((size_t)b[i] << 8) | b[i + 1];
		i += 2;
		if (n > 32767 || len - i < n)
			return -1;
		h->bytes = block + i;
		h->len = n;
		i += n;
		break;
	}
	case 9:
		if (len - i < 16)
			return -1;
		h->bytes = block + i;
		h->len = 16;
		i += 16;
		break;
	default:
		return -1; /* unknown value type */
	}
	*pos = i;
	return 1;
}

static int eventstream_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	while (n) {
		const unsigned char *p = (const unsigned char *)f->pending.p;
		size_t want = PRELUDE;
		if (f->pending.len >= PRELUDE)
			want = be32(p);
		size_t take = want - f->pending.len;
		if (take > n)
			take = n;
		if (glsb_buf_append(&f->pending, s, take))
			return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
		s += take;
		n -= take;
		p = (const unsigned char *)f->pending.p;
		if (f->pending.len == PRELUDE && want == PRELUDE) {
			/* The prelude is checked before trusting its lengths (the order the AWS SDKs use). */
			if (glsb_crc32(0, p, 8) != be32(p + 8))
				return glsb_framer_fail(f, GLSB_PRELUDE_CRC);
			uint32_t total = be32(p), headers = be32(p + 4);
			if (total < MIN_MESSAGE || headers > total - MIN_MESSAGE)
				return glsb_framer_fail(f, GLSB_BAD_LENGTH);
			if (total > f->max_frame)
				return glsb_framer_fail(f, GLSB_FRAME_TOO_LARGE);
			continue;
		}
		if (f->pending.len < PRELUDE || f->pending.len < be32(p))
			continue;
		size_t total = be32(p), hlen = be32(p + 4);
		if (glsb_crc32(0, p, total - 4) != be32(p + total - 4))
			return glsb_framer_fail(f, GLSB_MESSAGE_CRC);
		const char *headers = f->pending.p + PRELUDE;
		size_t pos = 0;
		glsb_es_header h;
		int rc;
		while ((rc = glsb_es_next_header(headers, hlen, &pos, &h)) == 1)
			;
		if (rc < 0)
			return glsb_framer_fail(f, GLSB_BAD_HEADERS);
		glsb_frame *fr = glsb_frame_push(q, headers + hlen, total - PRELUDE - hlen - 4);
		if (!fr)
			return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
		if (!(fr->aux = glsb_strndup(headers, hlen)))
			return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
		fr->aux_len = hlen;
		f->pending.len = 0;
	}
	return 0;
}

static int eventstream_finish(glsb_framer *f, glsb_frame_queue *q)
{
	(void)q;
	return f->pending.len ? glsb_framer_fail(f, GLSB_TRUNCATED_MESSAGE) : 0;
}

/* {payload =, headers = {name = value}, header_types = {name = wire type}}: booleans, integers (int8..int64,
 * timestamp in ms), strings (string, bytes, and the 16 raw bytes of a uuid). */
static void eventstream_push(lua_State *L, const glsb_frame *fr)
{
	glsb_es_header h;
	size_t pos = 0;

	lua_createtable(L, 0, 3);
	lua_pushlstring(L, fr->data, fr->data_len);
	lua_setfield(L, -2, "payload");
	lua_newtable(L); /* headers */
	lua_newtable(L); /* header_types */
	while (glsb_es_next_header(fr->aux, fr->aux_len, &pos, &h) == 1) {
		lua_pushlstring(L, h.name, h.name_len);
		switch (h.type) {
		case 0:
		case 1: lua_pushboolean(L, h.type == 0); break;
		case 6:
		case 7:
		case 9: lua_pushlstring(L, h.bytes, h.len); break;
		default: lua_pushinteger(L, (lua_Integer)h.integer); break;
		}
		lua_rawset(L, -4);
		lua_pushlstring(L, h.name, h.name_len);
		lua_pushinteger(L, h.type);
		lua_rawset(L, -3);
	}
	lua_setfield(L, -3, "header_types");
	lua_setfield(L, -2, "headers");
}

const struct glsb_framer_type glsb_framer_eventstream = {
	"eventstream", sizeof(glsb_framer), eventstream_feed, eventstream_finish, eventstream_push, NULL, 0,
};
