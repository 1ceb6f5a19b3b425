/* frame.h: what every body framer is built from: the framer base, its function table, frames and buffers. */
#ifndef GLSB_FRAME_H
#define GLSB_FRAME_H

#include <stddef.h>

#include <lua.h>

#include "codes.h"

/* One decoded frame: data, plus bytes and a number whose meaning belongs to the framer that made it
 * (sse: aux = event NUL id, number = retry ms or -1; connect: number = flags; eventstream: aux = the
 * validated header block). Only that framer's push reads them. */
typedef struct glsb_frame {
	struct glsb_frame *next;
	char *data;
	size_t data_len;
	char *aux;
	size_t aux_len;
	long number;
} glsb_frame;

/* What a queued frame costs besides its bytes, counted in glsb_frame_queue.bytes with them: its struct
 * and malloc's headers here, then its table and string once pushed to Lua. Counting only payload bytes,
 * a stream of one-byte frames queued 8 MiB of payload as 60 MiB of memory. */
#define GLSB_FRAME_COST 160

typedef struct {
	glsb_frame *head, *tail;
	size_t count;
	size_t bytes; /* memory the queued frames cost (payload + GLSB_FRAME_COST each), for back-pressure */
} glsb_frame_queue;

/* A growable byte buffer, always NUL-terminated past len. */
typedef struct {
	char *p;
	size_t len, cap;
} glsb_buf;

int glsb_buf_append(glsb_buf *b, const char *s, size_t n); /* 0, or -1 when out of memory */
/* The same for a buffer that will never hold more than max bytes: its capacity stops at max + 1. */
int glsb_buf_append_max(glsb_buf *b, const char *s, size_t n, size_t max);
/* Makes room for cap bytes (NUL included) at once; 0, or -1 when out of memory. */
int glsb_buf_reserve(glsb_buf *b, size_t cap);
void glsb_buf_free(glsb_buf *b);
char *glsb_strndup(const char *s, size_t n);

/* Appends a frame holding a copy of data (number -1, no aux); NULL when out of memory. */
glsb_frame *glsb_frame_push(glsb_frame_queue *q, const char *data, size_t n);
/* Appends a frame that takes the buffer's bytes without copying them (b is left empty); NULL when out
 * of memory (b untouched). */
glsb_frame *glsb_frame_push_buf(glsb_frame_queue *q, glsb_buf *b);
void glsb_frame_free(glsb_frame *fr);
void glsb_queue_clear(glsb_frame_queue *q);

typedef struct glsb_framer glsb_framer;

/*
 * A framer type: one file (framer_<name>.c) defines one of these and adds a line to framer_list.h.
 * Its state is a struct of `size` bytes that starts with glsb_framer (calloc'ed, so zero is the
 * initial state); everything past the base is private to that file.
 */
struct glsb_framer_type {
	const char *name;
	size_t size;
	/* Feed n bytes; complete frames go to q. Returns 0, or -1 after glsb_framer_fail. */
	int (*feed)(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q);
	/* End of body: flush or reject what is pending. Returns 0, or -1 after glsb_framer_fail. */
	int (*finish)(glsb_framer *f, glsb_frame_queue *q);
	/* Pushes one frame this framer made as its Lua value. */
	void (*push)(lua_State *L, const glsb_frame *fr);
	/* Frees the private buffers (not f itself); NULL when there are none. */
	void (*free)(glsb_framer *f);
	/* Nonzero when feed/finish honour GLSB_OVERSIZED_CUT (glsb_framer_set_oversized refuses it otherwise). */
	int can_cut;
};

/* What a framer does with a frame longer than max_frame. FAIL (the default): FRAME_TOO_LARGE, the
 * stream is over. CUT: the frame comes out as its first max_frame bytes and its whole length; the rest
 * is counted as it passes, never buffered, and the stream goes on. */
enum glsb_oversized { GLSB_OVERSIZED_FAIL, GLSB_OVERSIZED_CUT };

struct glsb_framer {
	const struct glsb_framer_type *type;
	size_t max_frame;    /* largest frame (line, event, envelope) accepted */
	glsb_buf pending;    /* bytes of an incomplete frame */
	enum glsb_code error; /* set once failed: GLSB_FRAME_TOO_LARGE, ... */
	enum glsb_oversized oversized;
};

/* Marks the framer failed with a stable code; returns -1 (what feed/finish return). */
int glsb_framer_fail(glsb_framer *f, enum glsb_code code);

/* Pushes a frame's data as a Lua string (the whole value of raw and lines frames). */
void glsb_frame_push_data(lua_State *L, const glsb_frame *fr);

#endif
