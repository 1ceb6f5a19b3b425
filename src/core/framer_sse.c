/* framer_sse.c: Server-Sent Events (WHATWG "event stream interpretation"): one frame per dispatched event. */
#include <stdlib.h>
#include <string.h>

#include "framer.h"

static int dispatch(glsb_framer *f, glsb_frame_queue *q)
{
	/* The spec drops an event whose data buffer is empty, and resets the type. */
	if (!f->sse_has_data) {
		f->sse_event.len = 0;
		return 0;
	}
	size_t n = f->sse_data.len;
	if (n && f->sse_data.p[n - 1] == '\n')
		n--; /* the last data line's newline is not part of the data */
	glsb_frame *fr = glsb_frame_push(q, n ? f->sse_data.p : "", n);
	if (!fr)
		return glsb_framer_fail(f, "OUT_OF_MEMORY");
	if (f->sse_event.len && !(fr->event = glsb_strndup(f->sse_event.p, f->sse_event.len)))
		return glsb_framer_fail(f, "OUT_OF_MEMORY");
	/* The last event id persists across events until a later "id" field changes it. */
	if (f->sse_id.len && !(fr->id = glsb_strndup(f->sse_id.p, f->sse_id.len)))
		return glsb_framer_fail(f, "OUT_OF_MEMORY");
	fr->number = f->sse_retry;
	f->sse_data.len = 0;
	f->sse_event.len = 0;
	f->sse_has_data = 0;
	return 0;
}

static int field(glsb_framer *f, const char *line, size_t n, glsb_frame_queue *q)
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
		if (f->sse_data.len + value_len + 1 > f->max_frame)
			return glsb_framer_fail(f, "FRAME_TOO_LARGE");
		if (glsb_buf_append(&f->sse_data, value, value_len) || glsb_buf_append(&f->sse_data, "\n", 1))
			return glsb_framer_fail(f, "OUT_OF_MEMORY");
		f->sse_has_data = 1;
	} else if (IS("event")) {
		f->sse_event.len = 0;
		if (glsb_buf_append(&f->sse_event, value, value_len))
			return glsb_framer_fail(f, "OUT_OF_MEMORY");
	} else if (IS("id")) {
		if (!memchr(value, '\0', value_len)) {
			f->sse_id.len = 0;
			if (glsb_buf_append(&f->sse_id, value, value_len))
				return glsb_framer_fail(f, "OUT_OF_MEMORY");
		}
	} else if (IS("retry")) {
		long ms = 0;
		size_t i;
		for (i = 0; i < value_len && value[i] >= '0' && value[i] <= '9' && ms < 100000000L; i++)
			ms = ms * 10 + (value[i] - '0');
		if (value_len && i == value_len)
			f->sse_retry = ms;
	}
#undef IS
	return 0; /* unknown fields are ignored */
}

static int sse_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	if (!f->bom_checked) {
		/* Strip one UTF-8 BOM at the very start, even when it arrives split. */
		static const char bom[] = "\xEF\xBB\xBF";
		while (n && f->pending.len < 3 && (unsigned char)s[0] == (unsigned char)bom[f->pending.len]) {
			if (glsb_buf_append(&f->pending, s, 1))
				return glsb_framer_fail(f, "OUT_OF_MEMORY");
			s++;
			n--;
		}
		if (f->pending.len == 3) {
			f->pending.len = 0;
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
		if (f->pending.len + i > f->max_frame)
			return glsb_framer_fail(f, "FRAME_TOO_LARGE");
		if (i == n)
			return glsb_buf_append(&f->pending, s, n) ? glsb_framer_fail(f, "OUT_OF_MEMORY") : 0;
		int rc;
		if (f->pending.len) {
			if (glsb_buf_append(&f->pending, s, i))
				return glsb_framer_fail(f, "OUT_OF_MEMORY");
			rc = field(f, f->pending.p, f->pending.len, q);
			f->pending.len = 0;
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

static int sse_finish(glsb_framer *f, glsb_frame_queue *q)
{
	(void)q;
	/* The spec discards an incomplete line and an undispatched event at end of stream. */
	f->pending.len = 0;
	f->sse_data.len = 0;
	f->sse_has_data = 0;
	return 0;
}

const struct glsb_framer_type glsb_framer_sse = {"sse", sse_feed, sse_finish};
