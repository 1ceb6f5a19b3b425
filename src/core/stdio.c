/* stdio.c: the process's own standard streams and signals as plain fds the loop can watch, for a program
 * that speaks a protocol on its stdin and stdout (glsb-lua --mcp): take_stdio gives the protocol streams
 * fds of their own and points fd 0 at /dev/null and fd 1 at stderr, so that nothing else the process (or a
 * child that inherits fd 1) prints can corrupt the protocol; fd_read and fd_write move bytes on them (one
 * read(2) or write(2) each); signal_fd turns signals into bytes on a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buffer.h"
#include "codes.h"
#include "core.h"

#define MAX_READ (16 * 1024 * 1024)

/* A pipe or a socket is ours alone once taken: it can be non-blocking. A terminal (or a file) is shared
 * with whoever started us, and O_NONBLOCK is a property of the shared open file: left as it is. */
static void nonblock_if_private(int fd)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	}
}

/* take_stdio() -> in_fd, out_fd: the process's stdin and stdout moved to new close-on-exec fds (so no child
 * inherits them); fd 0 becomes /dev/null and fd 1 a copy of fd 2. Or nil, message, errno name. */
static int l_take_stdio(lua_State *L)
{
	int in = fcntl(0, F_DUPFD_CLOEXEC, 3);
	if (in < 0)
		return glsb_push_errno(L, "take_stdio", "stdin", errno);
	int out = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (out < 0) {
		int e = errno;
		close(in);
		return glsb_push_errno(L, "take_stdio", "stdout", e);
	}
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0) {
		int e = errno;
		if (null >= 0)
			close(null);
		close(in);
		close(out);
		return glsb_push_errno(L, "take_stdio", "/dev/null", e);
	}
	if (null != 0)
		close(null);
	nonblock_if_private(in);
	nonblock_if_private(out);
	lua_pushinteger(L, in);
	lua_pushinteger(L, out);
	return 2;
}

static int check_fd(lua_State *L, int arg)
{
	lua_Integer fd = luaL_checkinteger(L, arg);
	luaL_argcheck(L, fd >= 0 && fd <= 65535, arg, "not a file descriptor");
	return (int)fd;
}

/* fd_read(fd[, max = 65536[, buffer]]) -> bytes ("" at end of file), or nil, message, errno name (EAGAIN:
 * nothing ready now). One read(2), retried on EINTR. With a buffer (buffer.c) the bytes are appended to
 * it (at most its room) and the count is returned, 0 at end of file: a file descriptor glsb-confine passed
 * (a download) is read straight into the buffer it will be taken from. */
static int l_fd_read(lua_State *L)
{
	int fd = check_fd(L, 1);
	lua_Integer max = luaL_optinteger(L, 2, 65536);
	luaL_argcheck(L, max > 0 && max <= MAX_READ, 2, "max must be 1 to 16 MiB");
	if (!lua_isnoneornil(L, 3)) {
		struct glsb_buffer *into = glsb_check_buffer(L, 3);
		luaL_argcheck(L, into->len < into->cap, 3, "the buffer is full");
		size_t room = into->cap - into->len;
		ssize_t n;
		do
			n = read(fd, into->data + into->len, (size_t)max < room ? (size_t)max : room);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return glsb_push_errno(L, "fd_read", "", errno);
		into->len += (size_t)n;
		lua_pushinteger(L, n);
		return 1;
	}
	luaL_Buffer b;
	char *p = luaL_buffinitsize(L, &b, (size_t)max);
	ssize_t n;
	do
		n = read(fd, p, (size_t)max);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int e = errno;
		luaL_pushresultsize(&b, 0);
		lua_pop(L, 1);
		return glsb_push_errno(L, "fd_read", "", e);
	}
	luaL_pushresultsize(&b, (size_t)n);
	return 1;
}

/* fd_write(fd, data[, from = 1]) -> how many bytes of data, from byte `from` on, were written (maybe
 * fewer than asked), or nil, message, errno name (EAGAIN: full, wait for "w"; EPIPE: the reader is gone).
 * One write(2), retried on EINTR. */
static int l_fd_write(lua_State *L)
{
	int fd = check_fd(L, 1);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	lua_Integer from = luaL_optinteger(L, 3, 1);
	luaL_argcheck(L, from >= 1 && (size_t)from <= len + 1, 3, "from is outside the data");
	size_t off = (size_t)from - 1;
	if (off == len) {
		lua_pushinteger(L, 0);
		return 1;
	}
	ssize_t n;
	do
		n = write(fd, data + off, len - off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return glsb_push_errno(L, "fd_write", "", errno);
	lua_pushinteger(L, (lua_Integer)n);
	return 1;
}

/* close_fd(fd) -> true, or nil, message, errno name. */
static int l_close_fd(lua_State *L)
{
	int fd = check_fd(L, 1);
	if (close(fd) != 0 && errno != EINTR)
		return glsb_push_errno(L, "close_fd", "", errno);
	lua_pushboolean(L, 1);
	return 1;
}

/* The self-pipe of signal_fd: the handler writes the signal's number, the loop watches the read end. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char c = (unsigned char)sig;
	if (write(sig_pipe[1], &c, 1) < 0) {
		/* full: a byte is already waiting, which is all a reader needs */
	}
	errno = saved;
}

static const char *const sig_names[] = {"TERM", "INT", "HUP", "QUIT", "USR1", "USR2", NULL};
static const int sig_numbers[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* signal_fd(names) -> fd: from now on each of the signals named ("TERM", "INT", "HUP", "QUIT", "USR1",
 * "USR2") writes its number as one byte to a pipe whose read end (non-blocking, close-on-exec) is
 * returned; the same pipe for every call. Or nil, message, errno name. Children get the default actions
 * back (glsb.process resets every signal at spawn). */
static int l_signal_fd(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_Integer n = luaL_len(L, 1);
	int wanted[sizeof sig_numbers / sizeof sig_numbers[0]];
	int count = 0;
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, 1, i);
		int which = luaL_checkoption(L, -1, NULL, sig_names);
		lua_pop(L, 1);
		wanted[count++] = sig_numbers[which];
		if (count == (int)(sizeof wanted / sizeof wanted[0]))
			break;
	}
	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		return glsb_push_errno(L, "signal_fd", "pipe", errno);
	for (int i = 0; i < count; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(wanted[i], &sa, NULL) != 0)
			return glsb_push_errno(L, "signal_fd", "sigaction", errno);
	}
	lua_pushinteger(L, sig_pipe[0]);
	return 1;
}

void glsb_open_stdio(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"take_stdio", l_take_stdio}, {"fd_read", l_fd_read},	  {"fd_write", l_fd_write},
		{"close_fd", l_close_fd},     {"signal_fd", l_signal_fd}, {NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
