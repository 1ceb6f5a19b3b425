/* framer.h: incremental response-body framers (raw, lines, sse, connect) and their frame queue. */
#ifndef GLSB_FRAMER_H
#define GLSB_FRAMER_H

#include <stddef.h>

/* One decoded frame. Which fields are set depends on the framer:
 *   raw, lines : data
 *   sse        : data, event (may be NULL), id (may be NULL), number = retry ms or -1
 *   connect    : data, number = envelope flags
 *   eventstream: data = payload, extra = the validated header block (decoded by glsb_es_headers) */
typedef struct glsb_frame {
	struct glsb_frame *next;
	char *data;
	size_t data_len;
	char *event;
	char *id;
	long number;
	char *extra;
	size_t extra_len;
} glsb_frame;

typedef struct {
	glsb_frame *head, *tail;
	size_t count;
	size_t bytes; /* payload bytes queued, for back-pressure */
} glsb_frame_queue;

/* A growable byte buffer. */
typedef struct {
	char *p;
	size_t len, cap;
} glsb_buf;

int glsb_buf_append(glsb_buf *b, const char *s, size_t n); /* 0, or -1 when out of memory */
void glsb_buf_free(glsb_buf *b);

typedef struct glsb_framer glsb_framer;

struct glsb_framer_type {
	const char *name;
	/* Feed n bytes; complete frames go to q. Returns 0, or -1 with f->error set. */
	int (*feed)(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q);
	/* End of body: flush or reject what is pending. Returns 0, or -1 with f->error set. */
	int (*finish)(glsb_framer *f, glsb_frame_queue *q);
};

struct glsb_framer {
	const struct glsb_framer_type *type;
	size_t max_frame;  /* largest frame (line, event, envelope) accepted */
	glsb_buf pending;  /* bytes of an incomplete frame */
	const char *error; /* stable error code once failed: FRAME_TOO_LARGE, TRUNCATED, ... */
	/* sse state */
	glsb_buf sse_data, sse_event, sse_id;
	long sse_retry;
	int sse_has_data, after_cr, bom_checked;
};

extern const struct glsb_framer_type glsb_framer_raw, glsb_framer_lines, glsb_framer_sse,
	glsb_framer_connect, glsb_framer_eventstream;

/* One header of an AWS event-stream message, as glsb_es_next_header walks a validated block. */
typedef struct {
	const char *name;
	size_t name_len;
	int type;          /* 0 true, 1 false, 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes, 7 string, 8 timestamp, 9 uuid */
	long long integer; /* types 2-5 and 8 */
	const char *bytes; /* types 6, 7, 9 */
	size_t len;
} glsb_es_header;

/* Walks a header block: returns 1 with *h filled and *pos advanced, 0 at the end, -1 on a malformed
 * header (the framer only queues blocks that walk cleanly). */
int glsb_es_next_header(const char *block, size_t len, size_t *pos, glsb_es_header *h);

/* NULL when the name is unknown or memory is short. */
glsb_framer *glsb_framer_new(const char *name, size_t max_frame);
int glsb_framer_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q);
int glsb_framer_finish(glsb_framer *f, glsb_frame_queue *q);
void glsb_framer_free(glsb_framer *f);

/* Queue helpers. glsb_frame_push copies data; returns the frame or NULL when out of memory. */
glsb_frame *glsb_frame_push(glsb_frame_queue *q, const char *data, size_t n);
void glsb_frame_free(glsb_frame *fr);
void glsb_queue_clear(glsb_frame_queue *q);
char *glsb_strndup(const char *s, size_t n);
/* Marks the framer failed with a stable code; returns -1 (what feed/finish return). */
int glsb_framer_fail(glsb_framer *f, const char *code);

#endif
