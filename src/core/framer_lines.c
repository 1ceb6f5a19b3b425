/* framer_lines.c: one frame per '\n'-terminated line (NDJSON), a trailing '\r' dropped.
 *
 * A line over max_frame fails the stream (FRAME_TOO_LARGE), or with GLSB_OVERSIZED_CUT comes out cut:
 * its first max_frame bytes (kept in pending) and its length, counted while the rest streams past
 * unbuffered; pushed as {head = ..., length = n}. So the framer never holds more than max_frame bytes
 * of a line, however long, and the lines after it still come out. */
#include <limits.h>
#include <string.h>

#include "frame.h"

typedef struct {
	glsb_framer base;
	int cutting;   /* the line in progress is over max_frame: pending holds its head */
	size_t length; /* bytes of that line so far (a '\r' before its '\n' included, as the limit counts) */
} lines_state;

static int emit_line(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	if (n && s[n - 1] == '\r')
		n--;
	return glsb_frame_push(q, s, n) ? 0 : glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
}

/* The cut line ended (its '\n', or the end of the body): its head leaves pending for the frame. */
static int emit_cut(lines_state *st, glsb_frame_queue *q)
{
	glsb_frame *fr = glsb_frame_push_buf(q, &st->base.pending);
	if (!fr)
		return glsb_framer_fail(&st->base, GLSB_OUT_OF_MEMORY);
	fr->number = st->length > LONG_MAX ? LONG_MAX : (long)st->length;
	st->cutting = 0;
	st->length = 0;
	return 0;
}

/* take bytes of the current line (no '\n' among them) that would make it longer than max_frame. */
static int overflow(lines_state *st, const char *s, size_t take)
{
	glsb_framer *f = &st->base;
	if (f->oversized != GLSB_OVERSIZED_CUT)
		return glsb_framer_fail(f, GLSB_FRAME_TOO_LARGE);
	if (!st->cutting) {
		size_t room = f->max_frame - f->pending.len;
		if (glsb_buf_append(&f->pending, s, room))
			return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
		st->cutting = 1;
		st->length = f->pending.len - room;
	}
	st->length += take;
	return 0;
}

static int lines_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	lines_state *st = (lines_state *)f;
	while (n) {
		const char *nl = memchr(s, '\n', n);
		size_t take = nl ? (size_t)(nl - s) : n;
		if (st->cutting || f->pending.len + take > f->max_frame) {
			if (overflow(st, s, take))
				return -1;
			if (nl && emit_cut(st, q))
				return -1;
		} else if (!nl) {
			return glsb_buf_append(&f->pending, s, take) ? glsb_framer_fail(f, GLSB_OUT_OF_MEMORY) : 0;
		} else if (f->pending.len) {
			if (glsb_buf_append(&f->pending, s, take))
				return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
			if (emit_line(f, f->pending.p, f->pending.len, q))
				return -1;
			f->pending.len = 0;
		} else if (emit_line(f, s, take, q)) {
			return -1;
		}
		if (!nl)
			return 0;
		s += take + 1;
		n -= take + 1;
	}
	return 0;
}

static int lines_finish(glsb_framer *f, glsb_frame_queue *q)
{
	lines_state *st = (lines_state *)f;
	if (st->cutting)
		return emit_cut(st, q);
	if (!f->pending.len)
		return 0;
	int rc = emit_line(f, f->pending.p, f->pending.len, q);
	f->pending.len = 0;
	return rc;
}

/* A whole line is a string; a cut one (number = its length) is {head = its first max_frame bytes, length}. */
static void lines_push(lua_State *L, const glsb_frame *fr)
{
	if (fr->number < 0) {
		lua_pushlstring(L, fr->data, fr->data_len);
		return;
	}
	lua_createtable(L, 0, 2);
	lua_pushlstring(L, fr->data, fr->data_len);
	lua_setfield(L, -2, "head");
	lua_pushinteger(L, (lua_Integer)fr->number);
	lua_setfield(L, -2, "length");
}

const struct glsb_framer_type glsb_framer_lines = {
	"lines", sizeof(lines_state), lines_feed, lines_finish, lines_push, NULL, 1,
};
