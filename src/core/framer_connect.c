/* framer_connect.c: Connect protocol streaming envelopes: 1 flag byte, 4-byte big-endian length, payload. */
#include <stdint.h>
#include <string.h>

#include "frame.h"

#define PREFIX 5

static size_t envelope_len(const unsigned char *p)
{
	return ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | (size_t)p[4];
}

static int connect_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	while (n) {
		/* Complete the 5-byte prefix first; then we know how much payload to wait for. */
		if (f->pending.len < PREFIX) {
			size_t take = PREFIX - f->pending.len;
			if (take > n)
				take = n;
			if (glsb_buf_append(&f->pending, s, take))
				return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
			s += take;
			n -= take;
			if (f->pending.len < PREFIX)
				return 0;
			if (envelope_len((unsigned char *)f->pending.p) > f->max_frame)
				return glsb_framer_fail(f, GLSB_FRAME_TOO_LARGE);
		}
		size_t want = envelope_len((unsigned char *)f->pending.p);
		size_t have = f->pending.len - PREFIX;
		size_t take = want - have;
		if (take > n)
			take = n;
		if (glsb_buf_append(&f->pending, s, take))
			return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
		s += take;
		n -= take;
		if (f->pending.len - PREFIX < want)
			return 0;
		glsb_frame *fr = glsb_frame_push(q, f->pending.p + PREFIX, want);
		if (!fr)
			return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
		fr->number = (unsigned char)f->pending.p[0];
		f->pending.len = 0;
	}
	return 0;
}

static int connect_finish(glsb_framer *f, glsb_frame_queue *q)
{
	(void)q;
	return f->pending.len ? glsb_framer_fail(f, GLSB_TRUNCATED_ENVELOPE) : 0;
}

/* {data =, flags = the envelope's flag byte (0x02: end of stream)} */
static void connect_push(lua_State *L, const glsb_frame *fr)
{
	lua_createtable(L, 0, 2);
	lua_pushlstring(L, fr->data, fr->data_len);
	lua_setfield(L, -2, "data");
	lua_pushinteger(L, fr->number);
	lua_setfield(L, -2, "flags");
}

const struct glsb_framer_type glsb_framer_connect = {
	"connect", sizeof(glsb_framer), connect_feed, connect_finish, connect_push, NULL, 0,
};
