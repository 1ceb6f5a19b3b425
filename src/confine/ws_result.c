/* ws_result.c: the one-line JSON results of `write`, `run` and `read` (REPORT.md), written with
 * json.c (fuzzed by fuzz_ws_json). */
#include <string.h>

#include "ws_result.h"

static void json_int(struct glsb_jbuf *b, int v)
{
	if (v < 0) {
		glsb_jbuf_put(b, "-", 1);
		glsb_json_u64(b, (unsigned long long)-(long long)v);
	} else
		glsb_json_u64(b, (unsigned long long)v);
}

static void json_bool(struct glsb_jbuf *b, int v)
{
	glsb_jbuf_puts(b, v ? "true" : "false");
}

static void stream(struct glsb_jbuf *b, const char *name, const struct glsb_ws_stream *s)
{
	glsb_jbuf_puts(b, ",\"");
	glsb_jbuf_puts(b, name);
	glsb_jbuf_puts(b, "\":");
	glsb_json_b64(b, s->data, s->len);
	glsb_jbuf_puts(b, ",\"");
	glsb_jbuf_puts(b, name);
	glsb_jbuf_puts(b, "_byte_count\":");
	glsb_json_u64(b, s->byte_count);
	glsb_jbuf_puts(b, ",\"");
	glsb_jbuf_puts(b, name);
	glsb_jbuf_puts(b, "_byte_count_complete\":");
	json_bool(b, s->complete);
	glsb_jbuf_puts(b, ",\"");
	glsb_jbuf_puts(b, name);
	glsb_jbuf_puts(b, "_truncated\":");
	json_bool(b, s->truncated);
}

int glsb_ws_json_run_result(struct glsb_jbuf *b, const struct glsb_ws_run_result *r)
{
	glsb_jbuf_puts(b, "{\"ok\":true,\"exit_code\":");
	if (r->exited)
		json_int(b, r->exit_code);
	else
		glsb_jbuf_puts(b, "null");
	glsb_jbuf_puts(b, ",\"signal\":");
	if (r->signaled)
		json_int(b, r->signal);
	else
		glsb_jbuf_puts(b, "null");
	glsb_jbuf_puts(b, ",\"timed_out\":");
	json_bool(b, r->timed_out);
	stream(b, "stdout", &r->out);
	stream(b, "stderr", &r->err);
	glsb_jbuf_puts(b, "}");
	return b->failed ? -1 : 0;
}

int glsb_ws_json_write_result(struct glsb_jbuf *b, unsigned long long bytes,
			      const char *path, size_t pathlen, int replaced)
{
	glsb_jbuf_puts(b, "{\"ok\":true,\"bytes\":");
	glsb_json_u64(b, bytes);
	glsb_jbuf_puts(b, ",\"path\":");
	glsb_json_str(b, path, pathlen);
	glsb_jbuf_puts(b, ",\"replaced\":");
	json_bool(b, replaced);
	glsb_jbuf_puts(b, "}");
	return b->failed ? -1 : 0;
}

int glsb_ws_json_error(struct glsb_jbuf *b, const char *code, const char *message, size_t msglen)
{
	glsb_jbuf_puts(b, "{\"ok\":false,\"error\":");
	glsb_json_str(b, code, strlen(code));
	glsb_jbuf_puts(b, ",\"message\":");
	glsb_json_str(b, message, msglen);
	glsb_jbuf_puts(b, "}");
	return b->failed ? -1 : 0;
}
