/* framer_lines.c: one frame per '\n'-terminated line (NDJSON), a trailing '\r' dropped. */
#include <string.h>

#include "frame.h"

static int emit_line(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	if (n && s[n - 1] == '\r')
		n--;
	return glsb_frame_push(q, s, n) ? 0 : glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
}

static int lines_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	while (n) {
		const char *nl = memchr(s, '\n', n);
		size_t take = nl ? (size_t)(nl - s) : n;
		if (f->pending.len + take > f->max_frame)
			return glsb_framer_fail(f, GLSB_FRAME_TOO_LARGE);
		if (!nl)
			return glsb_buf_append(&f->pending, s, take) ? glsb_framer_fail(f, GLSB_OUT_OF_MEMORY) : 0;
		if (f->pending.len) {
			if (glsb_buf_append(&f->pending, s, take))
				return glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
			if (emit_line(f, f->pending.p, f->pending.len, q))
				return -1;
			f->pending.len = 0;
		} else if (emit_line(f, s, take, q)) {
			return -1;
		}
		s += take + 1;
		n -= take + 1;
	}
	return 0;
}

static int lines_finish(glsb_framer *f, glsb_frame_queue *q)
{
	if (!f->pending.len)
		return 0;
	int rc = emit_line(f, f->pending.p, f->pending.len, q);
	f->pending.len = 0;
	return rc;
}

const struct glsb_framer_type glsb_framer_lines = {
	"lines", sizeof(glsb_framer), lines_feed, lines_finish, glsb_frame_push_data, NULL,
};
