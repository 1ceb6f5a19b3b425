/* loop.c: the poll step: one wait over libcurl's transfers and the watched fds, returning ready tokens. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "loop.h"

typedef struct {
	long long token;
	int fd;
	short events;
} watch;

/* One loop per process: glsb is single-threaded and every Lua state shares the connection cache. */
static struct {
	CURLM *multi;
	long long next_token;
	watch *watches;
	size_t nwatches, capwatches;
	long long *ready;
	size_t nready, capready;
} loop;

CURLM *glsb_loop_multi(void)
{
	if (!loop.multi) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return NULL;
		loop.multi = curl_multi_init();
	}
	return loop.multi;
}

long long glsb_loop_token(void)
{
	return ++loop.next_token;
}

void glsb_loop_ready(long long token)
{
	for (size_t i = 0; i < loop.nready; i++)
		if (loop.ready[i] == token)
			return;
	if (loop.nready == loop.capready) {
		size_t cap = loop.capready ? loop.capready * 2 : 64;
		long long *p = realloc(loop.ready, cap * sizeof *p);
		if (!p)
			return; /* the waiter's own deadline still wakes it */
		loop.ready = p;
		loop.capready = cap;
	}
	loop.ready[loop.nready++] = token;
}

static int l_now(lua_State *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
	return 1;
}

/* Wall-clock nanoseconds since the Unix epoch, as an integer (fits a 64-bit lua_Integer until 2262): what
 * OpenTelemetry timestamps are (startTimeUnixNano). Not for measuring durations: use now(). */
static int l_realtime_ns(lua_State *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + (lua_Integer)ts.tv_nsec);
	return 1;
}

static int l_watch(lua_State *L)
{
	int fd = (int)luaL_checkinteger(L, 1);
	const char *ev = luaL_optstring(L, 2, "r");
	short events = 0;
	if (strchr(ev, 'r'))
		events |= CURL_WAIT_POLLIN;
	if (strchr(ev, 'w'))
		events |= CURL_WAIT_POLLOUT;
	luaL_argcheck(L, fd >= 0, 1, "fd must be >= 0");
	luaL_argcheck(L, events != 0, 2, "events must contain 'r' or 'w'");
	if (loop.nwatches == loop.capwatches) {
		size_t cap = loop.capwatches ? loop.capwatches * 2 : 16;
		watch *p = realloc(loop.watches, cap * sizeof *p);
		if (!p)
			return luaL_error(L, "out of memory");
		loop.watches = p;
		loop.capwatches = cap;
	}
	watch *w = &loop.watches[loop.nwatches++];
	w->token = glsb_loop_token();
	w->fd = fd;
	w->events = events;
	lua_pushinteger(L, (lua_Integer)w->token);
	return 1;
}

static int l_unwatch(lua_State *L)
{
	long long token = (long long)luaL_checkinteger(L, 1);
	for (size_t i = 0; i < loop.nwatches; i++) {
		if (loop.watches[i].token == token) {
			loop.watches[i] = loop.watches[--loop.nwatches];
			break;
		}
	}
	return 0;
}

static void drain_curl_messages(void)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(loop.multi, &left)))
		if (msg->msg == CURLMSG_DONE)
			glsb_http_transfer_done(msg->easy_handle, msg->data.result);
}

/* poll(timeout_s) -> { token, ... } */
static int l_poll(lua_State *L)
{
	lua_Number timeout = luaL_checknumber(L, 1);
	luaL_argcheck(L, timeout >= 0, 1, "timeout must be >= 0");
	CURLM *multi = glsb_loop_multi();
	if (!multi)
		return luaL_error(L, "libcurl: cannot create a multi handle");

	int ms = loop.nready ? 0 : (timeout > 86400 ? 86400000 : (int)ceil(timeout * 1000));
	struct curl_waitfd stackfds[16];
	struct curl_waitfd *fds = stackfds;
	size_t n = loop.nwatches;
	if (n > 16 && !(fds = malloc(n * sizeof *fds)))
		return luaL_error(L, "out of memory");
	for (size_t i = 0; i < n; i++) {
		fds[i].fd = loop.watches[i].fd;
		fds[i].events = loop.watches[i].events;
		fds[i].revents = 0;
	}
	int running;
	/* perform first: transfers added since the last step must be started before we sleep. */
	curl_multi_perform(multi, &running);
	drain_curl_messages();
	if (loop.nready)
		ms = 0;
	CURLMcode mc = curl_multi_poll(multi, fds, (unsigned)n, ms, NULL);
	if (mc != CURLM_OK && mc != CURLM_UNRECOVERABLE_POLL) {
		if (fds != stackfds)
			free(fds);
		return luaL_error(L, "curl_multi_poll: %s", curl_multi_strerror(mc));
	}
	curl_multi_perform(multi, &running);
	drain_curl_messages();
	/* Watches may have been removed by the callbacks above only via Lua, which cannot run here. */
	for (size_t i = 0; i < n; i++)
		if (fds[i].revents)
			glsb_loop_ready(loop.watches[i].token);
	if (fds != stackfds)
		free(fds);

	lua_createtable(L, (int)loop.nready, 0);
	for (size_t i = 0; i < loop.nready; i++) {
		lua_pushinteger(L, (lua_Integer)loop.ready[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	loop.nready = 0;
	return 1;
}

void glsb_open_loop(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"now", l_now}, {"realtime_ns", l_realtime_ns}, {"poll", l_poll}, {"watch", l_watch}, {"unwatch", l_unwatch}, {NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
