/* sb_supervisor.c: the supervisor outside the sandbox: creates the child in its namespaces
 * (finding out which one the kernel refused), waits for its report, forwards signals, and
 * removes what the sandbox leaves (slirp4netns, cgroup, workspace with --cleanup) when it ends. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb.h"
#include "files.h"
#include "text.h"

pid_t glsb_sb_start_child(struct sb *sb, int pipes[2][2], void (*child_main)(struct sb *),
			  char *err, size_t errcap)
{
	/* The cgroup namespace comes later (child_main), once the child is in its own cgroup. */
	int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;

	for (int attempt = 0; attempt < 2; attempt++) {
		sb->clone_flags = flags;
		/* The user namespace is owned by our effective ids at clone, and per-user kernel
		 * counts inside it (inotify instances, user namespaces, ...; ucounts) are charged to
		 * its owner as well: as root, let the sandbox's own host ids own it, so those limits
		 * are per sandbox. Root gets its capabilities back with its euid below. */
		if (sb->root_mode && (setresgid(-1, (gid_t)sb->host_gid, -1) < 0 ||
				      setresuid(-1, (uid_t)sb->host_uid, -1) < 0)) {
			glsb_fmt(err, errcap, "cannot take the sandbox's ids to create it: %s",
				    strerror(errno));
			setresgid(-1, 0, -1);
			return -1;
		}
		/* fork-like clone (no new stack): the child continues here with a copy of memory. */
		long pid = glsb_sb_cgroup_clone(&sb->cgroup, (unsigned long)flags, &sb->born_in_cgroup);
		int clone_errno = errno;
		if (pid != 0 && sb->root_mode && (setresuid(-1, 0, -1) < 0 || setresgid(-1, 0, -1) < 0)) {
			/* cannot happen for root (the saved uid is 0); without our ids nothing works */
			if (pid > 0)
				kill((pid_t)pid, SIGKILL);
			glsb_fmt(err, errcap, "cannot take our ids back: %s", strerror(errno));
			return -1;
		}
		if (pid != 0 && sb->root_mode) {
			/* Changing the euid cleared our parent-death signal: set it again, and if the
			 * owner died meanwhile, act as if the signal had come (it is handled later). */
			prctl(PR_SET_PDEATHSIG, SIGHUP);
			if (getppid() != sb->owner)
				kill(getpid(), SIGHUP);
		}
		if (pid == 0) {
			close(pipes[0][1]);
			close(pipes[1][0]);
			sb->sync_rd = pipes[0][0];
			sb->status_wr = pipes[1][1];
			if (sb->opt.report_fd >= 0)
				close(sb->opt.report_fd);
			if (sb->id_lock_fd >= 0)
				close(sb->id_lock_fd); /* the claim is the supervisor's alone */
			glsb_sb_cgroup_forget_locks(&sb->cgroup); /* and so are the leaves' */
			if (sb->opt.control_in >= 0)
				close(sb->opt.control_in); /* the channel too */
			if (sb->opt.control_out >= 0)
				close(sb->opt.control_out);
			close(sb->sup_sfd);
			child_main(sb);
			_exit(EXIT_SETUP); /* child_main does not return */
		}
		if (pid > 0)
			return (pid_t)pid;
		if (attempt > 0)
			break;
		/* Find out which namespace the kernel refused. */
		int fatal = 0;
		for (int i = 0; i < glsb_sb_namespace_count; i++) {
			const struct glsb_sb_ns *ns = &glsb_sb_namespaces[i];
			if (!(flags & ns->flag) || glsb_sb_probe_ns(ns->flag) == 0)
				continue;
			glsb_sb_add_missing(sb, ns->name, 1);
			if (ns->flag == CLONE_NEWUSER || ns->flag == CLONE_NEWNS ||
			    ns->flag == CLONE_NEWPID || !sb->opt.degraded)
				fatal = 1;
			flags &= ~ns->flag;
		}
		if (fatal || flags == sb->clone_flags) {
			char names[256] = "";
			for (int k = 0; k < glsb_sb_namespace_count; k++) {
				const struct glsb_sb_ns *ns = &glsb_sb_namespaces[k];
				size_t len = strlen(names);
				if (sb->clone_flags & ns->flag & ~flags)
					glsb_fmt(names + len, sizeof names - len, "%s%s",
						    len ? ", " : "", ns->name);
			}
			glsb_fmt(err, errcap, "cannot create namespaces (%s)%s%s",
				    strerror(clone_errno), names[0] ? ": missing " : "", names);
			return -1;
		}
	}
	glsb_fmt(err, errcap, "cannot create namespaces: %s", strerror(errno));
	return -1;
}

/* Act on every complete line the child sent on the status pipe. */
static void handle_status(struct sb *sb, struct glsb_jbuf *msg, pid_t pid)
{
	static char line[16384];
	while (glsb_sb_take_status(msg, line, sizeof line)) {
		if (line[0] == 'X') {
			sb->program_status = atoi(line + 1);
			continue;
		}
		if (line[0] == 'E')
			sb->failed_setup = 1;
		glsb_sb_forward_status(sb, line, pid);
	}
}

int glsb_sb_supervise(struct sb *sb, pid_t pid, int status_fd)
{
	struct glsb_jbuf msg = {0};
	int terms = 0, st = 0, exit_code;
	char err[128];

	sb->program_status = -1;
	for (;;) {
		struct pollfd p[2 + SB_CONTROL_FDS] = {{sb->sup_sfd, POLLIN, 0}, {status_fd, POLLIN, 0}};
		int idx[SB_CONTROL_FDS], np = 2;
		np += glsb_sb_control_pollfds(sb, p + 2, idx);
		for (int i = 0; i < SB_CONTROL_FDS; i++)
			if (idx[i] >= 0)
				idx[i] += 2;
		if (status_fd < 0)
			p[1].fd = -1; /* poll ignores it */
		if (poll(p, (nfds_t)np, glsb_sb_control_timeout_ms()) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (status_fd >= 0 && p[1].revents) {
			if (glsb_sb_read_status(status_fd, &msg)) {
				close(status_fd);
				status_fd = -1;
			}
			handle_status(sb, &msg, pid);
		}
		glsb_sb_control_events(sb, p, idx);
		if (p[0].revents) {
			struct signalfd_siginfo si;
			if (read(sb->sup_sfd, &si, sizeof si) != (ssize_t)sizeof si)
				continue;
			if (si.ssi_signo == SIGCHLD) {
				glsb_sb_control_reap(sb);
				if (waitpid(pid, &st, WNOHANG) == pid)
					break;
			} else if (si.ssi_signo == SIGHUP || terms++ > 0) {
				kill(pid, SIGKILL);
			} else {
				kill(pid, (int)si.ssi_signo);
			}
		}
	}
	if (status_fd >= 0) {
		/* The child is gone: whatever it wrote is in the pipe, then EOF. */
		while (glsb_sb_read_status(status_fd, &msg) == 0)
			;
		close(status_fd);
		handle_status(sb, &msg, pid);
	}
	glsb_sb_control_finish(sb);
	exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (!sb->reported_ok && sb->opt.report_fd >= 0) {
		/* Died before reporting (e.g. killed during set-up). */
		glsb_fmt(err, sizeof err, "sandbox set-up ended early (status %d)", exit_code);
		glsb_sb_report_failure(sb, err);
		exit_code = EXIT_SETUP;
	} else if (sb->reported_ok) {
		glsb_sb_report_exit(sb, st);
	}
	if (sb->failed_setup)
		exit_code = EXIT_SETUP;
	glsb_jbuf_free(&msg);
	glsb_sb_call_close_namespaces(sb);
	return exit_code;
}

void glsb_sb_cleanup(struct sb *sb)
{
	glsb_sb_net_kill(sb); /* the sandbox is gone: nothing is left for slirp4netns to carry */
	if (sb->have_cgroup)
		glsb_sb_cgroup_remove(&sb->cgroup);
	glsb_sb_net_stop(sb); /* reaped (and its socket and log gone) before the workspace goes */
	if (sb->opt.cleanup && sb->ws_real[0] && glsb_remove_tree(sb->ws_real) < 0)
		fprintf(stderr, "glsb-confine sandbox: cleanup of %s incomplete: %s\n", sb->ws_real,
			strerror(errno));
}
