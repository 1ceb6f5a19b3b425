/* cgroup.c: per-sandbox limits in a leaf cgroup glsb/<name> below the caller's own cgroup:
 * memory (socket buffers included), pids and a CPU quota; cgroup v2 when memory and pids can be
 * enabled there, else the v1 hierarchies. Also reads the OOM-kill counter of the leaf.
 * Files written (Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/memory.rst, sched-bwc.rst):
 *   v2: cgroup.subtree_control (+memory +pids, +cpu), memory.max, memory.swap.max, pids.max,
 *       cpu.max ("QUOTA PERIOD"); TCP/UDP buffers are charged to memory.max by the kernel
 *       ("sock" in memory.stat); OOM kills are counted in memory.events (oom_kill).
 *   v1: memory.limit_in_bytes, memory.memsw.limit_in_bytes, memory.kmem.tcp.limit_in_bytes
 *       (socket buffers have their own counter in v1), pids.max, cpu.cfs_period_us and
 *       cpu.cfs_quota_us; OOM kills are counted in memory.oom_control (oom_kill). */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbkit.h"

/* Mount point of the cgroup2 hierarchy (want == NULL) or of the v1 hierarchy whose super
 * options include controller want, from /proc/self/mountinfo. */
static int find_mount(const char *want, char *mnt, size_t cap, char *root, size_t rcap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		char r[512], m[512], type[64], opts[512];
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %511s %511s", r, m) != 2)
			continue;
		if (sscanf(sep + 3, "%63s %*s %511s", type, opts) != 2)
			continue;
		if (want ? !strcmp(type, "cgroup") && glsb_sb_has_word(opts, want)
			 : !strcmp(type, "cgroup2")) {
			glsb_sb_fmt(mnt, cap, "%s", m);
			glsb_sb_fmt(root, rcap, "%s", r);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

/* This process's cgroup path in the v2 hierarchy (want == NULL) or the v1 one of want. */
static int own_path(const char *want, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		/* "hierarchy-id:controllers:path" */
		*c1 = '\0';
		*c2 = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		if (want ? glsb_sb_has_word(c1 + 1, want) : !strcmp(line, "0") && c1[1] == '\0') {
			glsb_sb_fmt(out, cap, "%s", c2 + 1);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

/* Directory of this process's cgroup in a hierarchy, e.g. /sys/fs/cgroup/memory/a/b. */
static int own_dir(const char *want, char *out, size_t cap)
{
	char mnt[512], root[512], path[512];

	if (!find_mount(want, mnt, sizeof mnt, root, sizeof root) ||
	    !own_path(want, path, sizeof path))
		return 0;
	const char *rel = path;
	size_t rl = strlen(root);
	/* A mount of a sub-tree (root != "/") shows paths relative to that root. */
	if (strcmp(root, "/") && !strncmp(path, root, rl))
		rel = path + rl;
	glsb_sb_fmt(out, cap, "%s%s", mnt, strcmp(rel, "/") ? rel : "");
	return 1;
}

/* GLSB_CONFINE_CGROUP2_ROOT=DIR (a test hook): DIR stands for the cgroup2 mount and our own
 * cgroup, and knobs are plain files there, each write appended as a line, so a spec can check
 * what the v2 path writes on a machine whose cgroup2 hierarchy has no controllers. v1 is not
 * tried then. */
static const char *fake_v2_root;

/* The directory below our cgroup that holds the leaves: glsb. GLSB_CONFINE_TEST_CGROUP_PARENT=NAME
 * (a test hook, spec/confine/cgroup_collect_spec.lua) names another one (a plain name), so that a
 * spec's stale collections only ever look at its own leaves, never at other sandboxes'. */
static const char *leaves_dir = "glsb";

static void choose_leaves_dir(void)
{
	const char *name = getenv("GLSB_CONFINE_TEST_CGROUP_PARENT");
	leaves_dir = "glsb";
	if (!name || !*name || strlen(name) > 64 || name[0] == '.')
		return;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '-' || *c == '_' || *c == '.'))
			return;
	leaves_dir = name;
}

static int knob(const char *dir, const char *name, const char *value)
{
	char p[640];
	glsb_sb_fmt(p, sizeof p, "%s/%s", dir, name);
	if (fake_v2_root) {
		int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd < 0)
			return -1;
		int rc = glsb_sb_write_all(fd, value, strlen(value));
		if (rc == 0)
			rc = glsb_sb_write_all(fd, "\n", 1);
		close(fd);
		return rc;
	}
	return glsb_sb_write_knob(p, value);
}

static int has_controllers(const char *dir, const char *file, const char *want1, const char *want2)
{
	char p[640], buf[512];
	glsb_sb_fmt(p, sizeof p, "%s/%s", dir, file);
	if (glsb_sb_read_file(p, buf, sizeof buf) < 0)
		return 0;
	return glsb_sb_has_word(buf, want1) && glsb_sb_has_word(buf, want2);
}

/* Who may remove a leaf. A leaf is empty from its mkdir until the sandbox's child joins it (v1:
 * the child writes its tasks files after building its root; v2: clone3 CLONE_INTO_CGROUP), and an
 * empty cgroup is removed by any rmdir: a leaf's removal must never depend on guessing whether its
 * owner lives. The pid in the name cannot tell: a collector in another pid namespace sees no such
 * process (the cgroup tree is the same), and pids are reused. So the owner proves it lives:
 *   - the owner holds an exclusive flock on its leaf's directory from before anyone can see the
 *     leaf until it has removed it (lock_fds); the kernel drops the lock when the owner dies, however
 *     it dies (flock on a cgroup directory: one inode per hierarchy, whatever the mount, mount or
 *     pid namespace);
 *   - "before anyone can see it": an owner takes a shared flock on the leaves' parent (glsb/) around
 *     its mkdir and flock, and a collector takes an exclusive one around its scan, so a collector
 *     never meets a leaf between its mkdir and its owner's flock;
 *   - a collector removes only leaves whose flock it gets (the owner is gone) and whose name's pid
 *     is no process here (kill(pid, 0): ESRCH): the second test keeps the leaves of glsb-confines
 *     from before these locks, which hold none, while they run.
 * glsb/ is made 0700: only its owner (and root) can open it, so nobody else can hold its flock. */
#define PARENT_WAIT_MS 5000 /* an owner waits this long for a collection in progress */

/* Remove the leaves that owners which were killed left (SIGKILL leaves no time to clean up):
 * empty ones go, busy ones (tasks of a dying sandbox) stay for the next collection. glsb is the
 * leaves' parent, open. Skipped while a leaf is being created or another collection runs. */
static void collect_stale(int glsb)
{
	if (flock(glsb, LOCK_EX | LOCK_NB) < 0)
		return;
	int scan = openat(glsb, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d) {
		if (scan >= 0)
			close(scan);
		flock(glsb, LOCK_UN);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		int pid;
		if (sscanf(e->d_name, "sb-%d-", &pid) != 1 || pid <= 0)
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		int leaf = openat(glsb, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (leaf < 0)
			continue;
		if (flock(leaf, LOCK_EX | LOCK_NB) == 0)
			unlinkat(glsb, e->d_name, AT_REMOVEDIR); /* its owner is gone */
		close(leaf);
	}
	closedir(d);
	flock(glsb, LOCK_UN);
}

/* The shared flock on glsb/ (see above), waiting at most PARENT_WAIT_MS for a collection. */
static int lock_parent_shared(int glsb)
{
	for (int ms = 0; flock(glsb, LOCK_SH | LOCK_NB) < 0; ms++) {
		if (errno != EWOULDBLOCK || ms >= PARENT_WAIT_MS)
			return -1;
		nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
	}
	return 0;
}

/* Create parent/glsb/<name> (or <name>1 ... <name>9 if a stale leaf has that name), locked for
 * its owner: *lock_fd is its directory, flocked, or -1. 0, or -1 with errno. */
static int make_leaf(const char *parent, const char *name, char *out, size_t cap, int *lock_fd)
{
	char glsb[560], leaf[80];
	struct stat st;
	int rc = -1, err = 0;

	*lock_fd = -1;
	glsb_sb_fmt(glsb, sizeof glsb, "%s/%s", parent, leaves_dir);
	if (mkdir(glsb, 0700) < 0 && errno != EEXIST)
		return -1;
	int g = open(glsb, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g < 0)
		return -1;
	if (fstat(g, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077))
		fchmod(g, 0700); /* made 0755 by an earlier version */
	collect_stale(g);
	/* Past the wait (a collector stopped while it scans), go on without: our flock follows our
	 * mkdir within microseconds, and no other collection can start meanwhile. */
	int shared = lock_parent_shared(g) == 0;
	for (int k = 0; k < 10 && rc < 0; k++) {
		int n = k ? glsb_sb_fmt(leaf, sizeof leaf, "%s%d", name, k)
			  : glsb_sb_fmt(leaf, sizeof leaf, "%s", name);
		if ((size_t)n >= sizeof leaf ||
		    (size_t)glsb_sb_fmt(out, cap, "%s/%s", glsb, leaf) >= cap) {
			err = ENAMETOOLONG;
			break;
		}
		rc = mkdirat(g, leaf, 0755);
		err = errno;
		if (rc < 0 && err != EEXIST)
			break;
	}
	if (rc == 0) {
		*lock_fd = openat(g, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX | LOCK_NB) < 0) {
			err = errno;
			if (*lock_fd >= 0)
				close(*lock_fd);
			*lock_fd = -1;
			unlinkat(g, leaf, AT_REMOVEDIR);
			rc = -1;
		}
	}
	if (shared)
		flock(g, LOCK_UN);
	close(g);
	errno = err;
	return rc;
}

static void set_cpu_quota(struct glsb_sb_cgroup *cg, const char *dir,
			  const struct glsb_sb_limits *lim)
{
	char val[64];
	int rc;

	if (cg->version == 2) {
		glsb_sb_fmt(val, sizeof val, "%ld %ld", lim->cpu_quota_us, lim->cpu_period_us);
		rc = knob(dir, "cpu.max", val);
	} else {
		glsb_sb_fmt(val, sizeof val, "%ld", lim->cpu_period_us);
		rc = knob(dir, "cpu.cfs_period_us", val);
		glsb_sb_fmt(val, sizeof val, "%ld", lim->cpu_quota_us);
		if (rc == 0)
			rc = knob(dir, "cpu.cfs_quota_us", val);
	}
	if (rc == 0)
		cg->cpu = 1;
	else
		glsb_sb_fmt(cg->cpu_why, sizeof cg->cpu_why, "setting the CPU quota in %s: %s", dir,
			    strerror(errno));
}

static int try_v2_at(struct glsb_sb_cgroup *cg, const char *base, const char *name,
		     const struct glsb_sb_limits *lim)
{
	char glsb[560], val[32];
	int want_cpu = lim->cpu_quota_us > 0;

	if (!has_controllers(base, "cgroup.controllers", "memory", "pids")) {
		glsb_sb_fmt(cg->why, sizeof cg->why, "cgroup v2: memory/pids not delegated to %s", base);
		return -1;
	}
	/* Enabling in our own cgroup fails (EBUSY) if it holds processes and is not the root:
	 * the no-internal-processes rule. The glsb/ child holds none, so it always can. */
	if (!has_controllers(base, "cgroup.subtree_control", "memory", "pids") &&
	    knob(base, "cgroup.subtree_control", "+memory +pids") < 0) {
		glsb_sb_fmt(cg->why, sizeof cg->why, "cgroup v2: cannot enable memory/pids in %s: %s",
			 base, strerror(errno));
		return -1;
	}
	glsb_sb_fmt(glsb, sizeof glsb, "%s/%s", base, leaves_dir);
	if ((mkdir(glsb, 0755) < 0 && errno != EEXIST) ||
	    (!has_controllers(glsb, "cgroup.subtree_control", "memory", "pids") &&
	     knob(glsb, "cgroup.subtree_control", "+memory +pids") < 0)) {
		glsb_sb_fmt(cg->why, sizeof cg->why, "cgroup v2: %s: %s", glsb, strerror(errno));
		return -1;
	}
	/* The CPU controller is optional: its own write, so that memory and pids hold without it. */
	if (want_cpu && !(has_controllers(base, "cgroup.controllers", "cpu", "cpu") &&
			  (has_controllers(base, "cgroup.subtree_control", "cpu", "cpu") ||
			   knob(base, "cgroup.subtree_control", "+cpu") == 0) &&
			  (has_controllers(glsb, "cgroup.subtree_control", "cpu", "cpu") ||
			   knob(glsb, "cgroup.subtree_control", "+cpu") == 0))) {
		glsb_sb_fmt(cg->cpu_why, sizeof cg->cpu_why, "cgroup v2: cpu not delegated to %s", base);
		want_cpu = 0;
	}
	if (make_leaf(base, name, cg->dirs[0], sizeof cg->dirs[0], &cg->lock_fds[0]) < 0) {
		glsb_sb_fmt(cg->why, sizeof cg->why, "cgroup v2: %s: %s", glsb, strerror(errno));
		return -1;
	}
	cg->ndirs = 1;
	cg->version = 2;
	cg->mem_idx = 0;
	glsb_sb_fmt(val, sizeof val, "%ld", lim->memory_mb * 1024 * 1024);
	if (knob(cg->dirs[0], "memory.max", val) < 0)
		goto fail;
	cg->sockets = 1; /* v2 charges socket buffers to memory.max */
	knob(cg->dirs[0], "memory.swap.max", "0"); /* absent without swap accounting */
	glsb_sb_fmt(val, sizeof val, "%ld", lim->pids);
	if (knob(cg->dirs[0], "pids.max", val) < 0)
		goto fail;
	if (want_cpu)
		set_cpu_quota(cg, cg->dirs[0], lim);
	return 0;
fail:
	glsb_sb_fmt(cg->why, sizeof cg->why, "cgroup v2: setting limits in %s: %s", cg->dirs[0],
		 strerror(errno));
	glsb_sb_cgroup_remove(cg);
	return -1;
}

static int try_v2(struct glsb_sb_cgroup *cg, const char *name, const struct glsb_sb_limits *lim)
{
	char base[512], mnt[512], root[512], why[256];

	if (fake_v2_root)
		return try_v2_at(cg, fake_v2_root, name, lim);
	if (!own_dir(NULL, base, sizeof base)) {
		glsb_sb_fmt(cg->why, sizeof cg->why, "no cgroup2 mount");
		return -1;
	}
	if (try_v2_at(cg, base, name, lim) == 0)
		return 0;
	/* Our own cgroup usually holds processes (a service or session scope), so it cannot
	 * enable controllers for children; root may use the top of the hierarchy instead. */
	if (!find_mount(NULL, mnt, sizeof mnt, root, sizeof root) || !strcmp(mnt, base) ||
	    access(mnt, W_OK) < 0)
		return -1;
	glsb_sb_fmt(why, sizeof why, "%s", cg->why);
	if (try_v2_at(cg, mnt, name, lim) == 0)
		return 0;
	glsb_sb_fmt(cg->why, sizeof cg->why, "%s; at the top: %s", why, cg->why);
	return -1;
}

static int try_v1(struct glsb_sb_cgroup *cg, const char *name, const struct glsb_sb_limits *lim)
{
	static const char *const ctl[] = {"memory", "pids", "cpu"};
	char base[512], val[32];
	int limited = 0; /* memory or pids */

	cg->version = 1;
	for (int i = 0; i < 3; i++) {
		if (i == 2 && lim->cpu_quota_us <= 0)
			break;
		if (!own_dir(ctl[i], base, sizeof base)) {
			if (i == 2)
				glsb_sb_fmt(cg->cpu_why, sizeof cg->cpu_why, "no cgroup v1 cpu hierarchy");
			continue;
		}
		char *dir = cg->dirs[cg->ndirs];
		if (make_leaf(base, name, dir, sizeof cg->dirs[0], &cg->lock_fds[cg->ndirs]) < 0) {
			if (i == 2)
				glsb_sb_fmt(cg->cpu_why, sizeof cg->cpu_why, "cgroup v1: %s/%s: %s", base,
					    leaves_dir, strerror(errno));
			continue;
		}
		cg->ndirs++;
		int rc = 0;
		if (i == 0) {
			cg->mem_idx = cg->ndirs - 1;
			glsb_sb_fmt(val, sizeof val, "%ld", lim->memory_mb * 1024 * 1024);
			rc = knob(dir, "memory.limit_in_bytes", val);
			knob(dir, "memory.memsw.limit_in_bytes", val); /* absent without swap accounting */
			/* v1 keeps socket buffers out of memory.usage: they get their own limit, the same
			 * size (a TCP/UDP buffer flood stalls on it instead of the host's memory). */
			if (rc == 0)
				cg->sockets = knob(dir, "memory.kmem.tcp.limit_in_bytes", val) == 0;
		} else if (i == 1) {
			glsb_sb_fmt(val, sizeof val, "%ld", lim->pids);
			rc = knob(dir, "pids.max", val);
		} else {
			set_cpu_quota(cg, dir, lim);
		}
		limited |= i < 2 && rc == 0;
		if (rc < 0) {
			glsb_sb_fmt(cg->why, sizeof cg->why, "cgroup v1: setting limits in %s: %s", dir,
				 strerror(errno));
			glsb_sb_cgroup_remove(cg);
			return -1;
		}
	}
	if (!limited) {
		/* neither memory nor pids: a CPU quota alone is not what `sandbox` calls limits */
		glsb_sb_cgroup_remove(cg);
		cg->cpu = 0;
		return -1;
	}
	return 0;
}

int glsb_sb_cgroup_create(struct glsb_sb_cgroup *cg, const char *name,
			  const struct glsb_sb_limits *lim)
{
	char why2[256];

	memset(cg, 0, sizeof *cg);
	cg->mem_idx = -1;
	cg->born_fd = cg->tasks_fds[0] = cg->tasks_fds[1] = cg->tasks_fds[2] = -1;
	cg->lock_fds[0] = cg->lock_fds[1] = cg->lock_fds[2] = -1;
	choose_leaves_dir();
	fake_v2_root = getenv("GLSB_CONFINE_CGROUP2_ROOT");
	if (fake_v2_root && !*fake_v2_root)
		fake_v2_root = NULL;
	if (lim->cpu_quota_us <= 0)
		glsb_sb_fmt(cg->cpu_why, sizeof cg->cpu_why, "no CPU quota asked (--cpus 0)");
	if (try_v2(cg, name, lim) == 0 || fake_v2_root)
		return cg->version ? 0 : -1;
	glsb_sb_fmt(why2, sizeof why2, "%s", cg->why);
	cg->cpu_why[0] = '\0';
	if (try_v1(cg, name, lim) == 0)
		return 0;
	cg->version = 0;
	if (!cg->why[0] || strncmp(cg->why, "cgroup v1", 9))
		glsb_sb_fmt(cg->why, sizeof cg->why, "%s; no usable cgroup v1 memory/pids hierarchy",
			 why2);
	return -1;
}

long glsb_sb_cgroup_oom_kills(const struct glsb_sb_cgroup *cg)
{
	char p[640], buf[1024];

	if (!cg->version || cg->mem_idx < 0)
		return -1;
	glsb_sb_fmt(p, sizeof p, "%s/%s", cg->dirs[cg->mem_idx],
		    cg->version == 2 ? "memory.events" : "memory.oom_control");
	if (glsb_sb_read_file(p, buf, sizeof buf) < 0)
		return -1;
	/* one "name value" per line; the kernel counts kills as "oom_kill N" in both files */
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, "oom_kill ", 9))
			return strtol(line + 9, NULL, 10);
	return -1;
}

static long long read_number(const char *dir, const char *name)
{
	char p[640], buf[64];
	glsb_sb_fmt(p, sizeof p, "%s/%s", dir, name);
	if (glsb_sb_read_file(p, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	return strtoll(buf, NULL, 10);
}

void glsb_sb_cgroup_memory(const struct glsb_sb_cgroup *cg, long long *current, long long *peak)
{
	*current = *peak = -1;
	if (!cg->version || cg->mem_idx < 0)
		return;
	const char *dir = cg->dirs[cg->mem_idx];
	*current = read_number(dir, cg->version == 2 ? "memory.current" : "memory.usage_in_bytes");
	*peak = read_number(dir, cg->version == 2 ? "memory.peak" : "memory.max_usage_in_bytes");
}

int glsb_sb_cgroup_prepare_join(struct glsb_sb_cgroup *cg)
{
	char p[640];

	if (cg->version == 2 && !fake_v2_root) {
		cg->born_fd = open(cg->dirs[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
		return cg->born_fd < 0 ? -1 : 0;
	}
	if (cg->version != 1)
		return 0;
	for (int i = 0; i < cg->ndirs; i++) {
		glsb_sb_fmt(p, sizeof p, "%s/tasks", cg->dirs[i]);
		cg->tasks_fds[i] = open(p, O_WRONLY | O_CLOEXEC);
		if (cg->tasks_fds[i] < 0) {
			glsb_sb_cgroup_close_join(cg);
			return -1;
		}
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
	glsb_sb_fmt(p, sizeof p, "%s/held", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
	glsb_sb_fmt(p, sizeof p, "%s/go", dir);
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

	glsb_sb_fmt(val, sizeof val, "%d", (int)pid);
	for (int i = 0; i < cg->ndirs; i++)
		if (knob(cg->dirs[i], "cgroup.procs", val) < 0)
			return -1;
	return 0;
}

void glsb_sb_cgroup_remove(struct glsb_sb_cgroup *cg)
{
	glsb_sb_cgroup_close_join(cg);
	for (int i = 0; i < cg->ndirs; i++) {
		/* The last tasks of a dead pid namespace may take a moment to leave. */
		for (int tries = 0; rmdir(cg->dirs[i]) < 0 && errno == EBUSY && tries < 400; tries++)
			nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
	}
	/* Removed (or still busy: then the next collection takes it, now that it is free). */
	glsb_sb_cgroup_forget_locks(cg);
	cg->ndirs = 0;
	cg->version = 0;
}

void glsb_sb_cgroup_forget_locks(struct glsb_sb_cgroup *cg)
{
	for (int i = 0; i < 3; i++) {
		if (cg->lock_fds[i] >= 0)
			close(cg->lock_fds[i]);
		cg->lock_fds[i] = -1;
	}
}

static void json_words(struct glsb_ws_buf *b, const char *list)
{
	char word[64];
	int first = 1;

	glsb_ws_buf_printf(b, "[");
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == '\n')
			p++;
		size_t n = strcspn(p, " \n");
		if (n == 0)
			break;
		glsb_sb_fmt(word, sizeof word, "%.*s", (int)n, p);
		glsb_ws_buf_printf(b, "%s", first ? "" : ",");
		glsb_ws_json_cstr(b, word);
		first = 0;
		p += n;
	}
	glsb_ws_buf_printf(b, "]");
}

void glsb_sb_cgroup_describe(struct glsb_ws_buf *b)
{
	char base[512], p[640], ctl[512], sub[512], procs[64];

	glsb_ws_buf_printf(b, "\"cgroup_v2\":");
	if (!own_dir(NULL, base, sizeof base)) {
		glsb_ws_buf_printf(b, "false,\"cgroup_v2_reason\":\"no cgroup2 mount\"");
	} else {
		glsb_sb_fmt(p, sizeof p, "%s/cgroup.controllers", base);
		if (glsb_sb_read_file(p, ctl, sizeof ctl) < 0)
			ctl[0] = '\0';
		glsb_sb_fmt(p, sizeof p, "%s/cgroup.subtree_control", base);
		if (glsb_sb_read_file(p, sub, sizeof sub) < 0)
			sub[0] = '\0';
		glsb_sb_fmt(p, sizeof p, "%s/cgroup.procs", base);
		if (glsb_sb_read_file(p, procs, sizeof procs) < 0)
			procs[0] = '\0';
		/* A controller can be enabled for children if it is already, or if our cgroup
		 * may take it (no processes of its own, or the root). */
		glsb_sb_fmt(p, sizeof p, "%s/cgroup.type", base);
		int is_root = access(p, F_OK) < 0; /* the root cgroup has no cgroup.type */
		int free_to_enable = procs[0] == '\0' || is_root;
		glsb_ws_buf_printf(b, "{\"cgroup\":");
		glsb_ws_json_cstr(b, base);
		glsb_ws_buf_printf(b, ",\"controllers\":");
		json_words(b, ctl);
		glsb_ws_buf_printf(b, ",\"enableable\":");
		json_words(b, free_to_enable ? ctl : sub);
		glsb_ws_buf_printf(b, ",\"memory_and_pids\":%s}",
				   glsb_sb_has_word(free_to_enable ? ctl : sub, "memory") &&
				   glsb_sb_has_word(free_to_enable ? ctl : sub, "pids")
				   ? "true" : "false");
	}
	glsb_ws_buf_printf(b, ",\"cgroup_v1\":");
	int any = 0;
	static const char *const v1[] = {"memory", "pids"};
	for (int i = 0; i < 2; i++) {
		if (!own_dir(v1[i], base, sizeof base))
			continue;
		glsb_ws_buf_printf(b, "%s\"%s\":", any ? "," : "{", v1[i]);
		glsb_ws_json_cstr(b, base);
		any = 1;
	}
	glsb_ws_buf_printf(b, "%s", any ? "}" : "false,\"cgroup_v1_reason\":\"no memory or pids hierarchy mounted\"");
}
