/* ws_run.c: `glsb-confine run`, run_workspace_command: an exact argv (no shell)
 * in a cwd resolved beneath the workspace root without following links, with
 * exactly the given environment, a timeout that kills the whole process group,
 * and stdout/stderr captured up to a cap with observed byte counts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "proc.h"
#include "json.h"
#include "ws_result.h"
#include "ws_path.h"
#include "ws_run_args.h"
#include "ws_util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef PR_SET_CHILD_SUBREAPER
#define PR_SET_CHILD_SUBREAPER 36
#endif

/* After the timeout kill, how long a descendant that escaped the process group
 * may keep a pipe open before the counts are declared incomplete. */
#define DRAIN_SECONDS 2.0
#define DEFAULT_PATH "/bin:/usr/bin" /* like Python's os.defpath */

static const char run_usage[] =
	"usage: glsb-confine run --root DIR [--cwd NAME]... [--env KEY=VALUE]... [--env-allow NAME]...\n"
	"                        [--timeout SECONDS] [--max-output BYTES] -- ARGV...\n"
	"\n"
	"Run ARGV exactly (execve, no shell) with its working directory at ROOT/NAME/...\n"
	"(one --cwd per component, each a single name: no '/', '.', '..' or empty name),\n"
	"resolved with openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS;\n"
	"a missing, escaping or linked cwd is an error, never a fallback.\n"
	"The environment is exactly the --env values plus each --env-allow NAME that\n"
	"is set in the helper's own environment (the sandbox's, never the caller's\n"
	"machine; --env wins over it). None by default; PATH is not implied. A non-absolute ARGV[0] without '/' is searched in PATH from --env,\n"
	"else in " DEFAULT_PATH "; one containing '/' is taken relative to the cwd.\n"
	"stdin is empty. The program runs in a new session (its own process group).\n"
	"--timeout: default 30; <= 0 disables. On expiry the process group is killed\n"
	"(SIGKILL) and timed_out is true; pipes still held open by an escaped descendant\n"
	"are drained for 2 more seconds, after which counts are marked incomplete.\n"
	"When the program is done, descendants still alive are killed (the helper is\n"
	"their subreaper). SIGTERM/SIGINT/SIGHUP to the helper kill the group too.\n"
	"--max-output: bytes kept per stream (default 1048576); reading goes on past\n"
	"the cap to count every byte.\n"
	"\n"
	"Output: one JSON line on stdout.\n"
	"  exit 0: {\"ok\":true,\"exit_code\":N|null,\"signal\":N|null,\"timed_out\":BOOL,\n"
	"           \"stdout\":BASE64,\"stdout_byte_count\":N,\"stdout_byte_count_complete\":BOOL,\n"
	"           \"stdout_truncated\":BOOL, the same four for stderr}\n"
	"  exit 1: {\"ok\":false,\"error\":CODE,\"message\":TEXT}\n"
	"CODE: usage, root_invalid, openat2_unavailable, cwd_not_found, symlink, escape,\n"
	"  not_directory, permission_denied, slash_in_name, empty_component, dot_component,\n"
	"  dotdot_component, name_too_long, not_found, exec_failed, interrupted,\n"
	"  out_of_memory, io_error\n";

/* Parse, or print the usage / the error. 0 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct glsb_ws_run_req *rq)
{
	struct glsb_ws_run_err err;
	int rc = glsb_ws_run_parse(argc, argv, environ, rq, &err);
	if (rc == 1) {
		fputs(run_usage, stdout);
		return -1;
	}
	if (rc < 0)
		return glsb_ws_fail(err.code, "%s", err.message);
	return 0;
}

/* Resolve ROOT/cwd... without following any link; returns an O_PATH fd or -1. */
static int open_cwd(const struct glsb_ws_run_req *rq)
{
	int root = open(rq->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		glsb_ws_fail("root_invalid", "cannot open the root directory '%s': %s", rq->root, strerror(errno));
		return -1;
	}
	int cur = glsb_ws_openat2(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, GLSB_WS_RESOLVE);
	if (cur < 0) {
		int e = errno;
		close(root);
		if (e == ENOSYS || e == EINVAL || e == E2BIG || e == EPERM)
			glsb_ws_fail("openat2_unavailable", "openat2 with RESOLVE_BENEATH is unavailable (%s); "
				     "refusing to resolve the cwd unconfined", strerror(e));
		else
			glsb_ws_fail("root_invalid", "cannot resolve the root: %s", strerror(e));
		return -1;
	}
	close(root);
	for (size_t i = 0; i < rq->ncwd; i++) {
		int next = glsb_ws_openat2(cur, rq->cwd[i], O_PATH | O_DIRECTORY | O_CLOEXEC, 0, GLSB_WS_RESOLVE);
		if (next < 0) {
			int e = errno;
			close(cur);
			const char *code = e == ENOENT ? "cwd_not_found" : glsb_ws_lookup_code(e);
			if (e == ELOOP)
				glsb_ws_fail(code, "cwd component '%s' is a symlink or magic link (never followed)",
					     rq->cwd[i]);
			else
				glsb_ws_fail(code, "cwd component '%s': %s", rq->cwd[i], strerror(e));
			return -1;
		}
		close(cur);
		cur = next;
	}
	return cur;
}

static const char *env_get(char **env, const char *key)
{
	size_t kl = strlen(key);
	for (; *env; env++)
		if (!strncmp(*env, key, kl) && (*env)[kl] == '=')
			return *env + kl + 1;
	return NULL;
}

/* Find the program like execvp would, with PATH from the command's own
 * environment (or DEFAULT_PATH); relative entries are relative to the cwd.
 * Returns a malloc'd path (relative ones resolve after the child's fchdir). */
static char *find_program(const char *name, char **env, int cwdfd)
{
	const char *path = env_get(env, "PATH");
	int from_env = path != NULL;
	char found[PATH_MAX];
	if (!path)
		path = DEFAULT_PATH;
	if (glsb_find_program(cwdfd, name, path, found, sizeof found) < 0) {
		if (strchr(name, '/'))
			glsb_ws_fail("not_found", "program '%s' not found: %s", name, strerror(errno));
		else
			glsb_ws_fail("not_found", "program '%s' not found in %s PATH '%s'", name,
				     from_env ? "the given" : "the default", path);
		return NULL;
	}
	char *p = strdup(found);
	if (!p)
		glsb_ws_fail("out_of_memory", "finding '%s'", name);
	return p;
}

/* Keep the pipe ends off fds 0-2 so the child's dup2 never clobbers them. */
static int high_fd(int fd)
{
	if (fd > 2)
		return fd;
	int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return n;
}

static int make_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	p[0] = high_fd(p[0]);
	p[1] = high_fd(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		if (p[0] >= 0)
			close(p[0]);
		if (p[1] >= 0)
			close(p[1]);
		return -1;
	}
	return 0;
}

/* Inherited descriptors must not reach the program: mark 3.. close-on-exec. */
static void cloexec_inherited(void)
{
	if (glsb_sys_close_range(3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = 3; fd < max; fd++) {
		int fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct capture {
	int fd;
	unsigned char *buf;
	size_t len, cap, limit;
	unsigned long long count;
	int oom;
};

/* Read what is available; 1 at EOF (fd closed), 0 otherwise. */
static int drain(struct capture *c)
{
	unsigned char chunk[65536];
	for (;;) {
		ssize_t r = read(c->fd, chunk, sizeof chunk);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			r = 0; /* a read error ends the stream like EOF */
		}
		if (r == 0) {
			close(c->fd);
			c->fd = -1;
			return 1;
		}
		c->count += (unsigned long long)r;
		size_t keep = c->limit - c->len < (size_t)r ? c->limit - c->len : (size_t)r;
		if (keep && c->len + keep > c->cap && !c->oom) {
			size_t ncap = c->cap ? c->cap : 65536;
			while (ncap < c->len + keep)
				ncap *= 2;
			if (ncap > c->limit)
				ncap = c->limit;
			unsigned char *nb = realloc(c->buf, ncap);
			if (!nb)
				c->oom = 1;
			else {
				c->buf = nb;
				c->cap = ncap;
			}
		}
		if (keep && !c->oom) {
			memcpy(c->buf + c->len, chunk, keep);
			c->len += keep;
		}
	}
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

/* Kill every process still our child (escaped descendants reparent to us, the
 * subreaper) and reap them; bounded, best effort without /proc. */
static void kill_leftovers(void)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
	for (int round = 0; round < 50; round++) {
		int any = 0;
		FILE *f = fopen(path, "re");
		if (f) {
			long pid;
			while (fscanf(f, "%ld", &pid) == 1) {
				kill((pid_t)pid, SIGKILL); /* our unreaped child: the pid cannot be reused */
				any = 1;
			}
			fclose(f);
		}
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, any ? 0 : WNOHANG)) > 0)
			any = 1;
		if (!any)
			break;
	}
}

struct spawned {
	pid_t pid;
	struct capture out, err;
};

static int spawn(const struct glsb_ws_run_req *rq, const char *prog, int cwdfd, struct spawned *sp)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	if (make_pipe(in) || make_pipe(out) || make_pipe(err)) {
		int e = errno;
		for (int i = 0; i < 2; i++) {
			if (in[i] >= 0)
				close(in[i]);
			if (out[i] >= 0)
				close(out[i]);
		}
		return glsb_ws_fail("io_error", "creating pipes: %s", strerror(e));
	}
	close(in[1]); /* stdin: empty */
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	sigset_t all, none;
	sigfillset(&all);
	sigemptyset(&none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	posix_spawn_file_actions_addfchdir_np(&fa, cwdfd);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	int r = posix_spawn(&sp->pid, prog, &fa, &at, rq->argv, rq->env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (r != 0) {
		close(out[0]);
		close(err[0]);
		if (r == ENOENT)
			return glsb_ws_fail("not_found", "program '%s' (%s) not found", rq->argv[0], prog);
		return glsb_ws_fail("exec_failed", "cannot execute '%s' (%s): %s", rq->argv[0], prog, strerror(r));
	}
	sp->out.fd = out[0];
	sp->err.fd = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	return 0;
}

/* Wait for the program and both pipes, enforcing the timeout; fills r. */
static void supervise(const struct glsb_ws_run_req *rq, struct spawned *sp, const sigset_t *waitmask,
		      struct glsb_ws_run_result *r)
{
	int pidfd = (int)glsb_sys_pidfd_open(sp->pid, 0);
	int done = 0, status = 0;
	double deadline = rq->timeout > 0 ? now_s() + rq->timeout : 0, drain_until = 0;
	for (;;) {
		if (!done) {
			pid_t w = waitpid(sp->pid, &status, WNOHANG);
			if (w == sp->pid)
				done = 1;
		}
		if (done && sp->out.fd < 0 && sp->err.fd < 0)
			break;
		if (interrupted)
			break; /* the group is killed below; the result is an error anyway */
		double t = now_s(), until = drain_until ? drain_until : deadline;
		if (until && t >= until) {
			if (drain_until)
				break; /* an escaped descendant still holds a pipe */
			r->timed_out = 1;
			kill(-sp->pid, SIGKILL);
			drain_until = t + DRAIN_SECONDS;
			continue;
		}
		struct pollfd pf[3];
		nfds_t n = 0;
		int iout = -1, ierr = -1;
		if (sp->out.fd >= 0)
			iout = (int)n, pf[n++] = (struct pollfd){.fd = sp->out.fd, .events = POLLIN};
		if (sp->err.fd >= 0)
			ierr = (int)n, pf[n++] = (struct pollfd){.fd = sp->err.fd, .events = POLLIN};
		if (!done && pidfd >= 0)
			pf[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		double wait = until ? until - t : -1;
		if (wait > 3600)
			wait = 3600; /* keep the timespec small; the loop comes back */
		if (!done && pidfd < 0 && (wait < 0 || wait > 0.05))
			wait = 0.05; /* no pidfd: notice the exit by polling waitpid */
		struct timespec ts, *tsp = NULL;
		if (wait >= 0) {
			ts.tv_sec = (time_t)wait;
			ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
			tsp = &ts;
		}
		int pr = ppoll(pf, n, tsp, waitmask);
		if (pr < 0)
			continue; /* EINTR: a signal; the loop looks at it */
		if (iout >= 0 && pf[iout].revents)
			drain(&sp->out);
		if (ierr >= 0 && pf[ierr].revents)
			drain(&sp->err);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (!done) {
		kill(-sp->pid, SIGKILL);
		while (waitpid(sp->pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	r->out.complete = sp->out.fd < 0;
	r->err.complete = sp->err.fd < 0;
	if (sp->out.fd >= 0)
		close(sp->out.fd);
	if (sp->err.fd >= 0)
		close(sp->err.fd);
	sp->out.fd = sp->err.fd = -1;
	if (WIFEXITED(status))
		r->exited = 1, r->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		r->signaled = 1, r->signal = WTERMSIG(status);
}

int glsb_cmd_run(int argc, char **argv)
{
	struct glsb_ws_run_req rq = {0};
	struct spawned sp = {.pid = -1, .out = {.fd = -1}, .err = {.fd = -1}};
	char *prog = NULL;
	int cwdfd = -1, rc = parse_args(argc, argv, &rq);
	if (rc) {
		rc = rc < 0 ? 0 : rc; /* -1: --help was printed */
		goto out;
	}
	rc = 1;
	cloexec_inherited();
	cwdfd = open_cwd(&rq);
	if (cwdfd < 0)
		goto out;
	prog = find_program(rq.argv[0], rq.env, cwdfd);
	if (!prog)
		goto out;

	/* Signals that end the helper end the program too: block them, and
	 * let ppoll take them one at a time. */
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGHUP);
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	size_t limit = (size_t)rq.max_output;
	sp.out.limit = sp.err.limit = limit;
	if (spawn(&rq, prog, cwdfd, &sp))
		goto out;
	struct glsb_ws_run_result r = {0};
	supervise(&rq, &sp, &waitmask, &r);
	kill_leftovers();
	if (interrupted) {
		rc = glsb_ws_fail("interrupted", "the helper got signal %d; the command was killed", (int)interrupted);
		goto out;
	}
	if (sp.out.oom || sp.err.oom) {
		rc = glsb_ws_fail("out_of_memory", "cannot keep the captured output");
		goto out;
	}
	r.out.data = sp.out.buf;
	r.out.len = sp.out.len;
	r.out.byte_count = sp.out.count;
	r.out.truncated = sp.out.count > sp.out.len;
	r.err.data = sp.err.buf;
	r.err.len = sp.err.len;
	r.err.byte_count = sp.err.count;
	r.err.truncated = sp.err.count > sp.err.len;
	struct glsb_jbuf b = {0};
	glsb_ws_json_run_result(&b, &r);
	rc = glsb_ws_emit(&b) ? 1 : 0;
	glsb_jbuf_free(&b);
out:
	free(sp.out.buf);
	free(sp.err.buf);
	free(prog);
	if (cwdfd >= 0)
		close(cwdfd);
	glsb_ws_run_req_free(&rq);
	return rc;
}
