/* redis.c: a Redis connection as a loop source: non-blocking lookup, connect and TLS; RESP by hiredis. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "codes.h"
#include "core.h"
#include "loop.h"

/*
 * Why hiredis for the protocol only: Debian 12's libhiredis (0.14.1) has an async API but no TLS, so the
 * socket, the TLS session (OpenSSL, as libcurl uses) and the name lookup (a thread) are driven here,
 * all non-blocking, and hiredis formats commands (redisFormatCommandArgv) and parses replies (redisReader).
 * One code path for redis://, rediss:// and unix://.
 *
 * The connection is a loop source: whatever it waits for (the lookup's eventfd, the socket becoming
 * writable while connecting, the TLS handshake's next read or write, replies, the rest of a partial write)
 * is registered with the loop, and its callback makes the progress itself and reports conn.token ready.
 * The Lua side (lua/glsb/pool/redis_conn.lua) only waits on that token: conn:state() and conn:replies()
 * say what happened. Failures come back as nil, message, code (codes from core.codes: errno names,
 * COULDNT_RESOLVE_HOST, PEER_FAILED_VERIFICATION, SSL_CONNECT_ERROR, WEIRD_SERVER_REPLY, ...).
 */

GLSB_PART_DEFINE();

#define REDIS_MT "glsb.RedisConn"
#define READ_CHUNK 16384

enum state { RESOLVING, CONNECTING, HANDSHAKE, READY, FAILED, CLOSED };
static const char *const state_names[] = {"resolving", "connecting", "handshake", "ready", "failed", "closed"};

/* A name lookup on a thread of its own (getaddrinfo blocks; its threads retire at once, so nothing of
 * glibc's resolver outlives the lookup). The owner and the thread each hold a reference; whoever drops the
 * last one frees it: the owner may close the connection while the lookup still runs. */
struct lookup {
	struct addrinfo hints;
	struct addrinfo *result;
	int rc;
	atomic_int done;
	char host[256];
	char port[8];
	int efd;
	atomic_int refs;
};

static void lookup_release(struct lookup *lk)
{
	if (atomic_fetch_sub(&lk->refs, 1) != 1)
		return;
	if (lk->result)
		freeaddrinfo(lk->result);
	if (lk->efd >= 0)
		close(lk->efd);
	free(lk);
}

static void *lookup_thread(void *arg)
{
	struct lookup *lk = arg;
	lk->rc = getaddrinfo(lk->host, lk->port, &lk->hints, &lk->result);
	atomic_store(&lk->done, 1);
	uint64_t one = 1;
	ssize_t n = write(lk->efd, &one, sizeof one);
	(void)n;
	lookup_release(lk);
	return NULL;
}

typedef struct {
	struct glsb_source src; /* first: the loop's callback gets &src */
	int watched_fd;		/* what is registered with the loop now (-1: nothing) */
	short watched_events;
	enum state state;
	int fd;
	int tls;
	int verify;
	int ssl_want; /* POLLIN / POLLOUT the TLS layer waits for */
	char *servername;
	char *cafile;
	struct lookup *lookup;
	struct addrinfo *addrs, *next_addr;
	int last_errno;
	SSL_CTX *ctx;
	SSL *ssl;
	redisReader *reader;
	char *out;
	size_t outlen, outoff, outcap;
	char errmsg[300];
	const char *errcode;
} conn;

static conn *check_conn(lua_State *L)
{
	return luaL_checkudata(L, 1, REDIS_MT);
}

__attribute__((format(printf, 3, 4))) static void fail(conn *c, const char *code, const char *fmt, ...)
{
	if (c->state == FAILED)
		return;
	c->state = FAILED;
	c->errcode = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
	va_end(ap);
}

static void fail_errno(conn *c, const char *what, int err)
{
	char buf[200];
	snprintf(buf, sizeof buf, "%s: %s", what, strerror(err));
	fail(c, glsb_errno_code(err), "redis: %s", buf);
}

static void unwatch(conn *c)
{
	if (c->watched_fd >= 0)
		glsb_loop_remove_fd(&c->src);
	c->watched_fd = -1;
	c->watched_events = 0;
}

static const char *tls_error_text(void)
{
	unsigned long e = ERR_peek_last_error();
	static char buf[160];
	if (!e)
		return "TLS failure";
	ERR_error_string_n(e, buf, sizeof buf);
	ERR_clear_error();
	return buf;
}

static void release(conn *c)
{
	unwatch(c);
	if (c->lookup) {
		/* the thread still runs: it drops the last reference when it is done */
		lookup_release(c->lookup);
		c->lookup = NULL;
	}
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->ctx) {
		SSL_CTX_free(c->ctx);
		c->ctx = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (c->addrs) {
		freeaddrinfo(c->addrs);
		c->addrs = c->next_addr = NULL;
	}
	if (c->reader) {
		redisReaderFree(c->reader);
		c->reader = NULL;
	}
	free(c->out);
	c->out = NULL;
	c->outlen = c->outoff = c->outcap = 0;
	free(c->servername);
	c->servername = NULL;
	free(c->cafile);
	c->cafile = NULL;
}

/* ---- connecting ---- */

static int start_tls(conn *c)
{
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ctx)
		return fail(c, "SSL_CONNECT_ERROR", "redis: TLS setup: %s", tls_error_text()), -1;
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	if (c->verify) {
		SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
		int ok = c->cafile ? SSL_CTX_load_verify_locations(c->ctx, c->cafile, NULL)
				   : SSL_CTX_set_default_verify_paths(c->ctx);
		if (ok != 1)
			return fail(c, "SSL_CACERT_BADFILE", "redis: cannot load the CA certificates: %s",
				    tls_error_text()),
			       -1;
	}
	c->ssl = SSL_new(c->ctx);
	if (!c->ssl)
		return fail(c, "SSL_CONNECT_ERROR", "redis: TLS setup: %s", tls_error_text()), -1;
	SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (c->servername) {
		struct in6_addr a6;
		struct in_addr a4;
		int is_ip = inet_pton(AF_INET, c->servername, &a4) == 1 || inet_pton(AF_INET6, c->servername, &a6) == 1;
		if (!is_ip)
			SSL_set_tlsext_host_name(c->ssl, c->servername);
		if (c->verify) {
			X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
			if (is_ip)
				X509_VERIFY_PARAM_set1_ip_asc(param, c->servername);
			else
				SSL_set1_host(c->ssl, c->servername);
		}
	}
	SSL_set_fd(c->ssl, c->fd);
	c->state = HANDSHAKE;
	return 0;
}

static void connected(conn *c)
{
	if (c->addrs) {
		freeaddrinfo(c->addrs);
		c->addrs = c->next_addr = NULL;
	}
	if (c->tls) {
		start_tls(c);
		return;
	}
	c->state = READY;
}

/* Starts a non-blocking connect to the next address; leaves state CONNECTING, READY or FAILED. */
static void try_next_address(conn *c)
{
	while (c->next_addr) {
		struct addrinfo *ai = c->next_addr;
		c->next_addr = ai->ai_next;
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			c->last_errno = errno;
			continue;
		}
		if (ai->ai_family != AF_UNIX) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			c->fd = fd;
			connected(c);
			return;
		}
		if (errno == EINPROGRESS) { /* (AF_UNIX's EAGAIN is a full backlog, not a connect under way) */
			c->fd = fd;
			c->state = CONNECTING;
			return;
		}
		c->last_errno = errno;
		close(fd);
	}
	fail_errno(c, "connect", c->last_errno ? c->last_errno : ECONNREFUSED);
}

static void finish_connect(conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS)
		return;
	if (err == 0) {
		connected(c);
		return;
	}
	c->last_errno = err;
	close(c->fd);
	c->fd = -1;
	try_next_address(c);
}

static void finish_lookup(conn *c)
{
	struct lookup *lk = c->lookup;
	if (!atomic_load(&lk->done))
		return;
	if (lk->rc != 0) {
		char buf[300];
		snprintf(buf, sizeof buf, "%s: %s", lk->host, gai_strerror(lk->rc));
		c->lookup = NULL;
		lookup_release(lk);
		fail(c, "COULDNT_RESOLVE_HOST", "redis: cannot resolve %s", buf);
		return;
	}
	c->addrs = c->next_addr = lk->result;
	lk->result = NULL;
	c->lookup = NULL;
	lookup_release(lk);
	try_next_address(c);
}

static void handshake(conn *c)
{
	ERR_clear_error();
	int rc = SSL_connect(c->ssl);
	if (rc == 1) {
		c->ssl_want = 0;
		c->state = READY;
		return;
	}
	int e = SSL_get_error(c->ssl, rc);
	if (e == SSL_ERROR_WANT_READ) {
		c->ssl_want = POLLIN;
		return;
	}
	if (e == SSL_ERROR_WANT_WRITE) {
		c->ssl_want = POLLOUT;
		return;
	}
	long vr = SSL_get_verify_result(c->ssl);
	if (vr != X509_V_OK) {
		fail(c, "PEER_FAILED_VERIFICATION", "redis: the server's certificate was not accepted: %s",
		     X509_verify_cert_error_string(vr));
		return;
	}
	if (e == SSL_ERROR_SYSCALL && errno) {
		fail_errno(c, "TLS handshake", errno);
		return;
	}
	fail(c, "SSL_CONNECT_ERROR", "redis: TLS handshake failed: %s", tls_error_text());
}

/* ---- I/O once ready ---- */

/* Writes what is pending. 0, or -1 once failed. */
static int flush_out(conn *c)
{
	while (c->outoff < c->outlen) {
		size_t left = c->outlen - c->outoff;
		ssize_t n;
		if (c->ssl) {
			ERR_clear_error();
			int rc = SSL_write(c->ssl, c->out + c->outoff, left > INT32_MAX ? INT32_MAX : (int)left);
			if (rc <= 0) {
				int e = SSL_get_error(c->ssl, rc);
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
					c->ssl_want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
					return 0;
				}
				if (e == SSL_ERROR_SYSCALL && errno)
					return fail_errno(c, "send", errno), -1;
				return fail(c, "SEND_ERROR", "redis: TLS send failed: %s", tls_error_text()), -1;
			}
			n = rc;
		} else {
			n = send(c->fd, c->out + c->outoff, left, MSG_NOSIGNAL);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					return 0;
				return fail_errno(c, "send", errno), -1;
			}
		}
		c->outoff += (size_t)n;
	}
	c->outoff = c->outlen = 0;
	return 0;
}

/* Reads what is available into the reader. 0, or -1 once failed (EOF included). */
static int fill_in(conn *c)
{
	char buf[READ_CHUNK];
	for (;;) {
		ssize_t n;
		if (c->ssl) {
			ERR_clear_error();
			int rc = SSL_read(c->ssl, buf, sizeof buf);
			if (rc <= 0) {
				int e = SSL_get_error(c->ssl, rc);
				if (e == SSL_ERROR_WANT_READ)
					return 0;
				if (e == SSL_ERROR_WANT_WRITE) {
					c->ssl_want = POLLOUT;
					return 0;
				}
				if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0))
					return fail(c, "ECONNRESET", "redis: the server closed the connection"), -1;
				if (e == SSL_ERROR_SYSCALL)
					return fail_errno(c, "receive", errno), -1;
				return fail(c, "RECV_ERROR", "redis: TLS receive failed: %s", tls_error_text()), -1;
			}
			n = rc;
		} else {
			n = recv(c->fd, buf, sizeof buf, 0);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					return 0;
				return fail_errno(c, "receive", errno), -1;
			}
			if (n == 0)
				return fail(c, "ECONNRESET", "redis: the server closed the connection"), -1;
		}
		if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
			return fail(c, "OUT_OF_MEMORY", "redis: %s", c->reader->errstr), -1;
	}
}

/* Makes every step that can be made now without waiting. */
static void pump(conn *c)
{
	if (c->state == RESOLVING)
		finish_lookup(c);
	if (c->state == CONNECTING)
		finish_connect(c);
	if (c->state == HANDSHAKE)
		handshake(c);
	if (c->state != READY)
		return;
	c->ssl_want = 0;
	if (flush_out(c) < 0)
		return;
	fill_in(c);
}

/* What the connection waits for now: the fd and POLLIN / POLLOUT (fd -1: nothing). */
static int wanted(const conn *c, short *events)
{
	switch (c->state) {
	case RESOLVING:
		*events = POLLIN;
		return c->lookup ? c->lookup->efd : -1;
	case CONNECTING:
		*events = POLLOUT;
		return c->fd;
	case HANDSHAKE:
		*events = c->ssl_want ? (short)c->ssl_want : POLLIN;
		return c->fd;
	case READY:
		/* always readable: replies, and a server that goes away is noticed at once */
		*events = POLLIN;
		if (c->ssl_want == POLLOUT || (c->outoff < c->outlen && c->ssl_want != POLLIN))
			*events |= POLLOUT;
		return c->fd;
	default:
		*events = 0;
		return -1;
	}
}

/* Registers with the loop what the connection waits for now (the loop has no "modify": remove, add). */
static void rewatch(conn *c)
{
	short events = 0;
	int fd = wanted(c, &events);
	if (fd == c->watched_fd && events == c->watched_events)
		return;
	unwatch(c);
	if (fd < 0)
		return;
	if (glsb_loop_add_fd(&c->src, fd, events) != 0) {
		fail(c, "OUT_OF_MEMORY", "redis: out of memory");
		return;
	}
	c->watched_fd = fd;
	c->watched_events = events;
}

/* The loop's callback: progress, then wake whoever waits on the token. */
static void on_ready(struct glsb_source *src, int revents)
{
	conn *c = (conn *)src;
	(void)revents;
	pump(c);
	rewatch(c);
	glsb_loop_ready(c->src.token);
}

/* ---- Lua ---- */

static int push_failure(lua_State *L, conn *c)
{
	lua_pushnil(L);
	lua_pushstring(L, c->errmsg);
	lua_pushstring(L, c->errcode ? c->errcode : "EOTHER");
	return 3;
}

static void start_lookup(conn *c, const char *host, int port)
{
	/* a numeric address needs no lookup: resolve it now, without a thread */
	struct addrinfo hints;
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	char portstr[8];
	snprintf(portstr, sizeof portstr, "%d", port);
	struct addrinfo *res = NULL;
	if (getaddrinfo(host, portstr, &hints, &res) == 0) {
		c->addrs = c->next_addr = res;
		try_next_address(c);
		return;
	}
	struct lookup *lk = calloc(1, sizeof *lk);
	if (!lk) {
		fail(c, "OUT_OF_MEMORY", "redis: out of memory");
		return;
	}
	lk->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (lk->efd < 0) {
		int err = errno;
		free(lk);
		fail_errno(c, "eventfd", err);
		return;
	}
	snprintf(lk->host, sizeof lk->host, "%s", host);
	memcpy(lk->port, portstr, sizeof lk->port);
	lk->hints.ai_socktype = SOCK_STREAM;
	lk->hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
	atomic_init(&lk->done, 0);
	atomic_init(&lk->refs, 2); /* ours and the thread's */
	pthread_attr_t attr;
	pthread_t tid;
	int rc = pthread_attr_init(&attr);
	if (rc == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&tid, &attr, lookup_thread, lk);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		atomic_store(&lk->refs, 1);
		lookup_release(lk);
		fail_errno(c, "cannot start the name lookup", rc);
		return;
	}
	c->lookup = lk;
	c->state = RESOLVING;
}

static char *opt_strdup(lua_State *L, int idx, const char *key)
{
	lua_getfield(L, idx, key);
	const char *s = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
	char *copy = s ? strdup(s) : NULL;
	lua_pop(L, 1);
	return copy;
}

/* redis_connect{path = | host =, port =, tls =, verify = true, cafile =, servername =} -> conn, or nil,
 * message, code. The connection is under way: wait on conn.token until conn:state() is "ready". */
static int l_connect(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "path");
	const char *path = luaL_optstring(L, -1, NULL);
	lua_getfield(L, 1, "host");
	const char *host = luaL_optstring(L, -1, NULL);
	lua_getfield(L, 1, "port");
	lua_Integer port = luaL_optinteger(L, -1, 6379);
	lua_getfield(L, 1, "tls");
	int tls = lua_toboolean(L, -1);
	lua_getfield(L, 1, "verify");
	int verify = lua_isnil(L, -1) ? 1 : lua_toboolean(L, -1);
	lua_pop(L, 5);
	luaL_argcheck(L, (path != NULL) != (host != NULL), 1, "exactly one of path and host");
	luaL_argcheck(L, port > 0 && port < 65536, 1, "port out of range");
	if (path) {
		struct sockaddr_un probe;
		luaL_argcheck(L, strlen(path) < sizeof probe.sun_path, 1, "socket path too long");
	}

	conn *c = lua_newuserdatauv(L, sizeof *c, 0);
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->watched_fd = -1;
	c->src.token = glsb_loop_token();
	c->src.done = on_ready;
	c->state = CONNECTING;
	luaL_setmetatable(L, REDIS_MT);
	c->tls = tls;
	c->verify = verify;
	c->cafile = opt_strdup(L, 1, "cafile");
	c->servername = opt_strdup(L, 1, "servername");
	if (tls && !c->servername && host)
		c->servername = strdup(host);
	c->reader = redisReaderCreate();
	if (!c->reader) {
		release(c);
		return luaL_error(L, "out of memory");
	}
	if (path) {
		struct addrinfo *ai = calloc(1, sizeof *ai + sizeof(struct sockaddr_un));
		if (!ai) {
			release(c);
			return luaL_error(L, "out of memory");
		}
		struct sockaddr_un *un = (struct sockaddr_un *)(ai + 1);
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, path, strlen(path) + 1);
		ai->ai_family = AF_UNIX;
		ai->ai_socktype = SOCK_STREAM;
		ai->ai_addr = (struct sockaddr *)un;
		ai->ai_addrlen = sizeof *un;
		/* one allocation: freed with free(), never freeaddrinfo() */
		c->next_addr = ai;
		try_next_address(c);
		free(ai);
		c->next_addr = NULL;
	} else {
		start_lookup(c, host, (int)port);
	}
	if (c->state == HANDSHAKE)
		handshake(c);
	if (c->state == FAILED) {
		int n = push_failure(L, c);
		release(c);
		c->state = CLOSED;
		return n;
	}
	rewatch(c);
	return 1;
}

/* conn:state() -> "resolving", "connecting", "handshake", "ready" (the token turns ready on each change),
 * or nil, message, code once it failed or was closed. */
static int l_state(lua_State *L)
{
	conn *c = check_conn(L);
	if (c->state == FAILED)
		return push_failure(L, c);
	if (c->state == CLOSED)
		return glsb_push_failure(L, "redis: the connection is closed", "EBADF");
	lua_pushstring(L, state_names[c->state]);
	return 1;
}

/* conn:send({argv, ...}) -> true: formats the commands (argv: array of strings / numbers) and writes what
 * the socket takes now; the rest goes out in later steps. Pipelined: replies come back in order. */
static int l_send(lua_State *L)
{
	conn *c = check_conn(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	if (c->state == FAILED)
		return push_failure(L, c);
	if (c->state == CLOSED)
		return glsb_push_failure(L, "redis: the connection is closed", "EBADF");
	lua_Integer ncmd = luaL_len(L, 2);
	for (lua_Integer i = 1; i <= ncmd; i++) {
		lua_geti(L, 2, i);
		luaL_argcheck(L, lua_type(L, -1) == LUA_TTABLE, 2, "each command must be an array of arguments");
		lua_Integer argc = luaL_len(L, -1);
		luaL_argcheck(L, argc > 0 && argc < 100000, 2, "a command needs 1..99999 arguments");
		const char **argv = malloc((size_t)argc * sizeof *argv);
		size_t *lens = malloc((size_t)argc * sizeof *lens);
		if (!argv || !lens) {
			free(argv);
			free(lens);
			return luaL_error(L, "out of memory");
		}
		for (lua_Integer a = 1; a <= argc; a++) {
			lua_geti(L, -1 - (int)(a - 1), a);
			int t = lua_type(L, -1);
			if (t != LUA_TSTRING && t != LUA_TNUMBER) {
				free(argv);
				free(lens);
				return luaL_argerror(L, 2, "command arguments must be strings or numbers");
			}
			argv[a - 1] = lua_tolstring(L, -1, &lens[a - 1]);
		}
		char *cmd = NULL;
		int len = redisFormatCommandArgv(&cmd, (int)argc, argv, lens);
		lua_pop(L, (int)argc + 1);
		free(argv);
		free(lens);
		if (len < 0)
			return luaL_error(L, "out of memory");
		if (c->outlen + (size_t)len > c->outcap) {
			size_t cap = c->outcap ? c->outcap : 4096;
			while (cap < c->outlen + (size_t)len)
				cap *= 2;
			char *p = realloc(c->out, cap);
			if (!p) {
				redisFreeCommand(cmd);
				return luaL_error(L, "out of memory");
			}
			c->out = p;
			c->outcap = cap;
		}
		memcpy(c->out + c->outlen, cmd, (size_t)len);
		c->outlen += (size_t)len;
		redisFreeCommand(cmd);
	}
	if (c->state == READY && c->ssl_want != POLLIN)
		flush_out(c);
	rewatch(c);
	if (c->state == FAILED)
		return push_failure(L, c);
	lua_pushboolean(L, 1);
	return 1;
}

/* Pushes a reply: bulk and status -> string, integer -> integer, nil -> false, error -> {err = text},
 * array -> table (with n). */
static void push_reply(lua_State *L, const redisReply *r, int depth)
{
	luaL_checkstack(L, 4, "redis reply too deep");
	switch (r->type) {
	case REDIS_REPLY_STRING:
	case REDIS_REPLY_STATUS:
		lua_pushlstring(L, r->str, r->len);
		break;
	case REDIS_REPLY_INTEGER:
		lua_pushinteger(L, (lua_Integer)r->integer);
		break;
	case REDIS_REPLY_ERROR:
		lua_createtable(L, 0, 1);
		lua_pushlstring(L, r->str, r->len);
		lua_setfield(L, -2, "err");
		break;
	case REDIS_REPLY_ARRAY:
		lua_createtable(L, r->elements > INT32_MAX ? 0 : (int)r->elements, 1);
		for (size_t i = 0; i < r->elements; i++) {
			if (depth > 32)
				lua_pushboolean(L, 0);
			else
				push_reply(L, r->element[i], depth + 1);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
		lua_pushinteger(L, (lua_Integer)r->elements);
		lua_setfield(L, -2, "n");
		break;
	default: /* REDIS_REPLY_NIL */
		lua_pushboolean(L, 0);
		break;
	}
}

/* conn:replies() -> { reply, ..., n = count } of the replies complete so far (moved out), or nil, message,
 * code when the stream broke the protocol. */
static int l_replies(lua_State *L)
{
	conn *c = check_conn(L);
	if (c->state == CLOSED)
		return glsb_push_failure(L, "redis: the connection is closed", "EBADF");
	if (!c->reader) {
		lua_createtable(L, 0, 1);
		lua_pushinteger(L, 0);
		lua_setfield(L, -2, "n");
		return 1;
	}
	lua_newtable(L);
	lua_Integer n = 0;
	for (;;) {
		void *reply = NULL;
		if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
			fail(c, "WEIRD_SERVER_REPLY", "redis: protocol error: %s", c->reader->errstr);
			return push_failure(L, c);
		}
		if (!reply)
			break;
		push_reply(L, reply, 0);
		freeReplyObject(reply);
		lua_rawseti(L, -2, ++n);
	}
	/* the replies that arrived before a failure are still handed out; then the failure */
	if (n == 0 && c->state == FAILED)
		return push_failure(L, c);
	lua_pushinteger(L, n);
	lua_setfield(L, -2, "n");
	return 1;
}

static int l_close(lua_State *L)
{
	conn *c = check_conn(L);
	if (c->state != CLOSED) {
		release(c);
		c->state = CLOSED;
	}
	return 0;
}

static int l_index(lua_State *L)
{
	conn *c = check_conn(L);
	const char *key = luaL_checkstring(L, 2);
	if (strcmp(key, "token") == 0) {
		lua_pushinteger(L, (lua_Integer)c->src.token);
		return 1;
	}
	return glsb_method(L, REDIS_MT, key);
}

void glsb_open_redis(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"state", l_state}, {"send", l_send}, {"replies", l_replies}, {"close", l_close}, {NULL, NULL},
	};
	glsb_new_class(L, REDIS_MT, methods, l_index, l_close);
	lua_pushcfunction(L, l_connect);
	lua_setfield(L, -2, "redis_connect");
}
