/* loop.c: the poll step: one wait over the registered sources (fds, the transfer driver), returning ready tokens. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "codes.h"
#include "core.h"
#include "loop.h"

/* One loop per process: glsb is single-threaded and every Lua state shares it. The watched sources and
 * their pollfds are kept side by side and handed to poll(2) as they are: nothing is rebuilt per step. */
static struct {
	const struct glsb_loop_driver *driver;
	long long next_token;
	struct pollfd *pfds;       /* pfds[i] is what srcs[i] watches */
	struct glsb_source **srcs; /* NULL once removed during a dispatch (its fd -1); swept after it */
	size_t nwatches, capwatches;
	int dispatching, removed;
	long long *ready;
	size_t nready, capready;
} loop;

static volatile sig_atomic_t interrupt_requested;

void glsb_loop_interrupt(void)
{
	interrupt_requested = 1;
}

int glsb_loop_interrupted(void)
{
	int was = interrupt_requested != 0;
	interrupt_requested = 0;
	return was;
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

void glsb_loop_set_driver(const struct glsb_loop_driver *driver)
{
	loop.driver = driver;
}

int glsb_loop_add_fd(struct glsb_source *src, int fd, short events)
{
	if (loop.nwatches == loop.capwatches) {
		size_t cap = loop.capwatches ? loop.capwatches * 2 : 16;
		struct pollfd *pfds = realloc(loop.pfds, cap * sizeof *pfds);
		if (!pfds)
			return -1;
		loop.pfds = pfds;
		struct glsb_source **srcs = realloc(loop.srcs, cap * sizeof *srcs);
		if (!srcs)
			return -1;
		loop.srcs = srcs;
		loop.capwatches = cap;
	}
	src->slot = loop.nwatches;
	loop.pfds[loop.nwatches] = (struct pollfd){fd, events, 0};
	loop.srcs[loop.nwatches++] = src;
	return 0;
}

static void move_watch(size_t from, size_t to)
{
	loop.pfds[to] = loop.pfds[from];
	loop.srcs[to] = loop.srcs[from];
	loop.srcs[to]->slot = to;
}

void glsb_loop_remove_fd(struct glsb_source *src)
{
	size_t i = src->slot;
	if (i >= loop.nwatches || loop.srcs[i] != src)
		return; /* not watched */
	if (loop.dispatching) {
		/* the dispatch walks the arrays by index: keep them in place, poll(2) skips a negative fd */
		loop.srcs[i] = NULL;
		loop.pfds[i].fd = -1;
		loop.removed = 1;
		return;
	}
	if (i != --loop.nwatches)
		move_watch(loop.nwatches, i);
}

static void sweep_removed(void)
{
	if (!loop.removed)
		return;
	size_t j = 0;
	for (size_t i = 0; i < loop.nwatches; i++)
		if (loop.srcs[i]) {
			if (i != j)
				move_watch(i, j);
			j++;
		}
	loop.nwatches = j;
	loop.removed = 0;
}

/* ---- the Lua side: now, poll, watch, unwatch ---- */

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

/* A watch made from Lua: a source whose callback only reports its token. Owned by the watch list. */
static void lua_watch_ready(struct glsb_source *src, int revents)
{
	(void)revents;
	glsb_loop_ready(src->token);
}

/* watch(fd, events) -> token */
static int l_watch(lua_State *L)
{
	int fd = (int)luaL_checkinteger(L, 1);
	const char *ev = luaL_optstring(L, 2, "r");
	short events = 0;
	if (strchr(ev, 'r'))
		events |= POLLIN;
	if (strchr(ev, 'w'))
		events |= POLLOUT;
	luaL_argcheck(L, fd >= 0, 1, "fd must be >= 0");
	luaL_argcheck(L, events != 0, 2, "events must contain 'r' or 'w'");
	struct glsb_source *src = malloc(sizeof *src);
	if (!src || glsb_loop_add_fd(src, fd, events) != 0) {
		free(src);
		return luaL_error(L, "watch: out of memory");
	}
	src->token = glsb_loop_token();
	src->done = lua_watch_ready;
	lua_pushinteger(L, (lua_Integer)src->token);
	return 1;
}

static int l_unwatch(lua_State *L)
{
	long long token = (long long)luaL_checkinteger(L, 1);
	for (size_t i = 0; i < loop.nwatches; i++) {
		struct glsb_source *src = loop.srcs[i];
		if (src && src->done == lua_watch_ready && src->token == token) {
			glsb_loop_remove_fd(src);
			free(src);
			break;
		}
	}
	return 0;
}

/* poll(timeout_s) -> { token, ... }, or nil, message, code when the wait itself failed. */
static int l_poll(lua_State *L)
{
	lua_Number timeout = luaL_checknumber(L, 1);
	luaL_argcheck(L, timeout >= 0, 1, "timeout must be >= 0");
	const struct glsb_loop_driver *driver = loop.driver;

	if (glsb_loop_interrupted())
		return luaL_error(L, "interrupted!");

	/* The driver first: what fell due (a transfer added since the last step starts at its timer). */
	if (driver)
		driver->step();
	int ms = loop.nready ? 0 : (timeout > 86400 ? 86400000 : (int)ceil(timeout * 1000));
	if (driver && ms > 0) {
		int due = driver->timeout_ms();
		if (due >= 0 && due < ms)
			ms = due;
	}
	int rc = poll(loop.pfds, (nfds_t)loop.nwatches, ms);
	if (rc < 0 && errno == EINTR) {
		rc = 0; /* a signal (Ctrl-C at the prompt): an empty step; the caller decides */
		for (size_t i = 0; i < loop.nwatches; i++)
			loop.pfds[i].revents = 0;
	}
	if (glsb_loop_interrupted())
		return luaL_error(L, "interrupted!"); /* before any source is dispatched or token handed out */
	if (rc < 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "poll: %s", strerror(errno));
		lua_pushstring(L, glsb_code_name(GLSB_POLL_FAILED));
		return 3;
	}
	/* Sources may remove themselves (or others) from their callbacks, and add new ones (appended, not
	 * polled this step): removal is deferred and the arrays are read by index, never through a pointer
	 * kept across a callback (an add may move them). */
	size_t n = loop.nwatches;
	loop.dispatching = 1;
	for (size_t i = 0; i < n && rc > 0; i++) {
		short revents = loop.pfds[i].revents;
		struct glsb_source *src = loop.srcs[i];
		if (!revents)
			continue;
		rc--;
		loop.pfds[i].revents = 0;
		if (src)
			src->done(src, revents);
	}
	loop.dispatching = 0;
	sweep_removed();
	if (driver)
		driver->step(); /* timers that fell due while we slept */

	lua_createtable(L, (int)loop.nready, 0);
	for (size_t i = 0; i < loop.nready; i++) {
		lua_pushinteger(L, (lua_Integer)loop.ready[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	loop.nready = 0;
	return 1;
}

/* loop_stats() -> {watches = fds watched, ready = tokens reported and not yet handed out} (tests). */
static int l_loop_stats(lua_State *L)
{
	lua_createtable(L, 0, 2);
	lua_pushinteger(L, (lua_Integer)loop.nwatches);
	lua_setfield(L, -2, "watches");
	lua_pushinteger(L, (lua_Integer)loop.nready);
	lua_setfield(L, -2, "ready");
	return 1;
}

void glsb_open_loop(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"now", l_now},	    {"realtime_ns", l_realtime_ns}, {"poll", l_poll}, {"watch", l_watch},
		{"unwatch", l_unwatch}, {"loop_stats", l_loop_stats},	{NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}

void glsb_raise_fd_limit(void)
{
	static int done;
	struct rlimit rl;
	if (done)
		return;
	done = 1;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}
