/* files.c: the file helpers every glsb-confine command shares: whole writes, small files and
 * knobs, directories made and trees removed (never following a symlink). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#include "files.h"
#include "text.h"

int glsb_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* a non-blocking descriptor (a report socket shared with the control channel):
			 * wait for room, a bounded time */
			struct pollfd pf = {fd, POLLOUT, 0};
			if (errno == EAGAIN && poll(&pf, 1, 5000) == 1)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int glsb_write_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -1;
	int rc = glsb_write_all(fd, data, strlen(data));
	int saved = errno;
	if (close(fd) < 0 && rc == 0)
		return -1;
	errno = saved;
	return rc;
}

int glsb_write_knob(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* cgroup and proc knobs take one write(); a short write is an error there. */
	ssize_t n = write(fd, data, strlen(data));
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	return 0;
}

ssize_t glsb_read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return (ssize_t)len;
}

int glsb_mkdirs(const char *path, mode_t mode)
{
	char tmp[4096];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Removal keeps at most RM_OPEN directories open, however deep the tree: a directory found
 * deeper is moved up into the root under a fresh name (".glsb-rm-N") and removed by a later
 * pass over the root. No recursion, no "..", no path longer than a name: a 20,000-deep chain
 * costs passes, not stack or descriptors. Never follows a symlink, never crosses into another
 * filesystem (a mount point below the root is left, and the removal reports failure). */
#define RM_OPEN 24

struct rm_level {
	DIR *d;
	char name[256]; /* this directory's name in the level above */
};

/* Open name below dirfd as a directory we may empty (made 0700: the sandbox may leave a
 * directory without permissions); -1 if it is not one, or on another filesystem. */
static int open_subdir(int dirfd, const char *name, dev_t dev)
{
	struct stat st;
	int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0 && errno == EACCES) {
		/* the name is a directory (unlink said so) and nothing else runs: chmod is safe */
		fchmodat(dirfd, name, 0700, 0);
		sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (sub < 0)
		return -1;
	if (fstat(sub, &st) < 0 || st.st_dev != dev) {
		close(sub);
		errno = EXDEV;
		return -1;
	}
	fchmod(sub, 0700);
	return sub;
}

struct rm_state {
	int rootfd;
	dev_t dev;
	unsigned long moved; /* directories moved up so far */
	unsigned long next;  /* for fresh names */
};

/* Move the directory dirfd/name up into the root under a fresh name. 0 or -1. */
static int move_up(int dirfd, const char *name, struct rm_state *rs)
{
	char fresh[48];
	for (int tries = 0; tries < 1000; tries++) {
		glsb_fmt(fresh, sizeof fresh, ".glsb-rm-%lu", rs->next++);
		if (syscall(SYS_renameat2, dirfd, name, rs->rootfd, fresh, RENAME_NOREPLACE) == 0) {
			rs->moved++;
			return 0;
		}
		if (errno != EEXIST)
			return -1;
	}
	return -1;
}

/* One pass: empty the root as deep as RM_OPEN levels, moving deeper directories up. */
static int remove_pass(struct rm_state *rs)
{
	static struct rm_level st[RM_OPEN];
	int depth = 0, rc = 0;
	int fd = fcntl(rs->rootfd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0 || !(st[0].d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	st[0].name[0] = '\0';
	while (depth >= 0) {
		DIR *d = st[depth].d;
		struct dirent *e = readdir(d);
		if (!e) {
			closedir(d);
			if (--depth >= 0 && unlinkat(dirfd(st[depth].d), st[depth + 1].name, AT_REMOVEDIR) < 0 &&
			    errno != ENOENT)
				rc = -1;
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			rc = -1;
			continue;
		}
		int sub = open_subdir(dirfd(d), e->d_name, rs->dev);
		if (sub < 0) {
			rc = -1;
			continue;
		}
		if (depth + 1 >= RM_OPEN) {
			close(sub);
			if (move_up(dirfd(d), e->d_name, rs) < 0)
				rc = -1;
			continue;
		}
		DIR *sd = fdopendir(sub);
		if (!sd) {
			close(sub);
			rc = -1;
			continue;
		}
		depth++;
		st[depth].d = sd;
		glsb_fmt(st[depth].name, sizeof st[depth].name, "%s", e->d_name);
	}
	return rc;
}

int glsb_remove_tree(const char *path)
{
	struct stat st;
	int rootfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
	if (fstat(rootfd, &st) < 0) {
		close(rootfd);
		return -1;
	}
	fchmod(rootfd, 0700);
	/* Passes until one moved nothing up: that one saw every entry that was left. */
	struct rm_state rs = {.rootfd = rootfd, .dev = st.st_dev};
	unsigned long before;
	int rc;
	do {
		before = rs.moved;
		rc = remove_pass(&rs);
	} while (rs.moved != before);
	close(rootfd);
	if (rmdir(path) < 0)
		rc = -1;
	return rc;
}
