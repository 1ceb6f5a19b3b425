/* framer.h: the framers as their users see them: make one by name, feed it, push its frames, free it. */
#ifndef GLSB_FRAMER_H
#define GLSB_FRAMER_H

#include "frame.h"

/* NULL when the name is unknown or memory is short. */
glsb_framer *glsb_framer_new(const char *name, size_t max_frame);
/* Sets what the framer does with a frame over max_frame (before the first feed). 0, or -1 when this
 * framer cannot cut (only "lines" can: a cut frame is pushed as {head = first max_frame bytes,
 * length = the whole line's bytes}). */
int glsb_framer_set_oversized(glsb_framer *f, enum glsb_oversized policy);
int glsb_framer_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q);
int glsb_framer_finish(glsb_framer *f, glsb_frame_queue *q);
/* Pushes an array of the queued frames (their Lua values) and empties the queue. */
void glsb_framer_push_frames(lua_State *L, const glsb_framer *f, glsb_frame_queue *q);
/* The code the framer failed with ("FRAME_TOO_LARGE"), or NULL while it has not failed. */
const char *glsb_framer_error(const glsb_framer *f);
void glsb_framer_free(glsb_framer *f);
/* Applies a Lua "oversized" option ("fail", "cut"; NULL: leave the default) to f; raises (argument
 * arg) on an unknown value or a framer that cannot cut. */
void glsb_framer_check_oversized(lua_State *L, int arg, glsb_framer *f, const char *policy);

#endif
