/* fs.c: temp directories, symlink-safe tree removal, atomic file writes and where the core lives on disk. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codes.h"
#include "core.h"
#include "fs.h"

/* ---- rmtree ---- */

struct rm {
	char *path;          /* the path being worked on, for messages */
	size_t len, cap;
	dev_t dev;           /* device of the top directory */
	int failed;
	char *err;
	size_t errlen;
	const char *code;    /* the failure's code: an errno name, or TREE_CHANGED */
};

static void rm_fail(struct rm *r, const char *why, int e)
{
	if (r->failed)
		return;
	r->failed = 1;
	r->code = e ? glsb_errno_code(e) : glsb_code_name(GLSB_TREE_CHANGED);
	if (e)
		snprintf(r->err, r->errlen, "rmtree: %s: %s: %s", r->path ? r->path : "", why, strerror(e));
	else
		snprintf(r->err, r->errlen, "rmtree: %s: %s", r->path ? r->path : "", why);
}

/* Appends "/name" (just "name" to an empty path) to r->path. */
static int rm_push(struct rm *r, const char *name, size_t n)
{
	size_t sep = r->len ? 1 : 0, need = r->len + sep + n + 1;

	if (need > r->cap) {
		size_t cap = r->cap ? r->cap : 256;
		char *p;
		while (cap < need)
			cap *= 2;
		p = realloc(r->path, cap);
		if (!p) {
			rm_fail(r, "out of memory", ENOMEM);
			return -1;
		}
		r->path = p;
		r->cap = cap;
	}
	if (sep)
		r->path[r->len] = '/';
	memcpy(r->path + r->len + sep, name, n);
	r->len += sep + n;
	r->path[r->len] = '\0';
	return 0;
}

static void rm_pop(struct rm *r, size_t len)
{
	r->len = len;
	r->path[len] = '\0';
}

/* Another mount starts here: a different device, or (kernel >= 5.8) a mount root on the same
 * device, which is how a bind mount of a directory from the same file system shows. */
static int is_mount_point(const struct rm *r, int dfd, const char *name, const struct stat *st)
{
	struct statx sx;

	if (st->st_dev != r->dev)
		return 1;
	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &sx) == 0 &&
	    (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	return 0;
}

/* Reads the names in dfd (not . and ..) into one NUL-separated block, so no DIR stream
 * stays open while we descend: one fd per level of depth, not two. */
static char *read_names(struct rm *r, int dfd, size_t *total)
{
	int fd = dup(dfd);
	DIR *d;
	struct dirent *de;
	char *names = NULL;
	size_t len = 0, cap = 0;

	if (fd < 0 || !(d = fdopendir(fd))) {
		rm_fail(r, "cannot read directory", errno);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	rewinddir(d); /* the dup shares the offset with dfd */
	for (;;) {
		size_t n;
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				rm_fail(r, "cannot read directory", errno);
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n = strlen(de->d_name) + 1;
		if (len + n > cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			char *p;
			while (ncap < len + n)
				ncap *= 2;
			p = realloc(names, ncap);
			if (!p) {
				rm_fail(r, "out of memory", ENOMEM);
				break;
			}
			names = p;
			cap = ncap;
		}
		memcpy(names + len, de->d_name, n);
		len += n;
	}
	closedir(d);
	if (r->failed) {
		free(names);
		return NULL;
	}
	*total = len;
	return names;
}

static void rm_contents(struct rm *r, int dfd);

/* Removes the entry name in dfd; r->path already names it. */
static void rm_entry(struct rm *r, int dfd, const char *name)
{
	struct stat st, st2;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno != ENOENT)
			rm_fail(r, "cannot stat", errno);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
			rm_fail(r, "cannot remove", errno);
		return;
	}
	if (is_mount_point(r, dfd, name, &st)) {
		rm_fail(r, "is a mount point; not crossing it", EXDEV);
		return;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rm_fail(r, "cannot open directory", errno);
		return;
	}
	/* The name may have been swapped for another directory between the stat and the open. */
	if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		rm_fail(r, "changed while being removed", 0);
		close(fd);
		return;
	}
	/* A read-only directory (as unpacked from an archive) cannot have its entries removed. */
	if ((st.st_mode & 0700) != 0700)
		(void)fchmod(fd, (st.st_mode & 07777) | 0700);
	rm_contents(r, fd);
	close(fd);
	if (!r->failed && unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		rm_fail(r, "cannot remove directory", errno);
}

static void rm_contents(struct rm *r, int dfd)
{
	size_t total = 0, off, base = r->len;
	char *names = read_names(r, dfd, &total);

	if (!names)
		return;
	for (off = 0; off < total && !r->failed; off += strlen(names + off) + 1) {
		if (rm_push(r, names + off, strlen(names + off)) != 0)
			break;
		rm_entry(r, dfd, names + off);
		rm_pop(r, base);
	}
	free(names);
}

int glsb_rmtree(const char *path, char *err, size_t errlen, const char **code)
{
	struct rm r = {0};
	size_t n = strlen(path);
	char *dir;
	const char *name;
	char *slash;
	struct stat st;
	int pfd;

	r.err = err;
	r.errlen = errlen;
	while (n > 1 && path[n - 1] == '/')
		n--;
	dir = strndup(path, n);
	if (!dir) {
		snprintf(err, errlen, "rmtree: %s: %s", path, strerror(ENOMEM));
		if (code)
			*code = glsb_errno_code(ENOMEM);
		return -1;
	}
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		name = slash + 1;
	} else {
		name = dir;
	}
	if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		snprintf(err, errlen, "rmtree: %s: refusing to remove this path", path);
		if (code)
			*code = glsb_errno_code(EINVAL);
		free(dir);
		return -1;
	}
	/* Symlinks in the leading components are the caller's path; only the last is not followed. */
	pfd = open(slash ? (slash == dir ? "/" : dir) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		int e = errno;
		free(dir);
		if (e == ENOENT)
			return 0;
		snprintf(err, errlen, "rmtree: %s: %s", path, strerror(e));
		if (code)
			*code = glsb_errno_code(e);
		return -1;
	}
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		r.dev = st.st_dev;
		if (rm_push(&r, path, n) == 0)
			rm_entry(&r, pfd, name);
	} else if (errno != ENOENT) {
		int e = errno;
		snprintf(err, errlen, "rmtree: %s: %s", path, strerror(e));
		r.failed = 1;
		r.code = glsb_errno_code(e);
	}
	close(pfd);
	free(dir);
	free(r.path);
	if (r.failed && code)
		*code = r.code;
	return r.failed ? -1 : 0;
}

/* core.rmtree(path) -> true, or nil, message, code. */
static int l_rmtree(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	char err[PATH_MAX + 256];
	const char *code = NULL;

	if (glsb_rmtree(path, err, sizeof err, &code) != 0)
		return glsb_push_failure(L, err, code);
	lua_pushboolean(L, 1);
	return 1;
}

/* ---- mkdtemp ---- */

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/*
 * core.mkdtemp([prefix]) -> path of a new 0700 directory, or nil, message, code. prefix is a
 * template ending in XXXXXX, a directory ("/tmp", "/var/tmp/") to create glsb-XXXXXX in,
 * or a name prefix ("/tmp/work-") to which XXXXXX is appended. Default: $TMPDIR or /tmp.
 */
static int l_mkdtemp(lua_State *L)
{
	const char *prefix = luaL_optstring(L, 1, NULL);
	const char *suffix = "";
	struct stat st;
	char tmpl[PATH_MAX];

	if (!prefix) {
		prefix = getenv("TMPDIR");
		if (!prefix || !*prefix)
			prefix = "/tmp";
	}
	luaL_argcheck(L, *prefix != '\0', 1, "empty prefix");
	if (ends_with(prefix, "XXXXXX"))
		;
	else if (ends_with(prefix, "/"))
		suffix = "glsb-XXXXXX";
	else if (stat(prefix, &st) == 0 && S_ISDIR(st.st_mode))
		suffix = "/glsb-XXXXXX";
	else
		suffix = "XXXXXX";
	if ((size_t)snprintf(tmpl, sizeof tmpl, "%s%s", prefix, suffix) >= sizeof tmpl)
		return glsb_push_errno(L, "mkdtemp", prefix, ENAMETOOLONG);
	if (!mkdtemp(tmpl))
		return glsb_push_errno(L, "mkdtemp", tmpl, errno);
	lua_pushstring(L, tmpl);
	return 1;
}

/* ---- write_file_atomic ---- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * core.write_file_atomic(path, data [, mode]) -> true, or nil, message, code. Writes a hidden
 * temp file next to path, fsyncs it, renames it over path and fsyncs the directory, so a
 * reader (or a crash) sees the old content or the new, never a part. mode defaults to 0644.
 */
static int l_write_file_atomic(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	size_t n;
	const char *data = luaL_checklstring(L, 2, &n);
	lua_Integer mode = luaL_optinteger(L, 3, 0644);
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char *tmp = NULL, *dir = NULL;
	int fd = -1, e = 0, dfd, created = 0;

	luaL_argcheck(L, mode >= 0 && mode <= 07777, 3, "mode must be in 0..07777");
	luaL_argcheck(L, *base != '\0', 1, "names a directory");
	/* Allocated with malloc, not on the Lua stack, so no Lua error can strike before free. */
	tmp = malloc(strlen(path) + 16);
	dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!tmp || !dir) {
		free(tmp);
		free(dir);
		return luaL_error(L, "write_file_atomic: out of memory");
	}
	sprintf(tmp, "%.*s.%s.XXXXXX", (int)(base - path), path, base);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		goto fail;
	}
	created = 1;
	if (fchmod(fd, (mode_t)mode) != 0 || write_all(fd, data, n) != 0 || fsync(fd) != 0) {
		e = errno;
		goto fail;
	}
	if (close(fd) != 0) {
		fd = -1;
		e = errno;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		e = errno;
		goto fail;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd); /* durability of the rename; the data itself is already safe */
		close(dfd);
	}
	free(tmp);
	free(dir);
	lua_pushboolean(L, 1);
	return 1;
fail:
	if (fd >= 0)
		close(fd);
	if (created)
		(void)unlink(tmp);
	free(tmp);
	free(dir);
	return glsb_push_errno(L, "write_file_atomic", path, e);
}

/* ---- process and module facts ---- */

/* core.realpath(path) -> canonical absolute path, or nil, message, code. */
static int l_realpath(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	char r[PATH_MAX];

	if (!realpath(path, r))
		return glsb_push_errno(L, "realpath", path, errno);
	lua_pushstring(L, r);
	return 1;
}

static int l_getpid(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)getpid());
	return 1;
}

/* The file mapped at addr, from /proc/self/maps (absolute, whatever name dlopen was given). */
static int mapped_file(const void *addr, char out[PATH_MAX])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char *p;
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 ||
		    (uintptr_t)addr < lo || (uintptr_t)addr >= hi)
			continue;
		p = strchr(line, '/');
		if (p) {
			p[strcspn(p, "\n")] = '\0';
			/* A file replaced on disk after it was mapped (core.so rebuilt by make while a
			 * process still runs the old one) is listed as "<path> (deleted)": the path is
			 * still where its successor is. */
			size_t n = strlen(p);
			static const char deleted[] = " (deleted)";
			if (n > sizeof deleted - 1 && !strcmp(p + n - (sizeof deleted - 1), deleted))
				p[n - (sizeof deleted - 1)] = '\0';
			found = realpath(p, out) != NULL;
		}
		break;
	}
	fclose(f);
	return found;
}

/*
 * core.module_path() -> absolute path of the file holding this code: core.so when loaded
 * by require, the executable when the core is linked in (glsb-lua). dladdr alone is not
 * enough: for the main program it hands back argv[0], and for a shared object the name
 * given to dlopen, either of which may be relative to a directory we have since left.
 */
static int l_module_path(lua_State *L)
{
	Dl_info info;
	char r[PATH_MAX];

	if (!mapped_file((const void *)l_module_path, r) &&
	    !(dladdr((void *)l_module_path, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
	      realpath(info.dli_fname, r)))
		return glsb_push_failure(L, "module_path: cannot find the file holding the core", glsb_errno_code(ENOENT));
	lua_pushstring(L, r);
	return 1;
}

void glsb_open_fs(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"mkdtemp", l_mkdtemp},
		{"rmtree", l_rmtree},
		{"write_file_atomic", l_write_file_atomic},
		{"realpath", l_realpath},
		{"getpid", l_getpid},
		{"module_path", l_module_path},
		{NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
