/* sb_call.c: the confined child of a control-channel call (CONTROL.md): forked by the
 * supervisor into the sandbox's cgroup and namespaces, it becomes the sandbox user under the
 * sandbox's limits, seccomp filter and a Landlock domain of its own (so the code in the sandbox
 * can neither signal, trace nor read it), then runs `glsb-confine write|run|read|pack` in-process. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "sb.h"
#include "proc.h"
#include "text.h"

extern char **environ;

static const struct {
	const char *name;
	int (*fn)(int, char **);
} commands[] = {
	{"write", glsb_cmd_write},
	{"run", glsb_cmd_run},
	{"read", glsb_cmd_read},
	{"serve", glsb_cmd_serve}, /* the file server: the supervisor's own (sb_control.c), no call's */
	{"pack", glsb_cmd_pack},
};

const char *const glsb_sb_ns_fd_names[SB_NS_FDS] = {"user", "mnt", "ipc", "uts", "net", "pid"};

int glsb_sb_call_open_namespaces(struct sb *sb, pid_t pid, char *err, size_t errcap)
{
	static const int flags[SB_NS_FDS] = {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUTS,
					     CLONE_NEWNET, CLONE_NEWPID};
	char path[64];
	for (int i = 0; i < SB_NS_FDS; i++) {
		if (!(sb->clone_flags & flags[i]))
			continue; /* none of its own (refused, --allow-degraded): nothing to join */
		glsb_fmt(path, sizeof path, "/proc/%d/ns/%s", (int)pid, glsb_sb_ns_fd_names[i]);
		sb->ns_fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (sb->ns_fds[i] < 0) {
			glsb_fmt(err, errcap, "opening %s: %s", path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

void glsb_sb_call_close_namespaces(struct sb *sb)
{
	for (int i = 0; i < SB_NS_FDS; i++) {
		if (sb->ns_fds[i] >= 0)
			close(sb->ns_fds[i]);
		sb->ns_fds[i] = -1;
	}
}

int glsb_sb_call_allowed(const char *command)
{
	if (!strcmp(command, "serve"))
		return 0;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(command, commands[i].name))
			return 1;
	return 0;
}

/* The first child stays outside the pid namespace: it passes SIGTERM (a cancel) on to the
 * helper, and ends as the helper ended (SIGKILL to it kills the helper: PDEATHSIG). */
__attribute__((noreturn)) static void relay_status(pid_t helper)
{
	sigset_t set; /* both blocked since before the fork: none can be lost */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGCHLD);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL), st;
		if (sig == SIGTERM)
			kill(helper, SIGTERM);
		if (waitpid(helper, &st, WNOHANG) != helper)
			continue;
		if (WIFEXITED(st))
			_exit(WEXITSTATUS(st));
		signal(WTERMSIG(st), SIG_DFL);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		/* Not raise(): we are a raw clone() of the supervisor, and glibc's raise() signals the
		 * thread id it cached, which is still the supervisor's (it got the helper's SIGTERM
		 * and passed it on to PROGRAM, or died of its SIGXFSZ or SIGKILL). */
		kill(getpid(), WTERMSIG(st));
		_exit(128 + WTERMSIG(st));
	}
}

__attribute__((noreturn)) static void call_child(struct sb *sb, int argc, char **argv, int fds[3],
						  int born)
{
	sigset_t term;
	char why[256];

	/* Failures from here go to stderr, which the supervisor relays; never to the report. */
	sb->opt.report_fd = -1;
	sb->status_wr = -1;
	for (int sig = 1; sig < 65; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	/* SIGTERM (a cancel) stays pending until someone is ready for it: relay_status, then `run`,
	 * which takes it in its own loop (the other commands get it unblocked just before). */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigset_t held = term; /* and SIGCHLD, for relay_status's sigwaitinfo */
	sigaddset(&held, SIGCHLD);
	sigprocmask(SIG_SETMASK, &held, NULL);
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			_exit(EXIT_SETUP);
	glsb_sb_cgroup_forget_locks(&sb->cgroup); /* the supervisor's: it owns the leaves */
	/* The sandbox's limits first: born in its leaf (v2), or moving ourselves (v1), or moved
	 * while our host credentials still may. */
	if (sb->have_cgroup && !born &&
	    (sb->cgroup.tasks_fds[0] >= 0 ? glsb_sb_cgroup_join_self(&sb->cgroup)
					  : glsb_sb_cgroup_attach(&sb->cgroup, getpid())) < 0)
		glsb_sb_child_fail(sb, "call: joining the sandbox's cgroup: %s", strerror(errno));
	/* The user namespace first: the others are then checked against our capabilities in it.
	 * The descriptors were opened by the supervisor when it created the sandbox (the
	 * sandbox's init is not dumpable: its /proc/PID/ns cannot be opened now). The cgroup
	 * namespace is a new one, rooted at the sandbox's leaf like the sandbox's own. */
	for (int i = 0; i < SB_NS_FDS; i++)
		if (sb->ns_fds[i] >= 0 && setns(sb->ns_fds[i], 0) < 0)
			glsb_sb_child_fail(sb, "call: joining the sandbox's %s namespace: %s",
					   glsb_sb_ns_fd_names[i], strerror(errno));
	if (unshare(CLONE_NEWCGROUP) < 0 && errno != EINVAL)
		glsb_sb_child_fail(sb, "call: cgroup namespace: %s", strerror(errno));
	if (glsb_sys_close_range(3, ~0U, 0) < 0)
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* What the sandbox's /proc shows of the helper from its first instant: not the host's
	 * command line or environment (ours are the supervisor's). Copy what is still needed. */
	struct glsb_sb_ll_path extra[64];
	for (int i = 0; i < sb->opt.nbinds; i++)
		extra[i] = (struct glsb_sb_ll_path){strdup(sb->opt.binds[i].dst),
						     sb->opt.binds[i].rw ? GLSB_LL_RW : GLSB_LL_RX};
	environ = glsb_dup_strings(glsb_sb_program_env(sb));
	glsb_hide_process_text("glsb-confine");
	/* The pid namespace is entered by children only: the helper runs in one. */
	pid_t helper = fork();
	if (helper < 0)
		glsb_sb_child_fail(sb, "call: fork into the sandbox: %s", strerror(errno));
	if (helper > 0)
		relay_status(helper);
	/* In the sandbox's pid namespace; our parent is outside it, so its pid is 0 to us. Were
	 * it gone before PDEATHSIG was set, init would have adopted us (pid 1). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != 0)
		_exit(EXIT_SETUP);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &chld, NULL);
	glsb_sb_apply_rlimits(sb);
	glsb_sb_drop_privileges(sb);
	if (chdir(SANDBOX_HOME) < 0)
		glsb_sb_child_fail(sb, "call: chdir %s: %s", SANDBOX_HOME, strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		glsb_sb_child_fail(sb, "call: no_new_privs: %s", strerror(errno));
	/* A domain of our own, not nested in the sandbox's: its processes cannot reach us. The
	 * calls need what the sandbox needs: fail closed where the sandbox ran degraded. */
	int abi = glsb_sb_landlock_abi();
	if (abi <= 0)
		glsb_sb_child_fail(sb, "call: Landlock unavailable: %s", strerror(errno));
	for (int i = 0; i < sb->opt.nbinds; i++)
		if (!extra[i].path)
			glsb_sb_child_fail(sb, "call: out of memory");
	if (glsb_sb_landlock_sandbox(abi, extra, sb->opt.nbinds, why, sizeof why) < 0)
		glsb_sb_child_fail(sb, "call: %s", why);
	if (glsb_sb_seccomp_install() < 0)
		glsb_sb_child_fail(sb, "call: seccomp filter: %s", strerror(errno));
	setsid();
	if (strcmp(argv[0], "run"))
		sigprocmask(SIG_UNBLOCK, &term, NULL);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[0], commands[i].name)) {
			int rc = commands[i].fn(argc, argv);
			fflush(stdout);
			_exit(rc);
		}
	_exit(2);
}

pid_t glsb_sb_call_start(struct sb *sb, int argc, char **argv, int fds[3], char *err, size_t errcap)
{
	int born = 0;
	pid_t pid = (pid_t)glsb_sb_cgroup_clone(&sb->cgroup, 0, &born);
	if (pid == 0)
		call_child(sb, argc, argv, fds, born);
	if (pid < 0)
		glsb_fmt(err, errcap, "%s", errno == ENOMEM ? "the sandbox has ended" : strerror(errno));
	return pid;
}
