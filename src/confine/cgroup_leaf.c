/* cgroup_leaf.c: what both cgroup versions share: where a hierarchy is mounted and where our own
 * cgroup is in it, knobs, and the leaves glsb/<name> (made under their owner's lock, collected
 * when their owner is gone, removed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup_leaf.h"
#include "files.h"
#include "text.h"

static const char *fake_v2_root;
static const char *leaves_dir = "glsb";

void glsb_cg_read_hooks(void)
{
	fake_v2_root = getenv("GLSB_CONFINE_CGROUP2_ROOT");
	if (fake_v2_root && !*fake_v2_root)
		fake_v2_root = NULL;
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

const char *glsb_cg_fake_v2_root(void)
{
	return fake_v2_root;
}

const char *glsb_cg_leaves_dir(void)
{
	return leaves_dir;
}

int glsb_cg_find_mount(const char *want, char *mnt, size_t cap, char *root, size_t rcap)
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
		if (want ? !strcmp(type, "cgroup") && glsb_has_word(opts, want)
			 : !strcmp(type, "cgroup2")) {
			glsb_fmt(mnt, cap, "%s", m);
			glsb_fmt(root, rcap, "%s", r);
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
		if (want ? glsb_has_word(c1 + 1, want) : !strcmp(line, "0") && c1[1] == '\0') {
			glsb_fmt(out, cap, "%s", c2 + 1);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

int glsb_cg_own_dir(const char *want, char *out, size_t cap)
{
	char mnt[512], root[512], path[512];

	if (!glsb_cg_find_mount(want, mnt, sizeof mnt, root, sizeof root) ||
	    !own_path(want, path, sizeof path))
		return 0;
	const char *rel = path;
	size_t rl = strlen(root);
	/* A mount of a sub-tree (root != "/") shows paths relative to that root. */
	if (strcmp(root, "/") && !strncmp(path, root, rl))
		rel = path + rl;
	glsb_fmt(out, cap, "%s%s", mnt, strcmp(rel, "/") ? rel : "");
	return 1;
}

int glsb_cg_knob(const char *dir, const char *name, const char *value)
{
	char p[640];
	glsb_fmt(p, sizeof p, "%s/%s", dir, name);
	if (fake_v2_root) {
		int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd < 0)
			return -1;
		int rc = glsb_write_all(fd, value, strlen(value));
		if (rc == 0)
			rc = glsb_write_all(fd, "\n", 1);
		close(fd);
		return rc;
	}
	return glsb_write_knob(p, value);
}

int glsb_cg_has_controllers(const char *dir, const char *file, const char *want1, const char *want2)
{
	char p[640], buf[512];
	glsb_fmt(p, sizeof p, "%s/%s", dir, file);
	if (glsb_read_file(p, buf, sizeof buf) < 0)
		return 0;
	return glsb_has_word(buf, want1) && glsb_has_word(buf, want2);
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

int glsb_cg_make_leaf(const char *parent, const char *name, char *out, size_t cap, int *lock_fd)
{
	char glsb[560], leaf[80];
	struct stat st;
	int rc = -1, err = 0;

	*lock_fd = -1;
	glsb_fmt(glsb, sizeof glsb, "%s/%s", parent, leaves_dir);
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
		int n = k ? glsb_fmt(leaf, sizeof leaf, "%s%d", name, k)
			  : glsb_fmt(leaf, sizeof leaf, "%s", name);
		if ((size_t)n >= sizeof leaf ||
		    (size_t)glsb_fmt(out, cap, "%s/%s", glsb, leaf) >= cap) {
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

void glsb_cg_remove_leaves(struct glsb_sb_cgroup *cg)
{
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
