/* framer_sse.c: Server-Sent Events (WHATWG "event stream interpretation"): one frame per dispatched event. */
#include <stdlib.h>
#include <string.h>

#include "frame.h"

/* The event being assembled, private to this file. */
typedef struct {
	glsb_framer base;
	glsb_buf data, event, id;
	long retry;      /* last "retry" field in ms; meaningful when has_retry */
	int has_retry, has_data, after_cr, bom_checked;
} sse;

static int dispatch(sse *f, glsb_frame_queue *q)
{
	/* The spec drops an event whose data buffer is empty, and resets the type. */
	if (!f->has_data) {
		f->event.len = 0;
		return 0;
	}
	size_t n = f->data.len;
	if (n && f->data.p[n - 1] == '\n')
		n--; /* the last data line's newline is not part of the data */
	glsb_frame *fr = glsb_frame_push(q, n ? f->data.p : "", n);
	if (!fr)
		return glsb_framer_fail(&f->base, GLSB_OUT_OF_MEMORY);
	/* aux = event NUL id. An event type ends at its first NUL (a Lua-visible name never held one);
	 * the last event id persists across events until a later "id" field changes it. */
	size_t elen = f->event.len ? strnlen(f->event.p, f->event.len) : 0;
	fr->aux_len = elen + 1 + f->id.len;
	if (!(fr->aux = malloc(fr->aux_len + 1)))
		return glsb_framer_fail(&f->base, GLSB_OUT_OF_MEMORY);
	if (elen)
		memcpy(fr->aux, f->event.p, elen);
	fr->aux[elen] = '\0';
	if (f->id.len)
		memcpy(fr->aux + elen + 1, f->id.p, f->id.len);
	fr->aux[fr->aux_len] = '\0';
	fr->number = f->has_retry ? f->retry : -1;
	f->data.len = 0;
	f->event.len = 0;
	f->has_data = 0;
	return 0;
}

static int field(sse *f, const char *line, size_t n, glsb_frame_queue *q)
{
	if (n == 0)
		return dispatch(f, q);
	if (line[0] == ':')
		return 0; /* comment, often a keep-alive */
	const char *colon = memchr(line, ':', n);
	size_t name_len = colon ? (size_t)(colon - line) : n;
	const char *value = colon ? colon + 1 : line + n;
	size_t value_len = colon ? n - name_len - 1 : 0;
	if (value_len && value[0] == ' ') {
		value++;
		value_len--;
	}
#define IS(lit) (name_len == sizeof(lit) - 1 && memcmp(line, lit, name_len) == 0)
	if (IS("data")) {
		if (f->data.len + value_len + 1 > f->base.max_frame)
			return glsb_framer_fail(&f->base, GLSB_FRAME_TOO_LARGE);
		if (glsb_buf_append(&f->data, value, value_len) || glsb_buf_append(&f->data, "\n", 1))
			return glsb_framer_fail(&f->base, GLSB_OUT_OF_MEMORY);
		f->has_data = 1;
	} else if (IS("event")) {
		f->event.len = 0;
		if (glsb_buf_append(&f->event, value, value_len))
			return glsb_framer_fail(&f->base, GLSB_OUT_OF_MEMORY);
	} else if (IS("id")) {
		if (!memchr(value, '\0', value_len)) {
			f->id.len = 0;
			if (glsb_buf_append(&f->id, value, value_len))
				return glsb_framer_fail(&f->base, GLSB_OUT_OF_MEMORY);
		}
	} else if (IS("retry")) {
		long ms = 0;
		size_t i;
		for (i = 0; i < value_len && value[i] >= '0' && value[i] <= '9' && ms < 100000000L; i++)
			ms = ms * 10 + (value[i] - '0');
		if (value_len && i == value_len) {
			f->retry = ms;
			f->has_retry = 1;
		}
	}
#undef IS
	return 0; /* unknown fields are ignored */
}

static int sse_feed(glsb_framer *base, const char *s, size_t n, glsb_frame_queue *q)
{
	sse *f = (sse *)base;
	glsb_buf *pending = &base->pending;

	if (!f->bom_checked) {
		/* Strip one UTF-8 BOM at the very start, even when it arrives split. */
		static const char bom[] = "\xEF\xBB\xBF";
		while (n && pending->len < 3 && (unsigned char)s[0] == (unsigned char)bom[pending->len]) {
			if (glsb_buf_append(pending, s, 1))
				return glsb_framer_fail(base, GLSB_OUT_OF_MEMORY);
			s++;
			n--;
		}
		if (pending->len == 3) {
			pending->len = 0;
			f->bom_checked = 1;
		} else if (n) {
			f->bom_checked = 1; /* a partial BOM then something else: keep those bytes as text */
		} else {
			return 0;
		}
	}
	while (n) {
		if (f->after_cr) {
			f->after_cr = 0;
			if (s[0] == '\n') { /* the LF of a CRLF split across chunks */
				s++;
				n--;
				continue;
			}
		}
		size_t i = 0;
		while (i < n && s[i] != '\n' && s[i] != '\r')
			i++;
		if (pending->len + i > base->max_frame)
			return glsb_framer_fail(base, GLSB_FRAME_TOO_LARGE);
		if (i == n)
			return glsb_buf_append(pending, s, n) ? glsb_framer_fail(base, GLSB_OUT_OF_MEMORY) : 0;
		int rc;
		if (pending->len) {
			if (glsb_buf_append(pending, s, i))
				return glsb_framer_fail(base, GLSB_OUT_OF_MEMORY);
			rc = field(f, pending->p, pending->len, q);
			pending->len = 0;
		} else {
			rc = field(f, s, i, q);
		}
		if (rc)
			return -1;
		if (s[i] == '\r')
			f->after_cr = 1;
		s += i + 1;
		n -= i + 1;
	}
	return 0;
}

static int sse_finish(glsb_framer *base, glsb_frame_queue *q)
{
	sse *f = (sse *)base;

	(void)q;
	/* The spec discards an incomplete line and an undispatched event at end of stream. */
	base->pending.len = 0;
	f->data.len = 0;
	f->has_data = 0;
	return 0;
}

/* {data =, event = (default "message"), id = (when one was set), retry = (ms, when one was set)} */
static void sse_push(lua_State *L, const glsb_frame *fr)
{
	size_t elen = strlen(fr->aux);

	lua_createtable(L, 0, 4);
	lua_pushlstring(L, fr->data, fr->data_len);
	lua_setfield(L, -2, "data");
	if (elen)
		lua_pushlstring(L, fr->aux, elen);
	else
		lua_pushliteral(L, "message");
	lua_setfield(L, -2, "event");
	if (fr->aux_len > elen + 1) {
		lua_pushlstring(L, fr->aux + elen + 1, fr->aux_len - elen - 1);
		lua_setfield(L, -2, "id");
	}
	if (fr->number >= 0) {
		lua_pushinteger(L, fr->number);
		lua_setfield(L, -2, "retry");
	}
}

static void sse_free(glsb_framer *base)
{
	sse *f = (sse *)base;

	glsb_buf_free(&f->data);
	glsb_buf_free(&f->event);
	glsb_buf_free(&f->id);
}

const struct glsb_framer_type glsb_framer_sse = {"sse", sizeof(sse), sse_feed, sse_finish, sse_push, sse_free, 0};
