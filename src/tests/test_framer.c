/* test_framer.c: the body framers give the same frames however the input is split, and reject garbage. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "check.h"
#include "framer.h"

static lua_State *L;

/* Expected frame: data, event (NULL = none), id (NULL = none), number. */
typedef struct {
	const char *data;
	size_t len; /* 0: strlen(data) */
	const char *event;
	const char *id;
	long number;
} expect;

/* Field k of the table on top as a string (NULL when absent). */
static const char *field(const char *k, size_t *n)
{
	const char *v;
	lua_getfield(L, -1, k);
	v = lua_tolstring(L, -1, n);
	lua_pop(L, 1); /* still referenced from the table */
	return v;
}

/* Serialises the queued frames, as the framer pushes them to Lua (which empties the queue), into one
 * comparable string: "data|event|id|number\n" per frame. A frame is a string (raw, lines) or a table
 * (sse: event other than the default "message", id, retry; connect: flags as the number; a cut line:
 * event "cut", its length as the number). */
static char *render(glsb_framer *f, glsb_frame_queue *q)
{
	glsb_buf b = {0};
	char num[32];
	glsb_framer_push_frames(L, f, q);
	lua_Integer n = luaL_len(L, -1);
	for (lua_Integer i = 1; i <= n; i++) {
		size_t len = 0;
		long number = -1;
		const char *v;
		lua_rawgeti(L, -1, i);
		if (lua_type(L, -1) == LUA_TSTRING) {
			v = lua_tolstring(L, -1, &len);
			glsb_buf_append(&b, v, len);
			glsb_buf_append(&b, "||", 2);
		} else if ((v = field("head", &len))) {
			/* a cut line (lines with GLSB_OVERSIZED_CUT): head|cut||length */
			glsb_buf_append(&b, v, len);
			glsb_buf_append(&b, "|cut|", 5);
			lua_getfield(L, -1, "length");
			number = lua_isinteger(L, -1) ? (long)lua_tointeger(L, -1) : -2;
			lua_pop(L, 1);
		} else {
			v = field("data", &len);
			glsb_buf_append(&b, v, len);
			glsb_buf_append(&b, "|", 1);
			v = field("event", &len);
			if (v && strcmp(v, "message") != 0)
				glsb_buf_append(&b, v, len);
			glsb_buf_append(&b, "|", 1);
			if ((v = field("id", &len)))
				glsb_buf_append(&b, v, len);
			lua_getfield(L, -1, "retry");
			lua_getfield(L, -2, "flags");
			number = lua_isinteger(L, -2) ? (long)lua_tointeger(L, -2)
			       : lua_isinteger(L, -1) ? (long)lua_tointeger(L, -1) : -1;
			lua_pop(L, 2);
		}
		lua_pop(L, 1);
		snprintf(num, sizeof num, "|%ld\n", number);
		glsb_buf_append(&b, num, strlen(num));
	}
	lua_pop(L, 1);
	glsb_buf_append(&b, "", 0);
	return b.p ? b.p : calloc(1, 1);
}

static char *render_expect(const expect *e, size_t n)
{
	glsb_buf b = {0};
	char num[32];
	for (size_t i = 0; i < n; i++) {
		glsb_buf_append(&b, e[i].data, e[i].len ? e[i].len : strlen(e[i].data));
		glsb_buf_append(&b, "|", 1);
		if (e[i].event)
			glsb_buf_append(&b, e[i].event, strlen(e[i].event));
		glsb_buf_append(&b, "|", 1);
		if (e[i].id)
			glsb_buf_append(&b, e[i].id, strlen(e[i].id));
		snprintf(num, sizeof num, "|%ld\n", e[i].number);
		glsb_buf_append(&b, num, strlen(num));
	}
	return b.p ? b.p : calloc(1, 1);
}

/* Feeds input in chunks cut at `cuts` (ascending offsets) to a framer with that oversized policy;
 * returns 0 or -1 and the rendered frames. Checks after every feed that the framer holds no more
 * than max_frame bytes of a line. */
static int run_split_policy(const char *type, enum glsb_oversized policy, const char *in, size_t len,
			    const size_t *cuts, size_t ncuts, size_t max_frame, char **out, const char **err)
{
	glsb_framer *f = glsb_framer_new(type, max_frame);
	if (glsb_framer_set_oversized(f, policy) != 0)
		check_failures++, fprintf(stderr, "%s cannot take policy %d\n", type, (int)policy);
	glsb_frame_queue q = {0};
	size_t pos = 0;
	int rc = 0;
	for (size_t i = 0; i <= ncuts && rc == 0; i++) {
		size_t end = i < ncuts ? cuts[i] : len;
		rc = glsb_framer_feed(f, in + pos, end - pos, &q);
		if (f->pending.len > max_frame)
			check_failures++, fprintf(stderr, "%s holds %zu bytes > max_frame %zu\n", type,
						  f->pending.len, max_frame);
		pos = end;
	}
	if (rc == 0)
		rc = glsb_framer_finish(f, &q);
	*err = glsb_framer_error(f);
	*out = render(f, &q);
	glsb_queue_clear(&q);
	glsb_framer_free(f);
	return rc;
}

static int run_split(const char *type, const char *in, size_t len, const size_t *cuts, size_t ncuts,
		     size_t max_frame, char **out, const char **err)
{
	return run_split_policy(type, GLSB_OVERSIZED_FAIL, in, len, cuts, ncuts, max_frame, out, err);
}

/* Every two-way split, every three-way split of short inputs, and byte at a time must agree. */
static void check_all_splits_policy(const char *type, enum glsb_oversized policy, size_t max_frame,
				    const char *in, size_t len, const expect *e, size_t n)
{
	char *want = render_expect(e, n), *got;
	const char *err;
	size_t cuts[2];
	int mismatches = 0;
	for (size_t a = 0; a <= len; a++) {
		cuts[0] = a;
		if (run_split_policy(type, policy, in, len, cuts, 1, max_frame, &got, &err) != 0 ||
		    strcmp(got, want) != 0) {
			if (!mismatches++)
				fprintf(stderr, "%s split at %zu:\nwant:\n%sgot:\n%s", type, a, want, got);
		}
		free(got);
		for (size_t b = a; len <= 64 && b <= len; b++) {
			cuts[0] = a;
			cuts[1] = b;
			if (run_split_policy(type, policy, in, len, cuts, 2, max_frame, &got, &err) != 0 ||
			    strcmp(got, want) != 0)
				mismatches++;
			free(got);
		}
	}
	size_t *bytes = malloc((len + 1) * sizeof *bytes);
	for (size_t i = 0; i < len; i++)
		bytes[i] = i;
	if (run_split_policy(type, policy, in, len, bytes, len, max_frame, &got, &err) != 0 || strcmp(got, want) != 0)
		mismatches++;
	free(got);
	free(bytes);
	free(want);
	CHECK(mismatches == 0);
}

static void check_all_splits(const char *type, const char *in, size_t len, const expect *e, size_t n)
{
	check_all_splits_policy(type, GLSB_OVERSIZED_FAIL, 1 << 20, in, len, e, n);
}

static void test_lines(void)
{
	const char in[] = "{\"a\":1}\n{\"b\":2}\r\n\nlast";
	expect e[] = {{"{\"a\":1}", 0, 0, 0, -1}, {"{\"b\":2}", 0, 0, 0, -1}, {"", 0, 0, 0, -1}, {"last", 0, 0, 0, -1}};
	check_all_splits("lines", in, sizeof in - 1, e, 4);
}

static void test_lines_binary(void)
{
	const char in[] = "a\0b\n\xff\xfe\n";
	expect e[] = {{"a\0b", 3, 0, 0, -1}, {"\xff\xfe", 0, 0, 0, -1}};
	check_all_splits("lines", in, sizeof in - 1, e, 2);
}

static void test_lines_too_large(void)
{
	char *got;
	const char *err;
	const char in[] = "short\nthis line is too long\n";
	size_t cut = 3;
	CHECK(run_split("lines", in, sizeof in - 1, &cut, 1, 10, &got, &err) == -1);
	CHECK(err && strcmp(err, "FRAME_TOO_LARGE") == 0);
	CHECK_STR(got, "short|||-1\n"); /* frames before the bad one are kept */
	free(got);
	/* A line of exactly max_frame bytes is fine. */
	CHECK(run_split("lines", "0123456789\n", 11, &cut, 1, 10, &got, &err) == 0);
	free(got);
	/* An unterminated oversized tail fails too, even fed one byte at a time. */
	size_t cuts[20];
	for (size_t i = 0; i < 20; i++)
		cuts[i] = i;
	CHECK(run_split("lines", "abcdefghijklmnopqrstu", 21, cuts, 20, 10, &got, &err) == -1);
	free(got);
}

/* GLSB_OVERSIZED_CUT: a line over max_frame comes out as its first max_frame bytes and its length, and
 * the lines after it still come out; the same frames at every split point (and byte at a time), and
 * the framer never holds more than max_frame bytes (run_split_policy checks after every feed). */
static void test_lines_cut(void)
{
	const char in[] = "short\n"
			  "0123456789ABCDEF\n"     /* 16 bytes: cut */
			  "ok\n"
			  "0123456789\n"           /* exactly max_frame: whole */
			  "0123456789A\r\n"       /* 12 with its '\r': cut */
			  "\n"
			  "0123456789abcdefXYZ";   /* unterminated, cut at the end of the body */
	expect e[] = {
		{"short", 0, 0, 0, -1},
		{"0123456789", 0, "cut", 0, 16},
		{"ok", 0, 0, 0, -1},
		{"0123456789", 0, 0, 0, -1},
		{"0123456789", 0, "cut", 0, 12},
		{"", 0, 0, 0, -1},
		{"0123456789", 0, "cut", 0, 19},
	};
	check_all_splits_policy("lines", GLSB_OVERSIZED_CUT, 10, in, sizeof in - 1, e, 7);
	/* Two cut lines back to back, and a line that reaches the limit only with its pending part. */
	const char two[] = "abcdefghijkl\nmnopqrstuvwxyz\n0123456789\n";
	expect e2[] = {{"abcdefgh", 0, "cut", 0, 12}, {"mnopqrst", 0, "cut", 0, 14}, {"01234567", 0, "cut", 0, 10}};
	check_all_splits_policy("lines", GLSB_OVERSIZED_CUT, 8, two, sizeof two - 1, e2, 3);
	/* max_frame 0: every non-empty line is cut to nothing, an empty one is whole. */
	expect e0[] = {{"", 0, "cut", 0, 3}, {"", 0, 0, 0, -1}, {"", 0, "cut", 0, 1}};
	check_all_splits_policy("lines", GLSB_OVERSIZED_CUT, 0, "abc\n\nz", 6, e0, 3);
}

/* A line of 8 MiB fed in 4 KiB chunks through a 1 KiB limit: the framer's buffer stays at the limit. */
static void test_lines_cut_bounded(void)
{
	size_t big = 8u << 20, max_frame = 1024;
	char *chunk = malloc(4096);
	memset(chunk, 'x', 4096);
	glsb_framer *f = glsb_framer_new("lines", max_frame);
	CHECK(glsb_framer_set_oversized(f, GLSB_OVERSIZED_CUT) == 0);
	glsb_frame_queue q = {0};
	size_t most = 0;
	for (size_t fed = 0; fed < big; fed += 4096) {
		CHECK(glsb_framer_feed(f, chunk, 4096, &q) == 0);
		if (f->pending.cap > most)
			most = f->pending.cap;
	}
	CHECK(q.count == 0);
	CHECK(most <= 2 * max_frame); /* the buffer's allocation, not only its length */
	CHECK(glsb_framer_feed(f, "\nafter\n", 7, &q) == 0);
	CHECK(q.count == 2);
	CHECK(q.head->data_len == max_frame && q.head->number == (long)big);
	CHECK(f->pending.cap == 0); /* the head went to the frame without a copy */
	glsb_queue_clear(&q);
	glsb_framer_free(f);
	free(chunk);
}

/* Only lines can cut; the default stays FRAME_TOO_LARGE. */
static void test_cut_refused(void)
{
	const char *types[] = {"raw", "sse", "connect", "eventstream"};
	for (int i = 0; i < 4; i++) {
		glsb_framer *f = glsb_framer_new(types[i], 16);
		CHECK(glsb_framer_set_oversized(f, GLSB_OVERSIZED_CUT) == -1);
		CHECK(glsb_framer_set_oversized(f, GLSB_OVERSIZED_FAIL) == 0);
		glsb_framer_free(f);
	}
}

static void test_sse(void)
{
	const char in[] = "\xEF\xBB\xBF: comment\n"
			  "event: start\ndata: one\n\n"
			  "data:two\ndata: three\r\nid: 7\r\n\r\n"
			  "retry: 1500\rdata: cr only\r\r"
			  "data\n\n"
			  "event: ignored-no-data\n\n"
			  "id\nunknown: x\ndata: after id reset\n\n"
			  "data: incomplete at end";
	expect e[] = {
		{"one", 0, "start", NULL, -1},
		{"two\nthree", 0, NULL, "7", -1},
		{"cr only", 0, NULL, "7", 1500},
		{"", 0, NULL, "7", 1500},
		{"after id reset", 0, NULL, NULL, 1500},
	};
	check_all_splits("sse", in, sizeof in - 1, e, 5);
}

static void test_sse_too_large(void)
{
	char *got;
	const char *err;
	size_t cut = 5;
	const char in[] = "data: 0123456789abcdef\n\n";
	CHECK(run_split("sse", in, sizeof in - 1, &cut, 1, 8, &got, &err) == -1);
	CHECK(err && strcmp(err, "FRAME_TOO_LARGE") == 0);
	free(got);
	/* Many small data lines add up to one event: that is bounded too. */
	CHECK(run_split("sse", "data: abc\ndata: abc\ndata: abc\n\n", 31, &cut, 1, 10, &got, &err) == -1);
	free(got);
}

static void test_connect(void)
{
	/* Two messages then the end-stream envelope (flag 0x02). */
	const char in[] = "\x00\x00\x00\x00\x07{\"a\":1}"
			  "\x00\x00\x00\x00\x00"
			  "\x02\x00\x00\x00\x02{}";
	expect e[] = {{"{\"a\":1}", 0, 0, 0, 0}, {"", 0, 0, 0, 0}, {"{}", 0, 0, 0, 2}};
	check_all_splits("connect", in, sizeof in - 1, e, 3);
}

static void test_connect_garbage(void)
{
	char *got;
	const char *err;
	size_t cut = 2;
	/* A length far over max_frame is refused as soon as the prefix is complete. */
	CHECK(run_split("connect", "\x00\x7f\xff\xff\xff{", 6, &cut, 1, 1 << 20, &got, &err) == -1);
	CHECK(err && strcmp(err, "FRAME_TOO_LARGE") == 0);
	free(got);
	/* A stream that ends inside an envelope is truncated, not silently short. */
	CHECK(run_split("connect", "\x00\x00\x00\x00\x09{\"a\"", 9, &cut, 1, 1 << 20, &got, &err) == -1);
	CHECK(err && strcmp(err, "TRUNCATED_ENVELOPE") == 0);
	free(got);
	/* So is a stream ending inside the 5-byte prefix. */
	CHECK(run_split("connect", "\x00\x00", 2, &cut, 0, 1 << 20, &got, &err) == -1);
	free(got);
	/* Random bytes never crash; either frames or a clean error. */
	unsigned seed = 1;
	char buf[512];
	for (int round = 0; round < 2000; round++) {
		size_t len = (size_t)(round % 200);
		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (char)(seed >> 16);
		}
		const char *types[] = {"connect", "sse", "lines", "raw"};
		for (int t = 0; t < 4; t++) {
			size_t c = len / 3;
			int rc = run_split(types[t], buf, len, &c, 1, 64, &got, &err);
			CHECK(rc == 0 || err != NULL);
			free(got);
		}
	}
}

static void test_raw(void)
{
	glsb_framer *f = glsb_framer_new("raw", 16);
	glsb_frame_queue q = {0};
	CHECK(glsb_framer_feed(f, "abc", 3, &q) == 0);
	CHECK(glsb_framer_feed(f, "de", 2, &q) == 0);
	CHECK(q.count == 2 && q.bytes == 5 + 2 * GLSB_FRAME_COST);
	CHECK(glsb_framer_finish(f, &q) == 0);
	glsb_queue_clear(&q);
	glsb_framer_free(f);
	CHECK(glsb_framer_new("nope", 16) == NULL);
}

/* The sse push: event defaults to "message", id and retry only when the stream set them. */
static void test_sse_push(void)
{
	glsb_framer *f = glsb_framer_new("sse", 1 << 20);
	glsb_frame_queue q = {0};
	size_t n;
	static const char in[] = "data: a\n\nevent: e\nid: 1\nretry: 5\ndata: b\n\n";
	CHECK(glsb_framer_feed(f, in, sizeof in - 1, &q) == 0);
	glsb_framer_push_frames(L, f, &q);
	CHECK(q.count == 0 && q.head == NULL); /* moved out */
	CHECK(luaL_len(L, -1) == 2);
	lua_rawgeti(L, -1, 1);
	CHECK_STR(field("event", &n), "message");
	CHECK(field("id", &n) == NULL && field("retry", &n) == NULL);
	lua_pop(L, 1);
	lua_rawgeti(L, -1, 2);
	CHECK_STR(field("data", &n), "b");
	CHECK_STR(field("event", &n), "e");
	CHECK_STR(field("id", &n), "1");
	CHECK_STR(field("retry", &n), "5");
	lua_pop(L, 2);
	glsb_framer_free(f);
}

int main(void)
{
	L = luaL_newstate();
	RUN(test_sse_push);
	RUN(test_lines);
	RUN(test_lines_binary);
	RUN(test_lines_too_large);
	RUN(test_lines_cut);
	RUN(test_lines_cut_bounded);
	RUN(test_cut_refused);
	RUN(test_sse);
	RUN(test_sse_too_large);
	RUN(test_connect);
	RUN(test_connect_garbage);
	RUN(test_raw);
	lua_close(L);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return CHECK_EXIT();
}
