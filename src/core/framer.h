/* framer.h: the framers as their users see them: make one by name, feed it, push its frames, free it. */
#ifndef GLSB_FRAMER_H
#define GLSB_FRAMER_H

#include "frame.h"

/* NULL when the name is unknown or memory is short. */
glsb_framer *glsb_framer_new(const char *name, size_t max_frame);
int glsb_framer_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q);
int glsb_framer_finish(glsb_framer *f, glsb_frame_queue *q);
/* Pushes an array of the queued frames (their Lua values) and empties the queue. */
void glsb_framer_push_frames(lua_State *L, const glsb_framer *f, glsb_frame_queue *q);
/* The code the framer failed with ("FRAME_TOO_LARGE"), or NULL while it has not failed. */
const char *glsb_framer_error(const glsb_framer *f);
void glsb_framer_free(glsb_framer *f);

#endif
