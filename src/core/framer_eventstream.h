/* framer_eventstream.h: walking the header block of an AWS event-stream message (framer_eventstream.c). */
#ifndef GLSB_FRAMER_EVENTSTREAM_H
#define GLSB_FRAMER_EVENTSTREAM_H

#include "frame.h"

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

#endif
