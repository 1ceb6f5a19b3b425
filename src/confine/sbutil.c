/* sbutil.c: small helpers every glsb-confine command shares: messages, whole writes, small files
 * and knobs, directories, and the PATH lookup of a program. */
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

#include "sbutil.h"

int glsb_sb_fmt(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
	return n;
}

int glsb_sb_write_all(int fd, const void *buf, size_t len)
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

int glsb_sb_write_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -1;
	int rc = glsb_sb_write_all(fd, data, strlen(data));
	int saved = errno;
	if (close(fd) < 0 && rc == 0)
		return -1;
	errno = saved;
	return rc;
}

int glsb_sb_write_knob(const char *path, const char *data)
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

ssize_t glsb_sb_read_file(const char *path, char *buf, size_t cap)
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

int glsb_sb_mkdirs(const char *path, mode_t mode)
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
		glsb_sb_fmt(fresh, sizeof fresh, ".glsb-rm-%lu", rs->next++);
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
		glsb_sb_fmt(st[depth].name, sizeof st[depth].name, "%s", e->d_name);
	}
	return rc;
}

int glsb_sb_remove_tree(const char *path)
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

int glsb_sb_has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t')
			p++;
		const char *start = p;
		while (*p && *p != ' ' && *p != ',' && *p != '\n' && *p != '\t')
			p++;
		if ((size_t)(p - start) == wl && !memcmp(start, word, wl))
			return 1;
	}
	return 0;
}

static int is_exec_file(int dirfd, const char *path)
{
	struct stat st;
	return fstatat(dirfd, path, &st, 0) == 0 && S_ISREG(st.st_mode) &&
	       faccessat(dirfd, path, X_OK, 0) == 0;
}

int glsb_find_program(int dirfd, const char *name, const char *path, char *out, size_t cap)
{
	struct stat st;

	if (strchr(name, '/')) {
		if ((size_t)snprintf(out, cap, "%s", name) >= cap) {
			errno = ENAMETOOLONG;
			return -1;
		}
		return fstatat(dirfd, name, &st, 0);
	}
	for (const char *p = path ? path : ""; path;) {
		size_t n = strcspn(p, ":");
		/* POSIX: an empty PATH entry is the current directory */
		int len = n ? snprintf(out, cap, "%.*s/%s", (int)n, p, name) : snprintf(out, cap, "./%s", name);
		if (len > 0 && (size_t)len < cap && is_exec_file(dirfd, out))
			return 0;
		if (!p[n])
			break;
		p += n + 1;
	}
	errno = ENOENT;
	return -1;
}

extern char **environ;
static char *args_start, *args_end, *env_start, *env_end;

void glsb_remember_process_text(int argc, char **argv)
{
	/* exec lays the strings out back to back: argv's, then environ's */
	if (argc < 1)
		return;
	char *end = argv[0];
	for (int i = 0; i < argc; i++) {
		if (argv[i] != end)
			return; /* not the layout we know: leave it */
		end = argv[i] + strlen(argv[i]) + 1;
	}
	args_start = argv[0];
	args_end = end;
	env_start = env_end = end;
	for (char **e = environ; *e && *e == env_end; e++)
		env_end = *e + strlen(*e) + 1;
}

void glsb_hide_process_text(const char *title)
{
	if (!args_start)
		return;
	size_t n = (size_t)(args_end - args_start), tl = strlen(title);
	memset(args_start, 0, n);
	memcpy(args_start, title, tl < n ? tl : n - 1);
	/* A non-NUL last byte tells the kernel the title was rewritten (setproctitle style):
	 * /proc/PID/cmdline then shows it up to its NUL, not the zeros after it. */
	if (tl + 1 < n)
		args_end[-1] = ' ';
	memset(env_start, 0, (size_t)(env_end - env_start));
}

char **glsb_dup_strings(char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	char **out = calloc(n + 1, sizeof *out);
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i])))
			out = NULL;
	if (!out)
		_exit(125);
	return out;
}
