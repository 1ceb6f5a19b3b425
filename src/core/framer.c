/* framer.c: the framer registry, the shared buffer and queue, and the two simplest framers (raw, lines). */
#include <stdlib.h>
#include <string.h>

#include "framer.h"

int glsb_buf_append(glsb_buf *b, const char *s, size_t n)
{
	if (n == 0)
		return 0;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
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
	fr->data_len = n;
	fr->number = -1;
	if (q->tail)
		q->tail->next = fr;
	else
		q->head = fr;
	q->tail = fr;
	q->count++;
	q->bytes += n;
	return fr;
}

void glsb_frame_free(glsb_frame *fr)
{
	free(fr->data);
	free(fr->event);
	free(fr->id);
	free(fr->extra);
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

int glsb_framer_fail(glsb_framer *f, const char *code)
{
	f->error = code;
	return -1;
}

/* raw: every chunk as it arrives, nothing held back. */
static int raw_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	return glsb_frame_push(q, s, n) ? 0 : glsb_framer_fail(f, "OUT_OF_MEMORY");
}

static int nothing_pending(glsb_framer *f, glsb_frame_queue *q)
{
	(void)f;
	(void)q;
	return 0;
}

const struct glsb_framer_type glsb_framer_raw = {"raw", raw_feed, nothing_pending};

/* lines: one frame per '\n'-terminated line (NDJSON), a trailing '\r' dropped. */
static int emit_line(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	if (n && s[n - 1] == '\r')
		n--;
	return glsb_frame_push(q, s, n) ? 0 : glsb_framer_fail(f, "OUT_OF_MEMORY");
}

static int lines_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	while (n) {
		const char *nl = memchr(s, '\n', n);
		size_t take = nl ? (size_t)(nl - s) : n;
		if (f->pending.len + take > f->max_frame)
			return glsb_framer_fail(f, "FRAME_TOO_LARGE");
		if (!nl)
			return glsb_buf_append(&f->pending, s, take) ? glsb_framer_fail(f, "OUT_OF_MEMORY") : 0;
		if (f->pending.len) {
			if (glsb_buf_append(&f->pending, s, take))
				return glsb_framer_fail(f, "OUT_OF_MEMORY");
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

const struct glsb_framer_type glsb_framer_lines = {"lines", lines_feed, lines_finish};

static const struct glsb_framer_type *const types[] = {
	&glsb_framer_raw, &glsb_framer_lines, &glsb_framer_sse, &glsb_framer_connect, &glsb_framer_eventstream,
};

glsb_framer *glsb_framer_new(const char *name, size_t max_frame)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		if (strcmp(types[i]->name, name) != 0)
			continue;
		glsb_framer *f = calloc(1, sizeof *f);
		if (!f)
			return NULL;
		f->type = types[i];
		f->max_frame = max_frame;
		f->sse_retry = -1;
		return f;
	}
	return NULL;
}

int glsb_framer_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	if (f->error)
		return -1;
	return f->type->feed(f, s, n, q);
}

int glsb_framer_finish(glsb_framer *f, glsb_frame_queue *q)
{
	if (f->error)
		return -1;
	return f->type->finish(f, q);
}

void glsb_framer_free(glsb_framer *f)
{
	if (!f)
		return;
	glsb_buf_free(&f->pending);
	glsb_buf_free(&f->sse_data);
	glsb_buf_free(&f->sse_event);
	glsb_buf_free(&f->sse_id);
	free(f);
}
