/* http.c: libcurl requests on the shared multi handle, framed or buffered bodies, and which phase failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codes.h"
#include "core.h"
#include "framer.h"
#include "multi.h"

GLSB_PART_DEFINE();

#define REQUEST_MT "glsb.HttpRequest"
#define HIGH_WATER (8u << 20) /* queued frame bytes before the transfer is paused */
#define UPLOAD_BUFFER_SMALL (16L << 10)

typedef struct {
	struct glsb_source src; /* token, and transfer_done: how the loop reports the end */
	CURL *easy;
	struct curl_slist *req_headers;
	struct curl_slist *connect_to; /* CURLOPT_CONNECT_TO entries */
	char *body;
	size_t body_len, read_pos;
	int idempotent, refused_resend, head_only;
	int in_multi, done, paused, headers_done;
	CURLcode rc;
	long status;
	glsb_buf resp_headers; /* "name\0value\0" pairs of the final response, names lower-cased */
	glsb_framer *framer;   /* NULL: buffered mode */
	glsb_buf resp_body;
	size_t max_body;
	/* error_body: a framed request's answer with status >= 400 is buffered (at most this many bytes),
	 * not framed: an API's JSON error is not an event stream. 0: framed like any body. */
	size_t error_body;
	int buffering_error, error_body_cut;
	glsb_frame_queue frames;
	enum glsb_code own_error; /* FRAME_TOO_LARGE, BODY_TOO_LARGE, OUT_OF_MEMORY, ... */
	/* What went out on the wire, from the debug callback: the basis of retry_safe. */
	size_t header_out, data_out;
	char errbuf[CURL_ERROR_SIZE];
} request;

static request *check_request(lua_State *L)
{
	return luaL_checkudata(L, 1, REQUEST_MT);
}

static void detach(request *r)
{
	if (r->easy) {
		if (r->in_multi)
			glsb_multi_remove(r->easy);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
	}
	r->in_multi = 0;
}

static void release(request *r)
{
	detach(r);
	curl_slist_free_all(r->req_headers);
	r->req_headers = NULL;
	curl_slist_free_all(r->connect_to);
	r->connect_to = NULL;
	free(r->body);
	r->body = NULL;
	glsb_buf_free(&r->resp_headers);
	glsb_buf_free(&r->resp_body);
	glsb_framer_free(r->framer);
	r->framer = NULL;
	glsb_queue_clear(&r->frames);
}

/* The loop's report that the transfer ended (already off the multi handle). */
static void transfer_done(struct glsb_source *src, int status)
{
	request *r = (request *)src; /* src is the first member */
	CURLcode rc = (CURLcode)status;

	if (r->error_body_cut && rc == CURLE_WRITE_ERROR)
		rc = CURLE_OK; /* we stopped reading an error body at its cap: the answer is complete enough */
	if (rc == CURLE_OK && r->framer && !r->buffering_error && glsb_framer_finish(r->framer, &r->frames) != 0) {
		rc = CURLE_WRITE_ERROR;
		r->own_error = r->framer->error; /* the framer's own code names the problem */
	}
	r->rc = rc;
	r->done = 1;
	r->in_multi = 0;
	glsb_loop_ready(r->src.token);
}

static int debug_cb(CURL *easy, curl_infotype type, char *data, size_t size, void *ud)
{
	(void)easy;
	(void)data;
	request *r = ud;
	if (type == CURLINFO_HEADER_OUT)
		r->header_out += size;
	else if (type == CURLINFO_DATA_OUT)
		r->data_out += size;
	return 0;
}

/* A buffered body whose length the server declared: one allocation of that size, or BODY_TOO_LARGE at
 * once when it is over max_body (nothing of it read). */
static int reserve_declared(request *r)
{
	curl_off_t cl = -1;
	if (r->head_only || r->status == 204 || r->status == 304)
		return 0; /* no body follows, whatever the length says */
	if (curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) != CURLE_OK || cl < 0)
		return 0;
	if ((curl_off_t)r->max_body < cl) {
		r->own_error = GLSB_BODY_TOO_LARGE;
		return -1;
	}
	if (glsb_buf_reserve(&r->resp_body, (size_t)cl + 1)) {
		r->own_error = GLSB_OUT_OF_MEMORY;
		return -1;
	}
	return 0;
}

static size_t header_cb(char *buf, size_t size, size_t nitems, void *ud)
{
	request *r = ud;
	size_t n = size * nitems;
	if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		/* A new status line (after 100 Continue or a redirect) starts a new header set. */
		r->resp_headers.len = 0;
		r->headers_done = 0;
		r->buffering_error = 0;
		return n;
	}
	if (n <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
		long status = 0;
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200) {
			r->status = status;
			r->headers_done = 1;
			r->buffering_error = r->framer && r->error_body > 0 && status >= 400;
			if (!r->framer && reserve_declared(r) != 0)
				return 0; /* refused before a byte of the body is read */
			glsb_loop_ready(r->src.token);
		}
		return n;
	}
	const char *colon = memchr(buf, ':', n);
	if (!colon)
		return n;
	size_t name_len = (size_t)(colon - buf);
	const char *v = colon + 1, *end = buf + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	size_t start = r->resp_headers.len;
	if (glsb_buf_append(&r->resp_headers, buf, name_len) || glsb_buf_append(&r->resp_headers, "", 1) ||
	    glsb_buf_append(&r->resp_headers, v, (size_t)(end - v)) || glsb_buf_append(&r->resp_headers, "", 1)) {
		r->own_error = GLSB_OUT_OF_MEMORY;
		return 0;
	}
	for (size_t i = start; i < start + name_len; i++)
		if (r->resp_headers.p[i] >= 'A' && r->resp_headers.p[i] <= 'Z')
			r->resp_headers.p[i] += 'a' - 'A';
	return n;
}

static size_t write_cb(char *buf, size_t size, size_t nitems, void *ud)
{
	request *r = ud;
	size_t n = size * nitems;
	if (r->buffering_error) {
		size_t room = r->error_body - r->resp_body.len;
		if (glsb_buf_append(&r->resp_body, buf, n < room ? n : room)) {
			r->own_error = GLSB_OUT_OF_MEMORY;
			return 0;
		}
		if (n < room)
			return n;
		r->error_body_cut = 1; /* the rest is not read: an endless error body costs error_body bytes */
		return 0;
	}
	if (!r->framer) {
		if (r->resp_body.len + n > r->max_body) {
			r->own_error = GLSB_BODY_TOO_LARGE;
			return 0;
		}
		if (glsb_buf_append_max(&r->resp_body, buf, n, r->max_body)) {
			r->own_error = GLSB_OUT_OF_MEMORY;
			return 0;
		}
		return n;
	}
	if (r->frames.bytes >= HIGH_WATER) {
		r->paused = 1; /* libcurl hands the same bytes again once frames() resumes us */
		return CURL_WRITEFUNC_PAUSE;
	}
	size_t before = r->frames.count;
	if (glsb_framer_feed(r->framer, buf, n, &r->frames) != 0) {
		r->own_error = r->framer->error;
		return 0;
	}
	if (r->frames.count != before)
		glsb_loop_ready(r->src.token);
	return n;
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *ud)
{
	request *r = ud;
	size_t n = size * nitems, left = r->body_len - r->read_pos;
	if (n > left)
		n = left;
	memcpy(buf, r->body + r->read_pos, n);
	r->read_pos += n;
	return n;
}

static int seek_cb(void *ud, curl_off_t offset, int origin)
{
	request *r = ud;
	if (r->header_out == 0 && offset == 0 && origin == SEEK_SET) {
		r->read_pos = 0; /* nothing went out yet: starting over is harmless */
		return CURL_SEEKFUNC_OK;
	}
	r->refused_resend = 1;
	return CURL_SEEKFUNC_FAIL;
}

static void set_timeout_ms(lua_State *L, CURL *easy, CURLoption opt, const char *field)
{
	lua_getfield(L, 1, field);
	if (!lua_isnil(L, -1)) {
		lua_Number s = luaL_checknumber(L, -1);
		if (s > 0)
			curl_easy_setopt(easy, opt, (long)(s * 1000 + 0.5));
	}
	lua_pop(L, 1);
}

static const char *opt_string(lua_State *L, const char *field)
{
	lua_getfield(L, 1, field);
	const char *s = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
	lua_pop(L, 1); /* the string stays alive: it is referenced from the options table */
	return s;
}

/* CR, LF or NUL in a header line would end it where the caller did not (a second header, a second request);
 * NUL in the URL would cut it short (libcurl reads a C string). Whatever put it there (an id or a token a
 * server sent), the request is refused here, the one place every request passes. */
static int has_line_break(const char *s, size_t n)
{
	return memchr(s, '\r', n) || memchr(s, '\n', n) || memchr(s, '\0', n);
}

static int refuse_header(lua_State *L, const char *what)
{
	return glsb_push_failure(L, lua_pushfstring(L, "http: %s holds CR, LF or NUL: refused, nothing sent", what),
				 glsb_code_name(GLSB_BAD_HEADER_VALUE));
}

/* http(opts) -> request, or nil, message, HTTP_SETUP_FAILED when libcurl cannot start it (BAD_HEADER_VALUE
 * when a header or the URL holds CR, LF or NUL); see src/core/README.md. Raises on misuse (and when memory
 * runs out, as Lua does). */
static int l_http(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	const char *url = opt_string(L, "url");
	luaL_argcheck(L, url != NULL, 1, "opts.url is required");
	lua_getfield(L, 1, "url");
	size_t url_len = 0;
	lua_tolstring(L, -1, &url_len);
	lua_pop(L, 1);
	if (has_line_break(url, url_len))
		return refuse_header(L, "the URL");
	const char *method = opt_string(L, "method");
	const char *framer = opt_string(L, "framer");

	request *r = lua_newuserdatauv(L, sizeof *r, 0);
	memset(r, 0, sizeof *r);
	luaL_setmetatable(L, REQUEST_MT);

	lua_getfield(L, 1, "max_frame");
	size_t max_frame = (size_t)luaL_optinteger(L, -1, 16 << 20);
	lua_getfield(L, 1, "max_body");
	r->max_body = (size_t)luaL_optinteger(L, -1, (lua_Integer)256 << 20);
	lua_getfield(L, 1, "error_body");
	lua_Integer error_body = luaL_optinteger(L, -1, 0);
	luaL_argcheck(L, error_body >= 0, 1, "opts.error_body must be >= 0");
	r->error_body = (size_t)error_body;
	lua_pop(L, 3);
	if (framer && !(r->framer = glsb_framer_new(framer, max_frame)))
		return luaL_argerror(L, 1, lua_pushfstring(L, "unknown framer '%s'", framer));
	const char *oversized = opt_string(L, "oversized");
	luaL_argcheck(L, !oversized || r->framer, 1, "opts.oversized needs a framer");
	if (r->framer)
		glsb_framer_check_oversized(L, 1, r->framer, oversized);

	if (!(r->easy = curl_easy_init()))
		return glsb_push_failure(L, "http: libcurl cannot create a handle", glsb_code_name(GLSB_HTTP_SETUP_FAILED));
	CURL *e = r->easy;
	r->src.token = glsb_loop_token();
	r->src.done = transfer_done;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, debug_cb);
	curl_easy_setopt(e, CURLOPT_DEBUGDATA, r);
	curl_easy_setopt(e, CURLOPT_VERBOSE, 1L); /* only so that debug_cb sees what is sent */
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");

	/* libcurl sends a request again on its own when a reused connection dies before any response
	 * byte. Harmless for idempotent methods; for a POST it could run code or create a sandbox twice. */
	lua_getfield(L, 1, "idempotent");
	r->idempotent = lua_isnil(L, -1) ? !(method && (!strcmp(method, "POST") || !strcmp(method, "PATCH")))
					  : lua_toboolean(L, -1);
	lua_pop(L, 1);
	lua_getfield(L, 1, "body");
	if (!lua_isnil(L, -1) || !r->idempotent) {
		size_t len = 0;
		const char *b = lua_isnil(L, -1) ? "" : luaL_checklstring(L, -1, &len);
		if (!(r->body = glsb_strndup(b, len)))
			return luaL_error(L, "out of memory");
		r->body_len = len;
	}
	lua_pop(L, 1);
	if (!r->idempotent) {
		/* The body goes through a read callback whose rewind is refused once anything was sent, so a
		 * silent re-send becomes a failure reported with what was sent (outcome unknown). */
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
		/* A read callback gets an upload buffer per transfer, 64 KiB by default: with a thousand
		 * calls in flight that was 64 MB of heap for bodies of a few hundred bytes. libcurl's
		 * smallest (16 KiB) unless the body is bigger. */
		if (r->body_len <= UPLOAD_BUFFER_SMALL)
			curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, (long)UPLOAD_BUFFER_SMALL);
		/* That failure is the keep-alive race: reuse only connections idle for less than common server
		 * keep-alive timeouts (Node's is 5 s), so it stays rare. */
		lua_getfield(L, 1, "max_reuse_age");
		curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, (long)luaL_optinteger(L, -1, 4));
		lua_pop(L, 1);
		/* libcurl rewinds (and so asks us) only when body bytes went out; a request without a body
		 * would be re-sent unasked. Only a reused connection is retried, so take a fresh one. */
		if (r->body_len == 0)
			curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	} else if (r->body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	}
	if (method) {
		if (!strcmp(method, "HEAD")) {
			curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
			r->head_only = 1;
		}
		else if (strcmp(method, "GET") != 0 || r->body)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	}

	/* No "Expect: 100-continue" round trip: it only delays the body on loopback and in APIs. */
	r->req_headers = curl_slist_append(NULL, "Expect:");
	lua_getfield(L, 1, "headers");
	if (!lua_isnil(L, -1)) {
		luaL_checktype(L, -1, LUA_TTABLE);
		lua_Integer n = luaL_len(L, -1);
		for (lua_Integer i = 1; i <= n; i++) {
			lua_rawgeti(L, -1, i);
			size_t h_len = 0;
			const char *h = lua_tolstring(L, -1, &h_len);
			if (!h)
				return luaL_argerror(L, 1, "opts.headers must be an array of 'Name: value' strings");
			if (has_line_break(h, h_len)) {
				const char *colon = memchr(h, ':', h_len);
				lua_pushlstring(L, h, colon ? (size_t)(colon - h) : 0);
				return refuse_header(L, lua_pushfstring(L, "header '%s'", lua_tostring(L, -1)));
			}
			struct curl_slist *next = curl_slist_append(r->req_headers, h);
			if (!next)
				return luaL_error(L, "out of memory");
			r->req_headers = next;
			lua_pop(L, 1);
		}
	}
	lua_pop(L, 1);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->req_headers);

	lua_getfield(L, 1, "connect_to");
	if (!lua_isnil(L, -1)) {
		/* "HOST:PORT:TO_HOST:TO_PORT" (empty HOST/PORT match any): reach a named host elsewhere, keeping
		 * its name for TLS and the Host header (split-horizon deployments, tests). */
		luaL_checktype(L, -1, LUA_TTABLE);
		lua_Integer n = luaL_len(L, -1);
		for (lua_Integer i = 1; i <= n; i++) {
			lua_rawgeti(L, -1, i);
			const char *c = lua_tostring(L, -1);
			if (!c)
				return luaL_argerror(L, 1, "opts.connect_to must be an array of strings");
			struct curl_slist *next = curl_slist_append(r->connect_to, c);
			if (!next)
				return luaL_error(L, "out of memory");
			r->connect_to = next;
			lua_pop(L, 1);
		}
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, r->connect_to);
	}
	lua_pop(L, 1);
	set_timeout_ms(L, e, CURLOPT_CONNECTTIMEOUT_MS, "connect_timeout");
	set_timeout_ms(L, e, CURLOPT_TIMEOUT_MS, "timeout");
	lua_getfield(L, 1, "idle_timeout");
	if (!lua_isnil(L, -1)) {
		/* No byte in either direction for this long: give up (libcurl's low-speed check). */
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)luaL_checknumber(L, -1));
	}
	lua_pop(L, 1);
	const char *s;
	if ((s = opt_string(L, "unix_socket")))
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, s);
	/* Not offered: libcurl 7.88's CURLOPT_AWS_SIGV4 hashes "" for a body sent through the read
	 * callback and signs an Expect header it never sends (docs/protocols/bedrock.md §4.3). Requests are
	 * signed in Lua (glsb.aws.sigv4) and handed over as plain headers. */
	lua_getfield(L, 1, "aws_sigv4");
	luaL_argcheck(L, lua_isnil(L, -1), 1, "opts.aws_sigv4 is not offered (libcurl 7.88 signs streamed bodies wrong): sign with glsb.aws.sigv4 and pass its headers");
	lua_pop(L, 1);
	if ((s = opt_string(L, "cainfo")))
		curl_easy_setopt(e, CURLOPT_CAINFO, s); /* a private CA (self-hosted providers, tests) */
	if ((s = opt_string(L, "userpwd")))
		curl_easy_setopt(e, CURLOPT_USERPWD, s);
	if ((s = opt_string(L, "http_version"))) {
		if (!strcmp(s, "1.1"))
			curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
		else if (!strcmp(s, "2"))
			curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
		else
			return luaL_argerror(L, 1, "opts.http_version must be '1.1' or '2'");
	}

	/* Where HTTP/2 may be spoken (TLS with ALPN), a request waits for a connection being
	 * set up to the same host rather than opening its own, so concurrent calls share one connection. */
	if (!strncmp(url, "https:", 6))
		curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	if (glsb_multi_add(e, &r->src) != 0)
		return glsb_push_failure(L, "http: libcurl cannot start the transfer", glsb_code_name(GLSB_HTTP_SETUP_FAILED));
	r->in_multi = 1;
	return 1;
}

static void push_headers(lua_State *L, request *r)
{
	lua_newtable(L);
	const char *p = r->resp_headers.p, *end = p + r->resp_headers.len;
	while (p && p < end) {
		const char *name = p;
		const char *value = name + strlen(name) + 1;
		p = value + strlen(value) + 1;
		if (lua_getfield(L, -1, name) == LUA_TSTRING) {
			/* Repeated headers are joined, as RFC 9110 allows for list-valued fields. */
			lua_pushliteral(L, ", ");
			lua_pushstring(L, value);
			lua_concat(L, 3);
		} else {
			lua_pop(L, 1);
			lua_pushstring(L, value);
		}
		lua_setfield(L, -2, name);
	}
}

static int l_status(lua_State *L)
{
	request *r = check_request(L);
	lua_pushinteger(L, r->headers_done ? r->status : 0);
	push_headers(L, r);
	return 2;
}

static int l_frames(lua_State *L)
{
	request *r = check_request(L);
	if (!r->framer) {
		lua_newtable(L);
		return 1;
	}
	glsb_framer_push_frames(L, r->framer, &r->frames);
	if (r->paused && r->easy) {
		r->paused = 0;
		curl_easy_pause(r->easy, CURLPAUSE_CONT);
	}
	return 1;
}

/* progress() -> sent, to_send, received, to_receive: the body's bytes that went out and came in so far,
 * as libcurl counts them, and the totals (to_send: the request body's size; to_receive: the answer's
 * Content-Length, -1 until known or when it has none). For a person's progress line, polled. */
static int l_progress(lua_State *L)
{
	request *r = check_request(L);
	curl_off_t up = 0, down = 0, length = -1;
	if (r->easy) {
		curl_easy_getinfo(r->easy, CURLINFO_SIZE_UPLOAD_T, &up);
		curl_easy_getinfo(r->easy, CURLINFO_SIZE_DOWNLOAD_T, &down);
		curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
	}
	lua_pushinteger(L, (lua_Integer)up);
	lua_pushinteger(L, (lua_Integer)r->body_len);
	lua_pushinteger(L, (lua_Integer)down);
	lua_pushinteger(L, (lua_Integer)length);
	return 4;
}

static int l_done(lua_State *L)
{
	lua_pushboolean(L, check_request(L)->done);
	return 1;
}

/* Turns a failed transfer into {phase, code, message, retry_safe}. */
static void push_failure(lua_State *L, request *r)
{
	const char *phase, *code = NULL;
	int retry_safe;
	curl_off_t connect_us = 0;
	curl_easy_getinfo(r->easy, CURLINFO_CONNECT_TIME_T, &connect_us);
	int sent_all = r->header_out > 0 && r->data_out >= r->body_len;
	if (r->own_error) {
		phase = "framing";
		code = glsb_code_name(r->own_error);
		retry_safe = 0;
	} else {
		if (r->header_out == 0 && (connect_us == 0 || r->rc == CURLE_COULDNT_CONNECT ||
					   r->rc == CURLE_COULDNT_RESOLVE_HOST)) {
			phase = "connect";
			retry_safe = 1;
		} else if (!sent_all) {
			phase = "send";
			retry_safe = 1;
		} else {
			phase = "receive";
			retry_safe = 0;
		}
	}
	lua_createtable(L, 0, 5);
	lua_pushstring(L, phase);
	lua_setfield(L, -2, "phase");
	if (!code) {
		code = glsb_curl_code(r->rc);
		/* the low-speed check (idle_timeout) and the total timeout share one libcurl code */
		if (r->rc == CURLE_OPERATION_TIMEDOUT && !strncmp(r->errbuf, "Operation too slow", 18))
			code = glsb_code_name(GLSB_IDLE_TIMEOUT);
		else if (r->rc == CURLE_SEND_FAIL_REWIND && r->refused_resend)
			code = glsb_code_name(GLSB_NOT_RESENT);
	}
	lua_pushstring(L, code);
	lua_setfield(L, -2, "code");
	if (r->own_error)
		lua_pushstring(L, code);
	else if (r->refused_resend)
		lua_pushliteral(L, "the connection broke after the request was sent; not sent again (not idempotent)");
	else
		lua_pushstring(L, r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->rc));
	lua_setfield(L, -2, "message");
	lua_pushboolean(L, retry_safe);
	lua_setfield(L, -2, "retry_safe");
	lua_pushboolean(L, r->rc == CURLE_OPERATION_TIMEDOUT);
	lua_setfield(L, -2, "timeout");
}

static int l_result(lua_State *L)
{
	request *r = check_request(L);
	if (!r->done)
		return luaL_error(L, "request is still running");
	lua_createtable(L, 0, 4);
	lua_pushinteger(L, r->headers_done ? r->status : 0);
	lua_setfield(L, -2, "status");
	push_headers(L, r);
	lua_setfield(L, -2, "headers");
	if (!r->framer || r->buffering_error) {
		/* The body moves to Lua: the C buffer goes at once, so that the answer is held once while it is
		 * decoded (a second result() has no body). */
		lua_pushlstring(L, r->resp_body.p ? r->resp_body.p : "", r->resp_body.len);
		lua_setfield(L, -2, "body");
		glsb_buf_free(&r->resp_body);
	}
	if (r->error_body_cut) {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "body_truncated");
	}
	if (r->rc != CURLE_OK && r->easy) {
		push_failure(L, r);
		lua_setfield(L, -2, "error");
	}
	long version = 0;
	if (r->easy && curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK && version) {
		/* what delimits a body: HTTP/1.0 may end one by closing the connection, which a cut also does */
		lua_pushstring(L, version == CURL_HTTP_VERSION_1_0 ? "1.0" : version == CURL_HTTP_VERSION_1_1 ? "1.1"
				  : version == CURL_HTTP_VERSION_2_0 ? "2" : "3");
		lua_setfield(L, -2, "http_version");
	}
	curl_off_t us = 0;
	if (r->easy && curl_easy_getinfo(r->easy, CURLINFO_TOTAL_TIME_T, &us) == CURLE_OK) {
		lua_pushnumber(L, (lua_Number)us / 1e6);
		lua_setfield(L, -2, "time_total");
	}
	return 1;
}

static int l_close(lua_State *L)
{
	release(check_request(L));
	return 0;
}

static int l_token(lua_State *L)
{
	request *r = check_request(L);
	const char *k = luaL_checkstring(L, 2);
	if (!strcmp(k, "token")) {
		lua_pushinteger(L, (lua_Integer)r->src.token);
		return 1;
	}
	return glsb_method(L, REQUEST_MT, k);
}

void glsb_open_http(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"status", l_status}, {"frames", l_frames}, {"done", l_done}, {"progress", l_progress},
		{"result", l_result}, {"close", l_close}, {NULL, NULL},
	};
	glsb_new_class(L, REQUEST_MT, methods, l_token, l_close);
	lua_pushcfunction(L, l_http);
	lua_setfield(L, -2, "http");
}
