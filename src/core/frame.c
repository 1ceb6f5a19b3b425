/* frame.c: the framers' shared parts: growable buffers, the frame queue, the failure mark. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

int glsb_buf_reserve(glsb_buf *b, size_t cap)
{
	if (cap <= b->cap)
		return 0;
	char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int glsb_buf_append_max(glsb_buf *b, const char *s, size_t n, size_t max)
{
	if (n == 0)
		return 0;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		if (max < SIZE_MAX && cap > max + 1 && b->len + n + 1 <= max + 1)
			cap = max + 1; /* doubling past what the buffer may ever hold would only waste it */
		if (glsb_buf_reserve(b, cap))
			return -1;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int glsb_buf_append(glsb_buf *b, const char *s, size_t n)
{
	return glsb_buf_append_max(b, s, n, SIZE_MAX);
}

void glsb_buf_free(glsb_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

char *glsb_strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	if (n)
		memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static void enqueue(glsb_frame_queue *q, glsb_frame *fr, size_t n)
{
	fr->data_len = n;
	fr->number = -1;
	if (q->tail)
		q->tail->next = fr;
	else
		q->head = fr;
	q->tail = fr;
	q->count++;
	q->bytes += n + GLSB_FRAME_COST;
}

glsb_frame *glsb_frame_push(glsb_frame_queue *q, const char *data, size_t n)
{
	glsb_frame *fr = calloc(1, sizeof *fr);
	if (!fr)
		return NULL;
	fr->data = glsb_strndup(data, n);
	if (!fr->data) {
		free(fr);
		return NULL;
	}
	enqueue(q, fr, n);
	return fr;
}

glsb_frame *glsb_frame_push_buf(glsb_frame_queue *q, glsb_buf *b)
{
	if (!b->p)
		return glsb_frame_push(q, "", 0);
	glsb_frame *fr = calloc(1, sizeof *fr);
	if (!fr)
		return NULL;
	fr->data = b->p;
	enqueue(q, fr, b->len);
	b->p = NULL;
	b->len = b->cap = 0;
	return fr;
}

void glsb_frame_free(glsb_frame *fr)
{
	free(fr->data);
	free(fr->aux);
	free(fr);
}

void glsb_queue_clear(glsb_frame_queue *q)
{
	glsb_frame *fr = q->head;
	while (fr) {
		glsb_frame *next = fr->next;
		glsb_frame_free(fr);
		fr = next;
	}
	q->head = q->tail = NULL;
	q->count = q->bytes = 0;
}

int glsb_framer_fail(glsb_framer *f, enum glsb_code code)
{
	f->error = code;
	return -1;
}

void glsb_frame_push_data(lua_State *L, const glsb_frame *fr)
{
	lua_pushlstring(L, fr->data, fr->data_len);
}
