/* cgroup.c: per-sandbox limits in a leaf cgroup glsb/<name> below the caller's own cgroup: memory
 * (socket buffers included), pids and a CPU quota. cgroup v2 (cgroup_v2.c) when memory and pids
 * can be enabled there, else the v1 hierarchies (cgroup_v1.c); what both share is in
 * cgroup_leaf.c. This file is what the rest of glsb-confine calls (sbkit.h): it picks the
 * version, and reads the leaf's counters through the files that version names. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup_leaf.h"
#include "cgroup_version.h"
#include "files.h"
#include "text.h"

static const struct glsb_cg_version *version_of(const struct glsb_sb_cgroup *cg)
{
	return cg->version == 2 ? &glsb_cg_v2 : cg->version == 1 ? &glsb_cg_v1 : NULL;
}

int glsb_sb_cgroup_create(struct glsb_sb_cgroup *cg, const char *name,
			  const struct glsb_sb_limits *lim)
{
	char why2[256];

	memset(cg, 0, sizeof *cg);
	cg->mem_idx = -1;
	cg->born_fd = cg->tasks_fds[0] = cg->tasks_fds[1] = cg->tasks_fds[2] = -1;
	cg->lock_fds[0] = cg->lock_fds[1] = cg->lock_fds[2] = -1;
	glsb_cg_read_hooks();
	if (lim->cpu_quota_us <= 0)
		glsb_fmt(cg->cpu_why, sizeof cg->cpu_why, "no CPU quota asked (--cpus 0)");
	if (glsb_cg_v2.create(cg, name, lim) == 0 || glsb_cg_fake_v2_root())
		return cg->version ? 0 : -1;
	glsb_fmt(why2, sizeof why2, "%s", cg->why);
	cg->cpu_why[0] = '\0';
	if (glsb_cg_v1.create(cg, name, lim) == 0)
		return 0;
	cg->version = 0;
	if (!cg->why[0] || strncmp(cg->why, "cgroup v1", 9))
		glsb_fmt(cg->why, sizeof cg->why, "%s; no usable cgroup v1 memory/pids hierarchy", why2);
	return -1;
}

/* The number after "name " on a line of the file, or -1. */
static long long read_counter(const char *dir, const char *file, const char *name)
{
	char p[640], buf[1024];
	size_t nl = strlen(name);

	glsb_fmt(p, sizeof p, "%s/%s", dir, file);
	if (glsb_read_file(p, buf, sizeof buf) < 0)
		return -1;
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, name, nl) && line[nl] == ' ')
			return strtoll(line + nl + 1, NULL, 10);
	return -1;
}

long glsb_sb_cgroup_oom_kills(const struct glsb_sb_cgroup *cg)
{
	const struct glsb_cg_version *v = version_of(cg);
	if (!v || cg->mem_idx < 0)
		return -1;
	/* one "name value" per line; the kernel counts kills as "oom_kill N" in both versions' file */
	return (long)read_counter(cg->dirs[cg->mem_idx], v->oom_file, "oom_kill");
}

static long long read_number(const char *dir, const char *name)
{
	char p[640], buf[64];
	glsb_fmt(p, sizeof p, "%s/%s", dir, name);
	if (glsb_read_file(p, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	return strtoll(buf, NULL, 10);
}

void glsb_sb_cgroup_memory(const struct glsb_sb_cgroup *cg, long long *current, long long *peak)
{
	const struct glsb_cg_version *v = version_of(cg);
	*current = *peak = -1;
	if (!v || cg->mem_idx < 0)
		return;
	*current = read_number(cg->dirs[cg->mem_idx], v->current_file);
	*peak = read_number(cg->dirs[cg->mem_idx], v->peak_file);
}

int glsb_sb_cgroup_prepare_join(struct glsb_sb_cgroup *cg)
{
	const struct glsb_cg_version *v = version_of(cg);
	if (v && v->prepare_join(cg) < 0) {
		int err = errno;
		glsb_sb_cgroup_close_join(cg);
		errno = err;
		return -1;
	}
	return 0;
}

int glsb_sb_cgroup_join_self(const struct glsb_sb_cgroup *cg)
{
	for (int i = 0; i < 3; i++)
		if (cg->tasks_fds[i] >= 0 && write(cg->tasks_fds[i], "0", 1) != 1)
			return -1;
	return 0;
}

void glsb_sb_cgroup_close_join(struct glsb_sb_cgroup *cg)
{
	if (cg->born_fd >= 0)
		close(cg->born_fd);
	cg->born_fd = -1;
	for (int i = 0; i < 3; i++) {
		if (cg->tasks_fds[i] >= 0)
			close(cg->tasks_fds[i]);
		cg->tasks_fds[i] = -1;
	}
}

/* GLSB_CONFINE_TEST_HOLD_CGROUP=DIR (a test hook, spec/confine/cgroup_collect_spec.lua): the
 * sandbox's leaves are created and still empty (its child has not joined them): say so by
 * creating DIR/held, then wait until DIR/go exists (at most 30 s), so that a spec can run a
 * stale collection inside the window between a leaf's creation and the child's join. */
void glsb_sb_cgroup_test_hold(void)
{
	const char *dir = getenv("GLSB_CONFINE_TEST_HOLD_CGROUP");
	char p[600];

	if (!dir || !*dir)
		return;
	glsb_fmt(p, sizeof p, "%s/held", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
	glsb_fmt(p, sizeof p, "%s/go", dir);
	for (int i = 0; i < 3000 && access(p, F_OK) < 0; i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
}

/* struct clone_args of linux/sched.h (5.7: cgroup) */
struct glsb_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

long glsb_sb_cgroup_clone(const struct glsb_sb_cgroup *cg, unsigned long flags, int *born)
{
	*born = 0;
	if (cg->born_fd >= 0) {
		struct glsb_clone_args a;
		memset(&a, 0, sizeof a);
		a.flags = flags | CLONE_INTO_CGROUP;
		a.exit_signal = SIGCHLD;
		a.cgroup = (uint64_t)cg->born_fd;
		long pid = syscall(SYS_clone3, &a, sizeof a);
		if (pid >= 0) {
			*born = 1;
			return pid;
		}
		/* an older kernel, or a leaf clone3 refuses: the plain way (a migration later) */
	}
	return syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

int glsb_sb_cgroup_attach(const struct glsb_sb_cgroup *cg, pid_t pid)
{
	char val[32];

	glsb_fmt(val, sizeof val, "%d", (int)pid);
	for (int i = 0; i < cg->ndirs; i++)
		if (glsb_cg_knob(cg->dirs[i], "cgroup.procs", val) < 0)
			return -1;
	return 0;
}

void glsb_sb_cgroup_remove(struct glsb_sb_cgroup *cg)
{
	glsb_sb_cgroup_close_join(cg);
	glsb_cg_remove_leaves(cg);
}

void glsb_sb_cgroup_describe(struct glsb_jbuf *b)
{
	glsb_cg_v2.describe(b);
	glsb_jbuf_printf(b, ",");
	glsb_cg_v1.describe(b);
}
