/* cgroup_v1.c: the sandbox's leaves in the v1 hierarchies, one per controller: memory, pids and
 * (with a quota) cpu (Documentation/admin-guide/cgroup-v1/memory.rst, pids.rst, and
 * scheduler/sched-bwc.rst). Files written: memory.limit_in_bytes, memory.memsw.limit_in_bytes
 * (absent without swap accounting), memory.kmem.tcp.limit_in_bytes (v1 keeps socket buffers out of
 * memory.usage_in_bytes: they get their own limit), pids.max, cpu.cfs_period_us then
 * cpu.cfs_quota_us, and each leaf's tasks ("0": the writer joins). Read: memory.oom_control
 * ("oom_kill N"), memory.usage_in_bytes, memory.max_usage_in_bytes. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cgroup_leaf.h"
#include "cgroup_version.h"
#include "text.h"

static void set_cpu_quota(struct glsb_sb_cgroup *cg, const char *dir, const struct glsb_sb_limits *lim)
{
	char val[64];
	glsb_fmt(val, sizeof val, "%ld", lim->cpu_period_us);
	int rc = glsb_cg_knob(dir, "cpu.cfs_period_us", val);
	glsb_fmt(val, sizeof val, "%ld", lim->cpu_quota_us);
	if (rc == 0)
		rc = glsb_cg_knob(dir, "cpu.cfs_quota_us", val);
	if (rc == 0)
		cg->cpu = 1;
	else
		glsb_fmt(cg->cpu_why, sizeof cg->cpu_why, "setting the CPU quota in %s: %s", dir,
			 strerror(errno));
}

static int create(struct glsb_sb_cgroup *cg, const char *name, const struct glsb_sb_limits *lim)
{
	static const char *const ctl[] = {"memory", "pids", "cpu"};
	char base[512], val[32];
	int limited = 0; /* memory or pids */

	cg->version = 1;
	for (int i = 0; i < 3; i++) {
		if (i == 2 && lim->cpu_quota_us <= 0)
			break;
		if (!glsb_cg_own_dir(ctl[i], base, sizeof base)) {
			if (i == 2)
				glsb_fmt(cg->cpu_why, sizeof cg->cpu_why, "no cgroup v1 cpu hierarchy");
			continue;
		}
		char *dir = cg->dirs[cg->ndirs];
		if (glsb_cg_make_leaf(base, name, dir, sizeof cg->dirs[0], &cg->lock_fds[cg->ndirs]) < 0) {
			if (i == 2)
				glsb_fmt(cg->cpu_why, sizeof cg->cpu_why, "cgroup v1: %s/%s: %s", base,
					 glsb_cg_leaves_dir(), strerror(errno));
			continue;
		}
		cg->ndirs++;
		int rc = 0;
		if (i == 0) {
			cg->mem_idx = cg->ndirs - 1;
			glsb_fmt(val, sizeof val, "%ld", lim->memory_mb * 1024 * 1024);
			rc = glsb_cg_knob(dir, "memory.limit_in_bytes", val);
			glsb_cg_knob(dir, "memory.memsw.limit_in_bytes", val); /* absent without swap accounting */
			/* The same size for socket buffers: a TCP/UDP buffer flood stalls on it instead of
			 * the host's memory. */
			if (rc == 0)
				cg->sockets = glsb_cg_knob(dir, "memory.kmem.tcp.limit_in_bytes", val) == 0;
		} else if (i == 1) {
			glsb_fmt(val, sizeof val, "%ld", lim->pids);
			rc = glsb_cg_knob(dir, "pids.max", val);
		} else {
			set_cpu_quota(cg, dir, lim);
		}
		limited |= i < 2 && rc == 0;
		if (rc < 0) {
			glsb_fmt(cg->why, sizeof cg->why, "cgroup v1: setting limits in %s: %s", dir,
				 strerror(errno));
			glsb_cg_remove_leaves(cg);
			return -1;
		}
	}
	if (!limited) {
		/* neither memory nor pids: a CPU quota alone is not what `sandbox` calls limits */
		glsb_cg_remove_leaves(cg);
		cg->cpu = 0;
		return -1;
	}
	return 0;
}

/* Each leaf's tasks file, opened for writing: the child writes "0" to each to move itself in. */
static int prepare_join(struct glsb_sb_cgroup *cg)
{
	char p[640];
	for (int i = 0; i < cg->ndirs; i++) {
		glsb_fmt(p, sizeof p, "%s/tasks", cg->dirs[i]);
		cg->tasks_fds[i] = open(p, O_WRONLY | O_CLOEXEC);
		if (cg->tasks_fds[i] < 0)
			return -1;
	}
	return 0;
}

static void describe(struct glsb_jbuf *b)
{
	static const char *const v1[] = {"memory", "pids"};
	char base[512];
	int any = 0;

	glsb_jbuf_printf(b, "\"cgroup_v1\":");
	for (int i = 0; i < 2; i++) {
		if (!glsb_cg_own_dir(v1[i], base, sizeof base))
			continue;
		glsb_jbuf_printf(b, "%s\"%s\":", any ? "," : "{", v1[i]);
		glsb_json_cstr(b, base);
		any = 1;
	}
	glsb_jbuf_printf(b, "%s", any ? "}" : "false,\"cgroup_v1_reason\":\"no memory or pids hierarchy mounted\"");
}

const struct glsb_cg_version glsb_cg_v1 = {
	.version = 1,
	.create = create,
	.prepare_join = prepare_join,
	.oom_file = "memory.oom_control",
	.current_file = "memory.usage_in_bytes",
	.peak_file = "memory.max_usage_in_bytes",
	.describe = describe,
};
