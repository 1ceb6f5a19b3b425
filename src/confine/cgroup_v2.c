/* cgroup_v2.c: the sandbox's leaf in the unified hierarchy (Documentation/admin-guide/cgroup-v2.rst).
 * Files written: cgroup.subtree_control ("+memory +pids", then "+cpu" on its own, in our cgroup
 * and in glsb/: a controller reaches a child only when its parent enables it, and enabling fails
 * with EBUSY in a non-root cgroup that holds processes: the "no internal processes" rule),
 * memory.max (bytes; TCP/UDP buffers are charged to it: "sock" in memory.stat), memory.swap.max
 * ("0"; absent without swap accounting), pids.max, cpu.max ("$MAX $PERIOD" in microseconds),
 * cgroup.procs (a pid, when a task moves in). Read: cgroup.controllers (what the parent offers),
 * memory.events ("oom_kill N"), memory.current, memory.peak (5.19). The child is born in its leaf
 * by clone3(CLONE_INTO_CGROUP) (5.7), on an O_PATH descriptor of the leaf. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup_leaf.h"
#include "cgroup_version.h"
#include "files.h"
#include "text.h"

static void set_cpu_quota(struct glsb_sb_cgroup *cg, const char *dir, const struct glsb_sb_limits *lim)
{
	char val[64];
	glsb_fmt(val, sizeof val, "%ld %ld", lim->cpu_quota_us, lim->cpu_period_us);
	if (glsb_cg_knob(dir, "cpu.max", val) == 0)
		cg->cpu = 1;
	else
		glsb_fmt(cg->cpu_why, sizeof cg->cpu_why, "setting the CPU quota in %s: %s", dir,
			 strerror(errno));
}

/* "cpu" is offered by base and enabled (or enabled now) in base and in glsb/. */
static int enable_cpu(const char *base, const char *glsb)
{
	return glsb_cg_has_controllers(base, "cgroup.controllers", "cpu", "cpu") &&
	       (glsb_cg_has_controllers(base, "cgroup.subtree_control", "cpu", "cpu") ||
		glsb_cg_knob(base, "cgroup.subtree_control", "+cpu") == 0) &&
	       (glsb_cg_has_controllers(glsb, "cgroup.subtree_control", "cpu", "cpu") ||
		glsb_cg_knob(glsb, "cgroup.subtree_control", "+cpu") == 0);
}

static int create_at(struct glsb_sb_cgroup *cg, const char *base, const char *name,
		     const struct glsb_sb_limits *lim)
{
	char glsb[560], val[32];
	int want_cpu = lim->cpu_quota_us > 0;

	if (!glsb_cg_has_controllers(base, "cgroup.controllers", "memory", "pids")) {
		glsb_fmt(cg->why, sizeof cg->why, "cgroup v2: memory/pids not delegated to %s", base);
		return -1;
	}
	/* Our own cgroup may enable them only if it holds no processes (or is the root); the glsb/
	 * child holds none, so it always can. */
	if (!glsb_cg_has_controllers(base, "cgroup.subtree_control", "memory", "pids") &&
	    glsb_cg_knob(base, "cgroup.subtree_control", "+memory +pids") < 0) {
		glsb_fmt(cg->why, sizeof cg->why, "cgroup v2: cannot enable memory/pids in %s: %s", base,
			 strerror(errno));
		return -1;
	}
	glsb_fmt(glsb, sizeof glsb, "%s/%s", base, glsb_cg_leaves_dir());
	if ((mkdir(glsb, 0755) < 0 && errno != EEXIST) ||
	    (!glsb_cg_has_controllers(glsb, "cgroup.subtree_control", "memory", "pids") &&
	     glsb_cg_knob(glsb, "cgroup.subtree_control", "+memory +pids") < 0)) {
		glsb_fmt(cg->why, sizeof cg->why, "cgroup v2: %s: %s", glsb, strerror(errno));
		return -1;
	}
	/* The CPU controller is optional: its own write, so that memory and pids hold without it. */
	if (want_cpu && !enable_cpu(base, glsb)) {
		glsb_fmt(cg->cpu_why, sizeof cg->cpu_why, "cgroup v2: cpu not delegated to %s", base);
		want_cpu = 0;
	}
	if (glsb_cg_make_leaf(base, name, cg->dirs[0], sizeof cg->dirs[0], &cg->lock_fds[0]) < 0) {
		glsb_fmt(cg->why, sizeof cg->why, "cgroup v2: %s: %s", glsb, strerror(errno));
		return -1;
	}
	cg->ndirs = 1;
	cg->version = 2;
	cg->mem_idx = 0;
	glsb_fmt(val, sizeof val, "%ld", lim->memory_mb * 1024 * 1024);
	if (glsb_cg_knob(cg->dirs[0], "memory.max", val) < 0)
		goto fail;
	cg->sockets = 1; /* v2 charges socket buffers to memory.max */
	glsb_cg_knob(cg->dirs[0], "memory.swap.max", "0"); /* absent without swap accounting */
	glsb_fmt(val, sizeof val, "%ld", lim->pids);
	if (glsb_cg_knob(cg->dirs[0], "pids.max", val) < 0)
		goto fail;
	if (want_cpu)
		set_cpu_quota(cg, cg->dirs[0], lim);
	return 0;
fail:
	glsb_fmt(cg->why, sizeof cg->why, "cgroup v2: setting limits in %s: %s", cg->dirs[0],
		 strerror(errno));
	glsb_cg_remove_leaves(cg);
	return -1;
}

static int create(struct glsb_sb_cgroup *cg, const char *name, const struct glsb_sb_limits *lim)
{
	char base[512], mnt[512], root[512], why[256];
	const char *fake = glsb_cg_fake_v2_root();

	if (fake)
		return create_at(cg, fake, name, lim);
	if (!glsb_cg_own_dir(NULL, base, sizeof base)) {
		glsb_fmt(cg->why, sizeof cg->why, "no cgroup2 mount");
		return -1;
	}
	if (create_at(cg, base, name, lim) == 0)
		return 0;
	/* Our own cgroup usually holds processes (a service or session scope), so it cannot
	 * enable controllers for children; root may use the top of the hierarchy instead. */
	if (!glsb_cg_find_mount(NULL, mnt, sizeof mnt, root, sizeof root) || !strcmp(mnt, base) ||
	    access(mnt, W_OK) < 0)
		return -1;
	glsb_fmt(why, sizeof why, "%s", cg->why);
	if (create_at(cg, mnt, name, lim) == 0)
		return 0;
	glsb_fmt(cg->why, sizeof cg->why, "%s; at the top: %s", why, cg->why);
	return -1;
}

/* The leaf, for clone3(CLONE_INTO_CGROUP). Under the fake root there is no cgroup to be born in:
 * the supervisor writes the child's pid to cgroup.procs instead. */
static int prepare_join(struct glsb_sb_cgroup *cg)
{
	if (glsb_cg_fake_v2_root())
		return 0;
	cg->born_fd = open(cg->dirs[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
	return cg->born_fd < 0 ? -1 : 0;
}

static void json_words(struct glsb_jbuf *b, const char *list)
{
	char word[64];
	int first = 1;

	glsb_jbuf_printf(b, "[");
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == '\n')
			p++;
		size_t n = strcspn(p, " \n");
		if (n == 0)
			break;
		glsb_fmt(word, sizeof word, "%.*s", (int)n, p);
		glsb_jbuf_printf(b, "%s", first ? "" : ",");
		glsb_json_cstr(b, word);
		first = 0;
		p += n;
	}
	glsb_jbuf_printf(b, "]");
}

static void describe(struct glsb_jbuf *b)
{
	char base[512], p[640], ctl[512], sub[512], procs[64];

	glsb_jbuf_printf(b, "\"cgroup_v2\":");
	if (!glsb_cg_own_dir(NULL, base, sizeof base)) {
		glsb_jbuf_printf(b, "false,\"cgroup_v2_reason\":\"no cgroup2 mount\"");
		return;
	}
	glsb_fmt(p, sizeof p, "%s/cgroup.controllers", base);
	if (glsb_read_file(p, ctl, sizeof ctl) < 0)
		ctl[0] = '\0';
	glsb_fmt(p, sizeof p, "%s/cgroup.subtree_control", base);
	if (glsb_read_file(p, sub, sizeof sub) < 0)
		sub[0] = '\0';
	glsb_fmt(p, sizeof p, "%s/cgroup.procs", base);
	if (glsb_read_file(p, procs, sizeof procs) < 0)
		procs[0] = '\0';
	/* A controller can be enabled for children if it is already, or if our cgroup may take it
	 * (no processes of its own, or the root: the only cgroup without a cgroup.type file). */
	glsb_fmt(p, sizeof p, "%s/cgroup.type", base);
	int is_root = access(p, F_OK) < 0;
	const char *enableable = procs[0] == '\0' || is_root ? ctl : sub;
	glsb_jbuf_printf(b, "{\"cgroup\":");
	glsb_json_cstr(b, base);
	glsb_jbuf_printf(b, ",\"controllers\":");
	json_words(b, ctl);
	glsb_jbuf_printf(b, ",\"enableable\":");
	json_words(b, enableable);
	glsb_jbuf_printf(b, ",\"memory_and_pids\":%s}",
			 glsb_has_word(enableable, "memory") && glsb_has_word(enableable, "pids") ? "true"
												   : "false");
}

const struct glsb_cg_version glsb_cg_v2 = {
	.version = 2,
	.create = create,
	.prepare_join = prepare_join,
	.oom_file = "memory.events",
	.current_file = "memory.current",
	.peak_file = "memory.peak",
	.describe = describe,
};
