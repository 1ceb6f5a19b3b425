/* framer_raw.c: every chunk as it arrives, nothing held back. */
#include "frame.h"

static int raw_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	return glsb_frame_push(q, s, n) ? 0 : glsb_framer_fail(f, GLSB_OUT_OF_MEMORY);
}

static int raw_finish(glsb_framer *f, glsb_frame_queue *q)
{
	(void)f;
	(void)q;
	return 0;
}

const struct glsb_framer_type glsb_framer_raw = {
	"raw", sizeof(glsb_framer), raw_feed, raw_finish, glsb_frame_push_data, NULL, 0,
};
