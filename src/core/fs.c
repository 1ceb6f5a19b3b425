/* fs.c: temp directories, symlink-safe tree removal and moves, atomic file writes, what a path is (lstat) and
 * small files read without following a symlink or waiting on a FIFO, and where the core lives on disk. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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

/*
 * The walk is iterative, so neither the C stack nor the fds grow with the depth of the tree (a sandbox
 * can leave a 20,000-deep chain): at any time it holds the parent of the top, the directory it is in,
 * and one directory stream on it. Descending records where the stream was (telldir) and closes it;
 * coming back up opens ".." of the emptied child, checks it is the directory it came from (device and
 * inode: a rename underneath must not lead the walk elsewhere), removes the child, reopens the stream
 * and seeks back. What the walk keeps per level is on the heap: a name, a device and inode, an offset.
 */
struct level {
	char *name;       /* the directory's name in its parent */
	dev_t dev;
	ino_t ino;
	long off;         /* telldir position in this directory to resume at, 0 for the start */
	size_t pathlen;   /* r->path length before this level's name was appended */
	int rescans;      /* times this directory was found not empty after its walk (see go_up) */
};

struct walk {
	struct level *lv;
	size_t depth, cap;
	int pfd;          /* the top's parent (the caller's) */
	int cur;          /* the directory of lv[depth - 1] */
};

/* Opens name in dfd as a directory the walk may enter: not a symlink, not another mount, the inode
 * that fstatat saw, owner rwx (a read-only directory, as unpacked from an archive, cannot have its
 * entries removed). Returns the fd or -1 after rm_fail. */
static int enter_dir(struct rm *r, int dfd, const char *name, const struct stat *st)
{
	struct stat st2;
	int fd;

	if (is_mount_point(r, dfd, name, st)) {
		rm_fail(r, "is a mount point; not crossing it", EXDEV);
		return -1;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rm_fail(r, "cannot open directory", errno);
		return -1;
	}
	/* The name may have been swapped for another directory between the stat and the open. */
	if (fstat(fd, &st2) != 0 || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
		rm_fail(r, "changed while being removed", 0);
		close(fd);
		return -1;
	}
	if ((st->st_mode & 0700) != 0700)
		(void)fchmod(fd, (st->st_mode & 07777) | 0700);
	return fd;
}

/* Makes fd, the directory name (stat st) of the current level, the new current level; shown is what
 * messages add to the path (the whole path the caller gave, for the top). */
static int push_level(struct rm *r, struct walk *w, int fd, const char *name, const char *shown,
		      const struct stat *st)
{
	size_t pathlen = r->len;

	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct level *p = realloc(w->lv, cap * sizeof *p);
		if (!p) {
			rm_fail(r, "out of memory", ENOMEM);
			return -1;
		}
		w->lv = p;
		w->cap = cap;
	}
	struct level *l = &w->lv[w->depth];
	if (!(l->name = strdup(name)) || rm_push(r, shown, strlen(shown)) != 0) {
		free(l->name);
		rm_fail(r, "out of memory", ENOMEM);
		return -1;
	}
	l->dev = st->st_dev;
	l->ino = st->st_ino;
	l->off = 0;
	l->pathlen = pathlen;
	l->rescans = 0;
	w->depth++;
	w->cur = fd;
	return 0;
}

/*
 * The current directory was read to its end: go to its parent and remove it. Returns 1 when it was
 * removed (the parent is now current), 0 when it must be read again (entries appeared, or a seek after
 * removals skipped some: a few rescans are allowed), -1 after rm_fail.
 */
static int go_up(struct rm *r, struct walk *w)
{
	struct level *l = &w->lv[w->depth - 1];
	int parent;

	if (w->depth == 1) {
		parent = w->pfd;
	} else {
		struct stat st;
		const struct level *up = &w->lv[w->depth - 2];
		parent = openat(w->cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent < 0) {
			rm_fail(r, "cannot open the parent directory", errno);
			return -1;
		}
		if (fstat(parent, &st) != 0 || st.st_dev != up->dev || st.st_ino != up->ino) {
			close(parent);
			rm_fail(r, "moved while being removed", 0);
			return -1;
		}
	}
	if (unlinkat(parent, l->name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
		close(w->cur);
		w->cur = w->depth == 1 ? -1 : parent;
		rm_pop(r, l->pathlen);
		free(l->name);
		w->depth--;
		return 1;
	}
	int e = errno;
	if (parent != w->pfd)
		close(parent);
	if (e == ENOTEMPTY && l->rescans++ < 3) {
		l->off = 0;
		return 0;
	}
	rm_fail(r, "cannot remove directory", e);
	return -1;
}

/* Removes the directory name of pfd (stat st; path, for messages) and everything in it. */
static void rm_dir(struct rm *r, int pfd, const char *name, const char *path, const struct stat *st)
{
	struct walk w = {NULL, 0, 0, pfd, -1};
	DIR *d = NULL;
	int fd = enter_dir(r, pfd, name, st);

	if (fd < 0)
		return;
	if (push_level(r, &w, fd, name, path, st) != 0) {
		close(fd);
		return;
	}
	while (w.depth > 0 && !r->failed) {
		struct level *l = &w.lv[w.depth - 1];
		struct dirent *de;
		struct stat cst;

		if (!d) {
			int dfd = dup(w.cur);
			if (dfd < 0 || !(d = fdopendir(dfd))) {
				rm_fail(r, "cannot read directory", errno);
				if (dfd >= 0)
					close(dfd);
				break;
			}
			rewinddir(d); /* the dup shares the offset with w.cur */
			if (l->off)
				seekdir(d, l->off);
		}
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				rm_fail(r, "cannot read directory", errno);
				break;
			}
			closedir(d);
			d = NULL;
			if (go_up(r, &w) < 0)
				break;
			continue;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t base = r->len;
		if (rm_push(r, de->d_name, strlen(de->d_name)) != 0)
			break;
		if (fstatat(w.cur, de->d_name, &cst, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno != ENOENT)
				rm_fail(r, "cannot stat", errno);
			rm_pop(r, base);
			continue;
		}
		if (!S_ISDIR(cst.st_mode)) {
			if (unlinkat(w.cur, de->d_name, 0) != 0 && errno != ENOENT)
				rm_fail(r, "cannot remove", errno);
			rm_pop(r, base);
			continue;
		}
		/* Down one level: remember where this directory's listing was, and let its stream go. */
		l->off = telldir(d);
		int child = enter_dir(r, w.cur, de->d_name, &cst);
		if (child < 0)
			break;
		rm_pop(r, base); /* push_level names it again */
		int parent = w.cur;
		if (push_level(r, &w, child, de->d_name, de->d_name, &cst) != 0) {
			close(child);
			break;
		}
		close(parent);
		closedir(d); /* after push_level: de points into the stream */
		d = NULL;
	}
	if (d)
		closedir(d);
	if (w.depth > 0 && w.cur >= 0 && w.cur != pfd)
		close(w.cur);
	for (size_t i = 0; i < w.depth; i++)
		free(w.lv[i].name);
	free(w.lv);
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
		if (!S_ISDIR(st.st_mode)) {
			if (rm_push(&r, path, n) == 0 && unlinkat(pfd, name, 0) != 0 && errno != ENOENT)
				rm_fail(&r, "cannot remove", errno);
		} else {
			rm_dir(&r, pfd, name, path, &st);
		}
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
 * core.write_file_atomic(path, data [, mode [, sync = true]]) -> true, or nil, message, code. Writes a
 * hidden temp file next to path, fsyncs it, renames it over path and fsyncs the directory, so a
 * reader (or a crash) sees the old content or the new, never a part. mode defaults to 0644. sync =
 * false leaves out both fsyncs: a reader still sees the old content or the new, a crash may leave
 * neither (for what does not outlive this boot anyway: a live sandbox's listing). An fsync on a
 * shared disk took 1.4 ms at the median here and 10 to 30 ms under others' writes.
 */
static int l_write_file_atomic(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	size_t n;
	const char *data = luaL_checklstring(L, 2, &n);
	lua_Integer mode = luaL_optinteger(L, 3, 0644);
	int sync = lua_isnoneornil(L, 4) || lua_toboolean(L, 4);
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
	if (fchmod(fd, (mode_t)mode) != 0 || write_all(fd, data, n) != 0 || (sync && fsync(fd) != 0)) {
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
	dfd = sync ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
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

/* ---- move_dir_beneath ---- */

/* Is fd the root of a mount (another mount, or a bind mount of the same file system)? */
static int fd_is_mount_root(int fd, dev_t dev)
{
	struct statx sx;
	struct stat st;

	if (fstat(fd, &st) != 0 || st.st_dev != dev)
		return 1;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &sx) == 0 &&
	    (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	return 0;
}

/* A component of a path someone else wrote: not empty, ".", ".." nor too long. Copies it to name. */
static const char *check_component(const char *p, size_t n, char name[NAME_MAX + 1])
{
	if (n == 0)
		return "empty component";
	if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
		return "'.' or '..' component";
	if (n > NAME_MAX)
		return "component too long";
	memcpy(name, p, n);
	name[n] = '\0';
	return NULL;
}

/* Why the entry name in dirfd cannot be walked into or moved, or NULL when it is a directory. */
static const char *not_a_dir(int dirfd, const char *name, struct stat *st, int *e)
{
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) != 0) {
		*e = errno;
		return "cannot stat";
	}
	if (S_ISLNK(st->st_mode))
		return "is a symlink (not followed)";
	if (!S_ISDIR(st->st_mode))
		return "is not a directory";
	return NULL;
}

/*
 * Opens the directory rel below rootfd one component at a time (O_NOFOLLOW, O_DIRECTORY), so that
 * nothing in a tree someone else wrote can redirect the walk: a symlink, a "..", another mount is
 * refused. Returns the fd, or -1 with *why (and *e, an errno, when there is one).
 */
static int open_dir_beneath(int rootfd, const char *rel, size_t len, const char **why, int *e)
{
	struct stat root;
	const char *p = rel, *end = rel + len;
	int fd;

	if (fstat(rootfd, &root) != 0 || (fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3)) < 0) {
		*e = errno;
		*why = "cannot open the root";
		return -1;
	}
	while (p < end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t n = slash ? (size_t)(slash - p) : (size_t)(end - p);
		char name[NAME_MAX + 1];
		struct stat st;
		int next;

		*why = check_component(p, n, name);
		if (!*why)
			*why = not_a_dir(fd, name, &st, e);
		if (*why) {
			close(fd);
			return -1;
		}
		next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		if (next < 0) {
			*e = errno;
			*why = "cannot open";
			return -1;
		}
		if (fd_is_mount_root(next, root.st_dev)) {
			close(next);
			*why = "is another mount (not crossed)";
			return -1;
		}
		fd = next;
		p += n + (slash ? 1 : 0);
	}
	return fd;
}

/* nil, message, code: code is e's name when a call failed, else the errno name that says the refusal
 * (ELOOP: a symlink; ENOTDIR; EXDEV: another mount; EINVAL: a bad component), TREE_CHANGED for a swap. */
static int push_refusal(lua_State *L, const char *root, const char *rel, const char *why, int e)
{
	const char *code;

	if (e)
		code = glsb_errno_code(e);
	else if (strstr(why, "symlink"))
		code = glsb_errno_code(ELOOP);
	else if (strstr(why, "not a directory"))
		code = glsb_errno_code(ENOTDIR);
	else if (strstr(why, "mount"))
		code = glsb_errno_code(EXDEV);
	else if (strstr(why, "changed"))
		code = glsb_code_name(GLSB_TREE_CHANGED);
	else
		code = glsb_errno_code(EINVAL);
	lua_pushnil(L);
	if (e)
		lua_pushfstring(L, "move_dir_beneath: %s/%s: %s: %s", root, rel, why, strerror(e));
	else
		lua_pushfstring(L, "move_dir_beneath: %s/%s: %s", root, rel, why);
	lua_pushstring(L, code);
	return 3;
}

/*
 * core.move_dir_beneath(root, rel, dest) -> true, or nil, message, code. Moves the directory root/rel to
 * dest (which must not exist) for a caller that trusts root and dest's parent but not what is below
 * root (a tree a sandbox wrote): rel is walked component by component without following a symlink,
 * "." or "..", or entering another mount; rel itself must be a directory, not a symlink to one; the
 * rename never replaces anything (RENAME_NOREPLACE) and is undone if what arrived is not the
 * directory that was checked (swapped in between).
 */
static int l_move_dir_beneath(lua_State *L)
{
	const char *root = luaL_checkstring(L, 1);
	size_t rlen;
	const char *rel = luaL_checklstring(L, 2, &rlen);
	const char *dest = luaL_checkstring(L, 3);
	const char *last = rel + rlen, *dslash = strrchr(dest, '/');
	char name[NAME_MAX + 1], dname[NAME_MAX + 1], ddir[PATH_MAX];
	const char *why = NULL;
	struct stat before, after;
	int rootfd, parent, dfd, e = 0;

	while (last > rel && last[-1] != '/')
		last--;
	luaL_argcheck(L, rlen > 0 && rel[0] != '/' && memchr(rel, '\0', rlen) == NULL, 2,
		      "must be a non-empty relative path");
	luaL_argcheck(L, dslash && dslash[1] && (size_t)(dslash - dest) < sizeof ddir, 3,
		      "must be an absolute path naming an entry");
	if ((why = check_component(last, (size_t)(rel + rlen - last), name)) != NULL ||
	    (memmem(rel, rlen, "//", 2) && (why = "empty component")))
		return push_refusal(L, root, rel, why, 0);
	memcpy(ddir, dest, (size_t)(dslash - dest));
	ddir[dslash == dest ? 1 : dslash - dest] = '\0';
	if (dslash == dest)
		ddir[0] = '/';
	if ((why = check_component(dslash + 1, strlen(dslash + 1), dname)) != NULL)
		return push_refusal(L, root, rel, "bad destination name", 0);

	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return glsb_push_errno(L, "move_dir_beneath", root, errno);
	parent = open_dir_beneath(rootfd, rel, last > rel ? (size_t)(last - rel - 1) : 0, &why, &e);
	close(rootfd);
	if (parent < 0)
		return push_refusal(L, root, rel, why, e);
	if ((why = not_a_dir(parent, name, &before, &e)) != NULL) {
		close(parent);
		return push_refusal(L, root, rel, why, e);
	}
	dfd = open(ddir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		e = errno;
		close(parent);
		return glsb_push_errno(L, "move_dir_beneath", ddir, e);
	}
	if (renameat2(parent, name, dfd, dname, RENAME_NOREPLACE) != 0) {
		e = errno;
		close(parent);
		close(dfd);
		return glsb_push_errno(L, "move_dir_beneath", dest, e);
	}
	if (fstatat(dfd, dname, &after, AT_SYMLINK_NOFOLLOW) != 0 || after.st_dev != before.st_dev ||
	    after.st_ino != before.st_ino) {
		(void)renameat2(dfd, dname, parent, name, RENAME_NOREPLACE);
		close(parent);
		close(dfd);
		return push_refusal(L, root, rel, "changed while being moved", 0);
	}
	close(parent);
	close(dfd);
	lua_pushboolean(L, 1);
	return 1;
}

/* ---- listdir ---- */

/* core.listdir(path) -> array of the names in the directory (not . and ..; unsorted), or nil, message,
 * code. For finding things by name without a process (ls) per call. */
static int l_listdir(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	DIR *d = opendir(path);
	struct dirent *de;
	lua_Integer n = 0;

	if (!d)
		return glsb_push_errno(L, "listdir", path, errno);
	lua_newtable(L);
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		lua_pushstring(L, de->d_name);
		lua_rawseti(L, -2, ++n);
	}
	if (errno) {
		int e = errno;
		closedir(d);
		return glsb_push_errno(L, "listdir", path, e);
	}
	closedir(d);
	return 1;
}

/* ---- what a path is, small files of our own ---- */

static const char *file_type(mode_t m)
{
	return S_ISDIR(m) ? "dir" : S_ISREG(m) ? "file" : S_ISLNK(m) ? "link" : S_ISFIFO(m) ? "fifo"
	       : S_ISSOCK(m) ? "socket" : S_ISCHR(m) || S_ISBLK(m) ? "device" : "other";
}

/* core.lstat(path) -> {type = "dir"|"file"|"link"|"fifo"|"socket"|"device"|"other", uid, mode
 * (permission bits), size, mtime (ns since the epoch)}, or nil, message, code. A symlink is described,
 * never followed. */
static int l_lstat(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	struct stat st;

	if (lstat(path, &st) < 0)
		return glsb_push_errno(L, "lstat", path, errno);
	lua_createtable(L, 0, 5);
	lua_pushstring(L, file_type(st.st_mode));
	lua_setfield(L, -2, "type");
	lua_pushinteger(L, (lua_Integer)st.st_uid);
	lua_setfield(L, -2, "uid");
	lua_pushinteger(L, (lua_Integer)(st.st_mode & 07777));
	lua_setfield(L, -2, "mode");
	lua_pushinteger(L, (lua_Integer)st.st_size);
	lua_setfield(L, -2, "size");
	lua_pushinteger(L, (lua_Integer)st.st_mtim.tv_sec * 1000000000 + (lua_Integer)st.st_mtim.tv_nsec);
	lua_setfield(L, -2, "mtime");
	return 1;
}

/* core.mkdir(path[, mode]) -> true, or nil, message, code (EEXIST when something is there already).
 * mode defaults to 0700; the parent must exist. */
static int l_mkdir(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	lua_Integer mode = luaL_optinteger(L, 2, 0700);

	luaL_argcheck(L, mode >= 0 && mode <= 07777, 2, "mode must be in 0..07777");
	if (mkdir(path, (mode_t)mode) < 0)
		return glsb_push_errno(L, "mkdir", path, errno);
	lua_pushboolean(L, 1);
	return 1;
}

/* core.read_own_file(path, cap) -> the content, or nil, message, code. Only a regular file owned by
 * our effective uid, at most cap bytes, is read: the open never follows a symlink (ELOOP), never
 * waits for a FIFO's writer (O_NONBLOCK; a FIFO is then refused by its type), and never reads past
 * cap + 1 bytes whatever the file claims (a file that grows while read is refused too). For records
 * in directories others could have planted something in. */
static int l_read_own_file(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	lua_Integer cap = luaL_checkinteger(L, 2);
	luaL_Buffer b;
	struct stat st;
	size_t got = 0;
	int e = 0;

	luaL_argcheck(L, cap >= 0 && cap <= (1 << 24), 2, "cap must be in 0..16 MiB");
	/* the buffer first: nothing may raise once the descriptor is open */
	char *buf = luaL_buffinitsize(L, &b, (size_t)cap + 1);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return glsb_push_errno(L, "read_own_file", path, errno);
	if (fstat(fd, &st) < 0) {
		e = errno;
	} else if (!S_ISREG(st.st_mode)) {
		close(fd);
		lua_pushnil(L);
		lua_pushfstring(L, "read_own_file: %s: a %s, not a regular file", path, file_type(st.st_mode));
		lua_pushstring(L, glsb_errno_code(EINVAL));
		return 3;
	} else if (st.st_uid != geteuid()) {
		close(fd);
		lua_pushnil(L);
		lua_pushfstring(L, "read_own_file: %s: owned by uid %d, not by us (uid %d)", path, (int)st.st_uid,
				(int)geteuid());
		lua_pushstring(L, glsb_errno_code(EPERM));
		return 3;
	}
	while (!e && got <= (size_t)cap) {
		ssize_t n = read(fd, buf + got, (size_t)cap + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			e = errno;
		else if (n == 0)
			break;
		else
			got += (size_t)n;
	}
	close(fd);
	if (e)
		return glsb_push_errno(L, "read_own_file", path, e);
	if (got > (size_t)cap) {
		lua_pushnil(L);
		lua_pushfstring(L, "read_own_file: %s: larger than %d bytes", path, (int)cap);
		lua_pushstring(L, glsb_errno_code(EFBIG));
		return 3;
	}
	luaL_pushresultsize(&b, got);
	return 1;
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

static int l_geteuid(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)geteuid());
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
int glsb_core_file(char out[PATH_MAX])
{
	Dl_info info;

	return mapped_file((const void *)glsb_core_file, out) ||
	       (dladdr((void *)glsb_core_file, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
		realpath(info.dli_fname, out));
}

/* isatty(fd) -> true, columns (nil when the terminal does not say) | false: whether fd is a terminal, for
 * output meant for a person (progress lines, colours) that a pipe or a file must not get. */
static int l_isatty(lua_State *L)
{
	int fd = (int)luaL_checkinteger(L, 1);
	struct winsize ws;

	if (!isatty(fd)) {
		lua_pushboolean(L, 0);
		return 1;
	}
	lua_pushboolean(L, 1);
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		lua_pushinteger(L, ws.ws_col);
	else
		lua_pushnil(L);
	return 2;
}

static int l_module_path(lua_State *L)
{
	char r[PATH_MAX];

	if (!glsb_core_file(r))
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
		{"move_dir_beneath", l_move_dir_beneath},
		{"listdir", l_listdir},
		{"realpath", l_realpath},
		{"getpid", l_getpid},
		{"geteuid", l_geteuid},
		{"isatty", l_isatty},
		{"lstat", l_lstat},
		{"mkdir", l_mkdir},
		{"read_own_file", l_read_own_file},
		{"module_path", l_module_path},
		{NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
