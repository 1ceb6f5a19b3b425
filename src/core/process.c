/* process.c: child processes with non-blocking pipes, and their exit as a loop source. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buffer.h"
#include "codes.h"
#include "core.h"
#include "loop.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define PROCESS_MT "glsb.Process"

extern char **environ;

/* Slot i is the child's fd i. fd3 is an optional extra pipe the child writes and we read (a status or
 * report channel, e.g. glsb-confine's --report-fd 3), or a stream socket both ends read and write
 * (glsb-confine's --report-fd 3 --control-fd 3: the report and a control channel on one socketpair). */
enum { IN, OUT, ERR, FD3, NSTD };
static const char *const std_names[] = {"stdin", "stdout", "stderr", "fd3", "pidfd", NULL};

typedef struct {
	/* The exit source: the pidfd watched from the spawn until the child is reaped; its token is ready
	 * once the child has ended and been reaped (whoever reaped it: the loop's step, poll(), close()). */
	struct glsb_source exit_src;
	int exit_watched;
	pid_t pid;
	int fd[NSTD];
	int fd3_socket; /* fd3 is a socketpair end: it is written too */
	/* descriptors that came on fd3 (SCM_RIGHTS: glsb-confine's `open` answers), oldest first, ours until
	 * take_fd hands them over; more than PASSED_MAX waiting are closed as they come */
#define PASSED_MAX 4
	int passed[PASSED_MAX];
	int npassed;
	int pidfd;
	int reaped;
	int code, sig;
} process;

static process *check_process(lua_State *L)
{
	return luaL_checkudata(L, 1, PROCESS_MT);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void unwatch_exit(process *p)
{
	if (!p->exit_watched)
		return;
	glsb_loop_remove_fd(&p->exit_src);
	p->exit_watched = 0;
	glsb_loop_ready(p->exit_src.token);
}

static int try_reap(process *p, int options)
{
	if (p->reaped || p->pid <= 0)
		return p->reaped;
	siginfo_t info;
	memset(&info, 0, sizeof info);
	int rc = p->pidfd >= 0 ? waitid((idtype_t)P_PIDFD, (id_t)p->pidfd, &info, WEXITED | options)
			       : waitid(P_PID, (id_t)p->pid, &info, WEXITED | options);
	if (rc == 0 && info.si_pid != 0) {
		p->reaped = 1;
		if (info.si_code == CLD_EXITED)
			p->code = info.si_status;
		else
			p->sig = info.si_status;
	} else if (rc < 0 && errno == ECHILD) {
		p->reaped = 1; /* someone else reaped it; we cannot know how it ended */
		p->code = -1;
	}
	if (p->reaped)
		unwatch_exit(p);
	return p->reaped;
}

/* The pidfd turned readable: the child has ended. Reap it now (no zombie waits for a poll() call) and
 * report the exit token; the source removes itself with the reaping. */
static void exit_ready(struct glsb_source *src, int revents)
{
	process *p = (process *)(void *)((char *)src - offsetof(process, exit_src));
	if (!try_reap(p, WNOHANG) && (revents & (POLLERR | POLLNVAL)))
		unwatch_exit(p); /* a pidfd the kernel refuses: stop watching; waiters fall back to poll() */
}

static void release(process *p)
{
	for (int i = 0; i < NSTD; i++)
		close_fd(&p->fd[i]);
	for (int i = 0; i < p->npassed; i++)
		close(p->passed[i]);
	p->npassed = 0;
	if (!p->reaped && p->pid > 0) {
		kill(p->pid, SIGKILL);
		try_reap(p, 0);
	}
	unwatch_exit(p); /* before the pidfd goes: the loop must not poll a closed (or reused) fd */
	close_fd(&p->pidfd);
}

/* Disposition of a child fd: "pipe", "null", "inherit", "none" (closed) or "socket" (fd3 only). */
enum { MODE_PIPE, MODE_NULL, MODE_INHERIT, MODE_NONE, MODE_SOCKET };
static int std_mode(lua_State *L, const char *field, int dflt)
{
	static const char *const modes[] = {"pipe", "null", "inherit", "none", "socket", NULL};
	lua_getfield(L, 1, field);
	int m = lua_isnil(L, -1) ? dflt : luaL_checkoption(L, -1, NULL, modes);
	lua_pop(L, 1);
	return m;
}

/* NULL-terminated copy of a Lua array of strings at the top of the stack (pointers into Lua strings). */
static char **string_array(lua_State *L, const char *what)
{
	lua_Integer n = luaL_len(L, -1);
	char **v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, -2, i);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "spawn: %s[%d] must be a string", what, (int)i);
		v[i - 1] = (char *)lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	v[n] = NULL;
	return v;
}

/* spawn(opts) -> process, or nil, message, errno name */
static int l_spawn(lua_State *L)
{
	glsb_raise_fd_limit(); /* a local sandbox holds five of our descriptors */
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "argv");
	luaL_argcheck(L, lua_istable(L, -1) && luaL_len(L, -1) > 0, 1, "opts.argv must be a non-empty array");
	char **argv = string_array(L, "argv"); /* keeps the userdata on the stack */
	lua_getfield(L, 1, "env");
	char **envp = environ;
	if (!lua_isnil(L, -1)) {
		luaL_checktype(L, -1, LUA_TTABLE);
		envp = string_array(L, "env");
	}
	lua_getfield(L, 1, "cwd");
	const char *cwd = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
	lua_getfield(L, 1, "setsid");
	int setsid_flag = lua_toboolean(L, -1);
	int modes[NSTD] = {std_mode(L, "stdin", MODE_PIPE), std_mode(L, "stdout", MODE_PIPE),
			   std_mode(L, "stderr", MODE_PIPE), std_mode(L, "fd3", MODE_NONE)};
	luaL_argcheck(L, modes[IN] != MODE_NONE && modes[OUT] != MODE_NONE && modes[ERR] != MODE_NONE &&
			  modes[IN] != MODE_SOCKET && modes[OUT] != MODE_SOCKET && modes[ERR] != MODE_SOCKET, 1,
		      "stdin/stdout/stderr must be 'pipe', 'null' or 'inherit'"); /* a closed 0-2 gets reused */
	luaL_argcheck(L, modes[FD3] == MODE_PIPE || modes[FD3] == MODE_SOCKET || modes[FD3] == MODE_NONE, 1,
		      "opts.fd3 must be 'pipe', 'socket' or nil");

	process *p = lua_newuserdatauv(L, sizeof *p, 0);
	memset(p, 0, sizeof *p);
	for (int i = 0; i < NSTD; i++)
		p->fd[i] = -1;
	p->pidfd = -1;
	luaL_setmetatable(L, PROCESS_MT);

	int child_fd[NSTD] = {-1, -1, -1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	const char *failed = NULL;
	int err = 0;
	for (int i = 0; i < NSTD && !failed; i++) {
		if (modes[i] == MODE_PIPE) {
			int pp[2];
			if (pipe2(pp, O_CLOEXEC) < 0) {
				failed = "pipe";
				err = errno;
				break;
			}
			/* The parent's end is non-blocking: the loop polls it. */
			p->fd[i] = i == IN ? pp[1] : pp[0];
			child_fd[i] = i == IN ? pp[0] : pp[1];
			fcntl(p->fd[i], F_SETFL, fcntl(p->fd[i], F_GETFL) | O_NONBLOCK);
			posix_spawn_file_actions_adddup2(&fa, child_fd[i], i);
		} else if (modes[i] == MODE_SOCKET) {
			int sp[2];
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
				failed = "socketpair";
				err = errno;
				break;
			}
			p->fd[i] = sp[0];
			child_fd[i] = sp[1];
			fcntl(p->fd[i], F_SETFL, fcntl(p->fd[i], F_GETFL) | O_NONBLOCK);
			/* What our end may have in flight (a unix stream's sender is bounded by its own send
			 * buffer): the default 208 KiB made a 100 MB upload to glsb-confine 500 writes and wake-ups;
			 * 4 MiB (net.core.wmem_max caps it), 25. Best effort. */
			int sndbuf = 4 << 20;
			setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
			posix_spawn_file_actions_adddup2(&fa, child_fd[i], i);
		} else if (modes[i] == MODE_NULL) {
			posix_spawn_file_actions_addopen(&fa, i, "/dev/null", i == IN ? O_RDONLY : O_WRONLY, 0);
		}
	}

	/* Nothing else of ours reaches the child: files Lua opened with io.open are not close-on-exec. */
	posix_spawn_file_actions_addclosefrom_np(&fa, modes[FD3] != MODE_NONE ? 4 : 3);
	if (cwd)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	sigset_t mask, defaults;
	sigemptyset(&mask);
	sigfillset(&defaults);
	sigdelset(&defaults, SIGKILL);
	sigdelset(&defaults, SIGSTOP);
	short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
	if (setsid_flag)
		flags |= POSIX_SPAWN_SETSID;
	posix_spawnattr_setsigmask(&attr, &mask);
	posix_spawnattr_setsigdefault(&attr, &defaults);
	posix_spawnattr_setflags(&attr, flags);

	if (!failed) {
		err = posix_spawnp(&p->pid, argv[0], &fa, &attr, argv, envp);
		if (err) {
			failed = "spawn";
			p->pid = 0;
		}
	}
	p->fd3_socket = modes[FD3] == MODE_SOCKET;
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	for (int i = 0; i < NSTD; i++)
		close_fd(&child_fd[i]);
	if (failed) {
		release(p);
		return glsb_push_errno(L, failed, argv[0], err);
	}
	/* A child's exit reaches the loop as a source of its own: its pidfd, watched until it is reaped. */
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (p->pidfd >= 0) {
		fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
		p->exit_src.token = glsb_loop_token();
		p->exit_src.done = exit_ready;
		p->exit_watched = glsb_loop_add_fd(&p->exit_src, p->pidfd, POLLIN) == 0;
		if (!p->exit_watched)
			p->exit_src.token = 0; /* out of memory: no exit token, callers poll */
	}
	return 1;
}

static int which_fd(lua_State *L, int arg)
{
	return luaL_checkoption(L, arg, NULL, std_names);
}

static int l_fd(lua_State *L)
{
	process *p = check_process(L);
	int w = which_fd(L, 2);
	int fd = w == NSTD ? p->pidfd : p->fd[w];
	if (fd < 0)
		return 0;
	lua_pushinteger(L, fd);
	return 1;
}

/* nil, "<name> is closed", EBADF: the fd was closed already (by close_fd, close, or a teardown). */
static int push_closed(lua_State *L, int w)
{
	lua_pushnil(L);
	lua_pushfstring(L, "%s is closed", std_names[w]);
	lua_pushstring(L, glsb_errno_code(EBADF));
	return 3;
}

/* One read of fd `w`: fd3 as a socket by recvmsg, keeping any descriptor that came with the bytes. */
static ssize_t read_some(process *p, int w, char *buf, size_t max)
{
	if (w != FD3 || !p->fd3_socket)
		return read(p->fd[w], buf, max);
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(PASSED_MAX * sizeof(int))];
	} ctl;
	struct iovec iov = {buf, max};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	ssize_t n = recvmsg(p->fd[w], &msg, MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (p->npassed < PASSED_MAX)
				p->passed[p->npassed++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

/* take_fd() -> the oldest descriptor that came on fd3 (the caller's to close), or nil. */
static int l_take_fd(lua_State *L)
{
	process *p = check_process(L);
	if (p->npassed == 0)
		return 0;
	int fd = p->passed[0];
	memmove(p->passed, p->passed + 1, (size_t)(p->npassed - 1) * sizeof p->passed[0]);
	p->npassed--;
	lua_pushinteger(L, fd);
	return 1;
}

/* read(which[, max[, buffer]]) -> up to max bytes (default 64 KiB) as a string, "" at end of file; with a
 * buffer (buffer.c), they are appended to it instead (at most its room) and the count is returned, 0 at
 * end of file. */
static int l_read(lua_State *L)
{
	process *p = check_process(L);
	int w = which_fd(L, 2);
	size_t max = (size_t)luaL_optinteger(L, 3, 65536);
	luaL_argcheck(L, w == OUT || w == ERR || w == FD3, 2, "read from stdout, stderr or fd3");
	luaL_argcheck(L, max > 0, 3, "max must be > 0");
	struct glsb_buffer *into = lua_isnoneornil(L, 4) ? NULL : glsb_check_buffer(L, 4);
	luaL_argcheck(L, !into || into->len < into->cap, 4, "the buffer is full");
	if (p->fd[w] < 0)
		return push_closed(L, w);
	if (into) {
		size_t room = into->cap - into->len;
		ssize_t n;
		do
			n = read_some(p, w, into->data + into->len, max < room ? max : room);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return glsb_push_errno(L, "read", std_names[w], errno);
		into->len += (size_t)n;
		lua_pushinteger(L, n);
		return 1;
	}
	luaL_Buffer b;
	char *buf = luaL_buffinitsize(L, &b, max);
	ssize_t n;
	do
		n = read_some(p, w, buf, max);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return glsb_push_errno(L, "read", std_names[w], errno);
	luaL_pushresultsize(&b, (size_t)n);
	return 1;
}

/* write(data[, which[, from]]) -> bytes written: data from byte `from` on (1-based, default 1; a
 * caller that writes a large string in several calls passes where it is instead of slicing it), to
 * stdin (default), or to fd3 when it is a socket. */
static int l_write(lua_State *L)
{
	process *p = check_process(L);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	int w = lua_isnoneornil(L, 3) ? IN : which_fd(L, 3);
	lua_Integer from = luaL_optinteger(L, 4, 1);
	luaL_argcheck(L, from >= 1 && (size_t)from <= len + 1, 4, "from must be in 1..#data+1");
	data += from - 1;
	len -= (size_t)(from - 1);
	luaL_argcheck(L, w == IN || (w == FD3 && p->fd3_socket), 3, "write to stdin, or to fd3 when it is a socket");
	if (p->fd[w] < 0)
		return push_closed(L, w);
	ssize_t n;
	do
		n = write(p->fd[w], data, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return glsb_push_errno(L, "write", std_names[w], errno);
	lua_pushinteger(L, n);
	return 1;
}

static int l_close_fd(lua_State *L)
{
	process *p = check_process(L);
	int w = which_fd(L, 2);
	luaL_argcheck(L, w < NSTD, 2, "close stdin, stdout, stderr or fd3");
	close_fd(&p->fd[w]);
	return 0;
}

static const char *const signal_names[] = {"KILL", "TERM", "INT", "HUP", "QUIT", "USR1", "USR2", "CONT", "STOP",
					    NULL};
static const int signal_nums[] = {SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGSTOP};

static int check_signal(lua_State *L, int arg)
{
	if (lua_type(L, arg) == LUA_TNUMBER)
		return (int)lua_tointeger(L, arg);
	return signal_nums[luaL_checkoption(L, arg, "KILL", signal_names)];
}

static int l_kill(lua_State *L)
{
	process *p = check_process(L);
	int sig = check_signal(L, 2);
	int group = lua_toboolean(L, 3);
	if (p->reaped || p->pid <= 0)
		return glsb_push_errno(L, "kill", "the process was already reaped", ESRCH);
	int rc = group ? kill(-p->pid, sig) : (p->pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0)
							   : kill(p->pid, sig));
	if (rc != 0)
		return glsb_push_errno(L, "kill", group ? "process group" : "process", errno);
	lua_pushboolean(L, 1);
	return 1;
}

/* Field 22 of /proc/<pid>/stat (the start time, clock ticks since boot), or -1 when there is no such
 * process or it is a zombie. The command name may hold spaces and ')': the fields start after the last. */
static long long start_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	if (!s || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X')
		return -1;
	s += 2;
	for (int field = 3; field < 22; field++) {
		s = strchr(s, ' ');
		if (!s)
			return -1;
		s++;
	}
	return strtoll(s, NULL, 10);
}

/*
 * signal(pid, start, sig) -> true | nil, message, code: sends sig to the process pid only if it is still
 * the one that started at `start` (clock ticks since boot, as /proc/<pid>/stat says), never to another
 * that got its pid since. The pidfd is opened first: the process checked afterwards is the one it names
 * (a process alive at both moments held the pid in between), so the check and the signal cannot race.
 */
static int l_signal(lua_State *L)
{
	pid_t pid = (pid_t)luaL_checkinteger(L, 1);
	long long start = (long long)luaL_checkinteger(L, 2);
	int sig = check_signal(L, 3);
	luaL_argcheck(L, pid > 0, 1, "pid must be > 0");
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return glsb_push_errno(L, "signal", "pidfd_open", errno);
	if (start_ticks(pid) != start) {
		close(pidfd);
		return glsb_push_errno(L, "signal", "not the process that started then", ESRCH);
	}
	int rc = (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
	int err = errno;
	close(pidfd);
	if (rc != 0)
		return glsb_push_errno(L, "signal", "pidfd_send_signal", err);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_poll(lua_State *L)
{
	process *p = check_process(L);
	if (!try_reap(p, WNOHANG))
		return 0;
	lua_createtable(L, 0, 1);
	lua_pushinteger(L, p->sig ? p->sig : p->code);
	lua_setfield(L, -2, p->sig ? "signal" : "code");
	return 1;
}

static int l_close(lua_State *L)
{
	release(check_process(L));
	return 0;
}

static int l_index(lua_State *L)
{
	process *p = check_process(L);
	const char *k = luaL_checkstring(L, 2);
	if (!strcmp(k, "pid")) {
		lua_pushinteger(L, p->pid);
		return 1;
	}
	if (!strcmp(k, "exit_token")) {
		/* nil without a pidfd (kernel before 5.3, valgrind): then poll() is the only way to know */
		if (p->exit_src.token == 0)
			return 0;
		lua_pushinteger(L, (lua_Integer)p->exit_src.token);
		return 1;
	}
	return glsb_method(L, PROCESS_MT, k);
}

void glsb_open_process(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"fd", l_fd}, {"read", l_read}, {"write", l_write}, {"close_fd", l_close_fd}, {"take_fd", l_take_fd},
		{"kill", l_kill}, {"poll", l_poll}, {"close", l_close}, {NULL, NULL},
	};
	/* A write to a pipe whose reader died must come back as EPIPE, not kill the host process. */
	struct sigaction sa;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
		signal(SIGPIPE, SIG_IGN);
	glsb_new_class(L, PROCESS_MT, methods, l_index, l_close);
	lua_pushcfunction(L, l_spawn);
	lua_setfield(L, -2, "spawn");
	lua_pushcfunction(L, l_signal);
	lua_setfield(L, -2, "signal");
}
