/* sandbox.c: `glsb-confine sandbox`: run PROGRAM in fresh namespaces on a private read-only
 * root, with Landlock, seccomp, no capabilities, rlimits and cgroup limits, under a small
 * supervisor that outlives it, reports what was applied and cleans up. This file is the list
 * of steps (the supervisor's, then the child's); each step lives with its concern (sb.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "sb.h"
#include "proc.h"
#include "text.h"

/* Wait for the supervisor's next go-ahead on the sync pipe ('1' ids mapped, '2' cgroup joined). */
static void wait_for_supervisor(struct sb *sb)
{
	char ok;
	if (read(sb->sync_rd, &ok, 1) != 1)
		_exit(EXIT_SETUP);
}

/* Landlock, then seccomp; each required unless --allow-degraded (then listed as missing). */
static void confine_self(struct sb *sb, struct sb_applied *a)
{
	char why[256];

	a->nnp = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
	if (!a->nnp) {
		glsb_sb_add_missing(sb, "no_new_privs", 1);
		if (!sb->opt.degraded)
			glsb_sb_child_fail(sb, "no_new_privs: %s", strerror(errno));
	}

	int abi = glsb_sb_landlock_abi();
	if (abi > 0 && a->nnp) {
		struct glsb_sb_ll_path extra[64];
		for (int i = 0; i < sb->opt.nbinds; i++)
			extra[i] = (struct glsb_sb_ll_path){sb->opt.binds[i].dst,
							     sb->opt.binds[i].rw ? GLSB_LL_RW : GLSB_LL_RX};
		if (glsb_sb_landlock_sandbox(abi, extra, sb->opt.nbinds, why, sizeof why) < 0)
			glsb_sb_child_fail(sb, "%s", why);
		a->landlock_abi = abi;
	} else {
		glsb_sb_add_missing(sb, "landlock", 1);
		if (!sb->opt.degraded)
			glsb_sb_child_fail(sb, "Landlock unavailable: %s",
					   abi > 0 ? "needs no_new_privs" : strerror(errno));
	}

	a->seccomp = a->nnp && glsb_sb_seccomp_install() == 0;
	if (!a->seccomp) {
		glsb_sb_add_missing(sb, "seccomp", 1);
		if (!sb->opt.degraded)
			glsb_sb_child_fail(sb, "seccomp filter unavailable: %s",
					   a->nnp ? strerror(errno) : "needs no_new_privs");
	}
}

/* The child of clone: PID 1 of the new pid namespace. Each step exits through
 * glsb_sb_child_fail (the 'E' report) when it cannot do its part. */
__attribute__((noreturn)) static void child_main(struct sb *sb)
{
	struct sb_applied a = {0};
	sigset_t none;

	/* Dies with the supervisor. Cleared by credential changes, so set again at each. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	wait_for_supervisor(sb); /* '1': our id maps are written */
	/* A session of its own: no controlling terminal, no job control over the caller's. */
	setsid();

	char err[600];
	if (!sb->detached_sources && glsb_sb_open_mount_sources(sb, err, sizeof err) < 0)
		glsb_sb_child_fail(sb, "%s", err);
	glsb_sb_become_userns_root(sb);
	glsb_sb_build_root(sb);
	glsb_sb_setup_uts_net(sb);
	/* The network's rules, while slirp4netns brings tap0 up (they name it, need it not): loaded
	 * before anything of PROGRAM's runs, while we still have the capability. */
	glsb_sb_net_apply(sb);
	/* A time namespace can only be entered by children: PROGRAM will be in it. */
	a.timens = unshare(CLONE_NEWTIME) == 0;
	if (!a.timens)
		glsb_sb_add_missing(sb, "timens", 0);

	/* In the cgroup before anything big is allocated or forked: born there, put there by the
	 * supervisor, or (v1) moving ourselves now. */
	wait_for_supervisor(sb); /* '2': the supervisor is done with our cgroup */
	if (glsb_sb_cgroup_join_self(&sb->cgroup) < 0)
		glsb_sb_child_fail(sb, "joining the cgroup: %s", strerror(errno));
	glsb_sb_cgroup_close_join(&sb->cgroup);
	/* Entered now, the namespace's root is our own leaf: /proc/self/cgroup shows "/". */
	a.cgroupns = unshare(CLONE_NEWCGROUP) == 0;
	if (!a.cgroupns)
		glsb_sb_add_missing(sb, "cgroupns", 0);

	a.fsize_mb = glsb_sb_apply_rlimits(sb);
	glsb_sb_drop_privileges(sb);
	/* If the supervisor died before PDEATHSIG was set again, nothing would kill us: check. */
	struct pollfd p = {sb->sync_rd, POLLIN, 0};
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
		_exit(EXIT_SETUP);
	if (chdir(SANDBOX_HOME) < 0)
		glsb_sb_child_fail(sb, "chdir %s: %s", SANDBOX_HOME, strerror(errno));

	confine_self(sb, &a);

	char **envp = glsb_sb_program_env(sb);
	const char *path = NULL;
	for (int i = 0; envp[i]; i++)
		if (!strncmp(envp[i], "PATH=", 5))
			path = envp[i] + 5;
	static char prog[PATH_MAX];
	if (glsb_find_program(AT_FDCWD, sb->opt.argv[0], path, prog, sizeof prog) < 0 ||
	    access(prog, X_OK) < 0)
		glsb_sb_child_fail(sb, "program %s: %s", sb->opt.argv[0], strerror(errno));

	glsb_sb_report_applied(sb, &a);
	close(sb->sync_rd); /* status_wr stays: init reports PROGRAM's raw wait status on it */
	/* PID 1's /proc/1/cmdline and environ are the supervisor's (host paths, the host's
	 * environment): keep copies of what PROGRAM needs, then blank them. */
	sb->opt.argv = glsb_dup_strings(sb->opt.argv);
	envp = glsb_dup_strings(envp);
	glsb_hide_process_text("glsb-confine");
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* and its memory is nobody's business in the sandbox */
	glsb_sb_run_init(sb, prog, envp);
}

/* Block the signals the supervisor takes through its signalfd. */
static void block_signals(sigset_t *sigs, sigset_t *oldmask)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGCHLD);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGHUP);
	sigaddset(sigs, SIGQUIT);
	sigset_t blocked = *sigs;
	sigaddset(&blocked, SIGPIPE); /* a vanished reader is an EPIPE, not our death */
	sigprocmask(SIG_BLOCK, &blocked, oldmask);
}

static int send_go(int fd, const char *what, char *err, size_t errcap)
{
	if (write(fd, what, 1) == 1)
		return 0;
	glsb_fmt(err, errcap, "sync: %s", strerror(errno));
	return -1;
}

int glsb_cmd_sandbox(int argc, char **argv)
{
	static struct sb sb_state; /* large (the mount plan): not on the stack */
	struct sb *sb = &sb_state;
	char err[1024];

	int rc = glsb_sb_parse_options(sb, argc, argv);
	if (rc >= 0) {
		free(sb->config_words);
		free(sb->config_argv);
		return rc;
	}
	sb->sup_sfd = sb->status_wr = sb->sync_rd = sb->id_lock_fd = -1;
	sb->net.pid = -1;
	sb->net.exit_fd = -1;
	for (int i = 0; i < SB_NS_FDS; i++)
		sb->ns_fds[i] = -1;
	sb->id_slot = -1;
	sb->root_mode = geteuid() == 0;

	/* The supervisor dies with its owner too, but gets to clean up: SIGHUP, handled below.
	 * If the owner is already gone, the signal will never come: stop here. */
	sb->owner = getppid();
	prctl(PR_SET_PDEATHSIG, SIGHUP);
	if (getppid() != sb->owner || sb->owner == 1)
		return EXIT_SETUP;
	/* Pipes and the report must not land on 0-2 if a caller closed them. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return EXIT_SETUP;

	sigset_t sigs, oldmask;
	block_signals(&sigs, &oldmask);

	int pipes[2][2] = {{-1, -1}, {-1, -1}}, exit_code = EXIT_SETUP;
	pid_t pid = -1;
	char name[64];

	if (sb->root_mode && !sb->opt.id_base_given && glsb_sb_claim_id_slot(sb, err, sizeof err) < 0)
		goto fail;
	sb->host_uid = sb->root_mode ? sb->opt.id_base + SANDBOX_UID : (long)getuid();
	sb->host_gid = sb->root_mode ? sb->opt.id_base + SANDBOX_UID : (long)getgid();
	if (glsb_sb_control_open(sb, err, sizeof err) < 0)
		goto fail;
	if (glsb_sb_prepare_workspace(sb, err, sizeof err) < 0 ||
	    glsb_sb_net_prepare(sb, err, sizeof err) < 0 ||
	    glsb_sb_plan_mounts(sb, err, sizeof err) < 0)
		goto fail;
	/* As root, the child is created with the sandbox's own host ids (see start_child), which
	 * cannot reach what root can: open the sources for it. */
	sb->detached_sources = sb->root_mode;
	if (sb->detached_sources && glsb_sb_open_mount_sources(sb, err, sizeof err) < 0)
		goto fail;
	if (sb->root_mode)
		glsb_sb_give_stdio(sb);
	glsb_fmt(name, sizeof name, "sb-%d-%ld", (int)getpid(), (long)time(NULL));
	struct glsb_sb_limits lim = {.memory_mb = sb->opt.memory_mb, .pids = sb->opt.nproc,
				     .cpu_quota_us = (long)(sb->opt.cpus * 100000 + 0.5),
				     .cpu_period_us = 100000};
	sb->oom_kills_at_start = -1;
	if (glsb_sb_cgroup_create(&sb->cgroup, name, &lim) == 0) {
		sb->have_cgroup = 1;
		sb->oom_kills_at_start = 0; /* a new leaf: the kernel's counter starts at 0 */
		if (lim.cpu_quota_us > 0 && !sb->cgroup.cpu)
			glsb_sb_add_missing(sb, "cgroup_cpu", 0);
		if (!sb->cgroup.sockets)
			glsb_sb_add_missing(sb, "cgroup_sockets", 0);
		if (glsb_sb_cgroup_prepare_join(&sb->cgroup) < 0) {
			glsb_fmt(err, sizeof err, "cgroup %s: %s", sb->cgroup.dirs[0], strerror(errno));
			goto fail;
		}
		glsb_sb_cgroup_test_hold();
	} else {
		glsb_sb_add_missing(sb, "cgroup", 0);
	}
	if (pipe2(pipes[0], O_CLOEXEC) < 0 || pipe2(pipes[1], O_CLOEXEC) < 0 ||
	    (sb->sup_sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0) {
		glsb_fmt(err, sizeof err, "pipe/signalfd: %s", strerror(errno));
		goto fail;
	}
	pid = glsb_sb_start_child(sb, pipes, child_main, err, sizeof err);
	if (pid < 0)
		goto fail;
	glsb_sb_plan_close(sb);
	close(pipes[0][0]);
	close(pipes[1][1]);
	pipes[0][0] = pipes[1][1] = -1;

	if ((sb->opt.control_in >= 0 && glsb_sb_call_open_namespaces(sb, pid, err, sizeof err) < 0) ||
	    glsb_sb_write_id_maps(sb, pid, err, sizeof err) < 0 ||
	    send_go(pipes[0][1], "1", err, sizeof err) < 0)
		goto kill_fail;
	/* The child's namespaces are mapped: slirp4netns joins them and brings tap0 up while the child
	 * builds its root and loads the rules; '2' (below) says tap0 is there. */
	if (glsb_sb_net_start(sb, pid, err, sizeof err) < 0)
		goto kill_fail;
	/* Nothing may touch the supervisor (it serves the control channel); not before the maps
	 * are written: the child inherits it, and its /proc files would be root's. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Born in the leaf (v2), or moving itself (v1): nothing to do here. Else (a v2 leaf
	 * clone3 refused) a migration, under the kernel's global lock: while the child builds its
	 * root, which allocates next to nothing. */
	if (sb->have_cgroup && !sb->born_in_cgroup && sb->cgroup.tasks_fds[0] < 0 &&
	    glsb_sb_cgroup_attach(&sb->cgroup, pid) < 0) {
		glsb_fmt(err, sizeof err, "joining cgroup %s: %s", sb->cgroup.dirs[0], strerror(errno));
		goto kill_fail;
	}
	if (send_go(pipes[0][1], "2", err, sizeof err) < 0)
		goto kill_fail;

	exit_code = glsb_sb_supervise(sb, pid, pipes[1][0]);
	pipes[1][0] = -1; /* closed by glsb_sb_supervise */
	goto out;

kill_fail:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
fail:
	glsb_sb_report_failure(sb, err);
	exit_code = EXIT_SETUP;
out:
	glsb_sb_plan_close(sb);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			if (pipes[i][j] >= 0)
				close(pipes[i][j]);
	if (sb->sup_sfd >= 0)
		close(sb->sup_sfd);
	glsb_sb_cleanup(sb);
	if (sb->id_lock_fd >= 0)
		close(sb->id_lock_fd); /* the id range is free again */
	glsb_sb_control_finish(sb);
	glsb_sb_call_close_namespaces(sb);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	free(sb->config_words);
	free(sb->config_argv);
	return exit_code;
}
