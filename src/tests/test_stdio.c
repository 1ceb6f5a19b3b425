/* test_stdio.c: fd_read, fd_write, close_fd, signal_fd and take_stdio (the process's own stdin and stdout
 * moved to fds of their own, fd 1 pointed at stderr). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "check.h"
#include "core.h"

static lua_State *L;

/* Runs a chunk with (core, a, b) as `...`; returns how many results it left, or -1 (error printed unless
 * quiet; left on the stack then). */
static int run_q(const char *code, int a, int b, int quiet)
{
	int top = lua_gettop(L);
	if (luaL_loadstring(L, code) != 0)
		goto err;
	lua_getglobal(L, "core");
	lua_pushinteger(L, a);
	lua_pushinteger(L, b);
	if (lua_pcall(L, 3, LUA_MULTRET, 0) != 0)
		goto err;
	return lua_gettop(L) - top;
err:
	if (!quiet) {
		fprintf(stderr, "  lua: %s\n", lua_tostring(L, -1));
		lua_settop(L, top);
	}
	return -1;
}

static int run(const char *code, int a, int b) { return run_q(code, a, b, 0); }

static int misuse(const char *code, int a)
{
	int top = lua_gettop(L);
	if (run_q(code, a, 0, 1) != -1)
		return 0;
	int ok = strstr(lua_tostring(L, -1), "bad argument") != NULL;
	lua_settop(L, top);
	return ok;
}

static void test_read_write(void)
{
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	/* write from an offset, read back what came */
	CHECK(run("local core, r, w = ...; return core.fd_write(w, 'xxhello', 3)", p[0], p[1]) == 1);
	CHECK(lua_tointeger(L, -1) == 5);
	lua_pop(L, 1);
	CHECK(run("local core, r = ...; return core.fd_read(r, 100)", p[0], p[1]) == 1);
	CHECK_STR(lua_tostring(L, -1), "hello");
	lua_pop(L, 1);
	/* nothing there: EAGAIN, in the failure shape */
	CHECK(run("local core, r = ...; return core.fd_read(r)", p[0], p[1]) == 3);
	CHECK(lua_isnil(L, -3));
	CHECK_STR(lua_tostring(L, -1), "EAGAIN");
	lua_pop(L, 3);
	/* at most max bytes per read */
	CHECK(run("local core, r, w = ...; core.fd_write(w, 'abcdef'); return core.fd_read(r, 4), core.fd_read(r, 4)",
		  p[0], p[1]) == 2);
	CHECK_STR(lua_tostring(L, -2), "abcd");
	CHECK_STR(lua_tostring(L, -1), "ef");
	lua_pop(L, 2);
	/* from = #data + 1: nothing left to write */
	CHECK(run("local core, r, w = ...; return core.fd_write(w, 'ab', 3)", p[0], p[1]) == 1);
	CHECK(lua_tointeger(L, -1) == 0);
	lua_pop(L, 1);
	/* the writer gone: "" at the end; the reader gone: EPIPE (SIGPIPE is ignored once the core loaded) */
	CHECK(run("local core, r, w = ...; return core.close_fd(w)", p[0], p[1]) == 1);
	CHECK(run("local core, r = ...; return core.fd_read(r)", p[0], p[1]) == 1);
	CHECK_STR(lua_tostring(L, -1), "");
	lua_pop(L, 2);
	close(p[0]);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	close(p[0]);
	CHECK(run("local core, r, w = ...; return core.fd_write(w, 'x')", p[0], p[1]) == 3);
	CHECK_STR(lua_tostring(L, -1), "EPIPE");
	lua_pop(L, 3);
	close(p[1]);
	/* misuse */
	CHECK(misuse("local core, a = ...; return core.fd_read(a)", -1));
	CHECK(misuse("local core, a = ...; return core.fd_read(0, 0)", 0));
	CHECK(misuse("local core, a = ...; return core.fd_write(1, 'ab', 4)", 0));
	CHECK(misuse("local core = ...; return core.signal_fd({'KILL'})", 0));
}

static void test_signal_fd(void)
{
	CHECK(run("local core = ...; return core.signal_fd({'USR1', 'USR2'})", 0, 0) == 1);
	int fd = (int)lua_tointeger(L, -1);
	lua_pop(L, 1);
	CHECK(fd > 2);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	/* the same pipe for every call */
	CHECK(run("local core = ...; return core.signal_fd({'USR1'})", 0, 0) == 1);
	CHECK(lua_tointeger(L, -1) == fd);
	lua_pop(L, 1);
	raise(SIGUSR1);
	raise(SIGUSR2);
	unsigned char got[2] = {0, 0};
	CHECK(read(fd, got, 2) == 2);
	CHECK(got[0] == SIGUSR1 && got[1] == SIGUSR2);
	CHECK(read(fd, got, 1) == -1 && errno == EAGAIN);
	signal(SIGUSR1, SIG_DFL);
	signal(SIGUSR2, SIG_DFL);
}

/* In a child whose stdin, stdout and stderr are pipes of ours: after take_stdio, the returned fds are the
 * old stdin and stdout, fd 0 reads /dev/null, and what is written to fd 1 arrives on stderr. */
static void test_take_stdio(void)
{
	int in[2], out[2], err[2];
	CHECK(pipe(in) == 0 && pipe(out) == 0 && pipe(err) == 0);
	/* "ping" is in the pipe before the child starts: take_stdio makes the fd non-blocking, so a child that
	 * reached fd_read before the parent wrote got EAGAIN (seen under load, in make check-c's ASan run) */
	CHECK(write(in[1], "ping", 4) == 4);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (int fd = 3; fd < 64; fd++)
			if (fd != 1)
				close(fd);
		if (run("local core = ...; local i, o = core.take_stdio(); assert(i and o, o); "
			"local got = core.fd_read(i, 100); core.fd_write(o, 'proto:' .. got); "
			"io.stdout:write('stray'); io.stdout:flush(); "
			"assert(io.stdin:read('a') == '', 'fd 0 is not /dev/null'); return true",
			0, 0) != 1) {
			lua_close(L);
			_exit(1);
		}
		lua_close(L); /* the child's copy of the state: freed, so that valgrind counts no leak in it */
		_exit(0);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(in[1]);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char buf[64] = {0};
	ssize_t n = read(out[0], buf, sizeof buf - 1);
	CHECK(n == 10);
	CHECK_STR(buf, "proto:ping");
	memset(buf, 0, sizeof buf);
	n = read(err[0], buf, sizeof buf - 1);
	CHECK(n >= 5 && strstr(buf, "stray") != NULL);
	close(out[0]);
	close(err[0]);
}

int main(void)
{
	L = luaL_newstate();
	luaL_openlibs(L);
	luaL_requiref(L, "glsb.core", luaopen_glsb_core, 0);
	lua_setglobal(L, "core");
	RUN(test_read_write);
	RUN(test_signal_fd);
	RUN(test_take_stdio);
	CHECK(lua_gettop(L) == 0);
	lua_close(L);
	return CHECK_EXIT();
}
