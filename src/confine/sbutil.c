/* sbutil.c: small helpers every glsb-confine command shares: messages, whole writes, small files
 * and knobs, directories, and the PATH lookup of a program. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Empty the directory open at dfd (which this function closes), depth-first. */
static int remove_children(int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	int rc = 0;

	if (!d) {
		close(dfd);
		return -1;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			continue;
		if (errno == EISDIR || errno == EPERM) {
			if (depth > 256) {
				rc = -1;
				continue;
			}
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0 && errno == EACCES) {
				/* The sandbox may leave a directory without permissions (owner-only case). */
				fchmodat(dirfd(d), e->d_name, 0700, 0);
				sub = openat(dirfd(d), e->d_name,
					     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			}
			if (sub < 0) {
				rc = -1;
				continue;
			}
			fchmod(sub, 0700);
			if (remove_children(sub, depth + 1) < 0)
				rc = -1;
			if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0)
				rc = -1;
		} else {
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

int glsb_sb_remove_tree(const char *path)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
	int rc = remove_children(dfd, 0);
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
