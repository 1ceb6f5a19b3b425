/* test_fs.c: mkdtemp, rmtree (never following symlinks, never crossing mounts), write_file_atomic, move_dir_beneath,
 * listdir, realpath, module_path. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "check.h"
#include "core.h"
#include "fs.h"

static lua_State *L;
static char base[512]; /* a private scratch directory for the whole run */

/* Runs a Lua chunk with (core, arg) as `...`; returns the number of results left on the stack,
 * or -1 after printing the error. */
static int run_q(const char *code, const char *arg, int quiet);

static int run(const char *code, const char *arg)
{
	return run_q(code, arg, 0);
}

/* Misuse raises "bad argument": 1 when it did. */
static int misuse(const char *code, const char *arg)
{
	int ok;

	if (run_q(code, arg, 1) != -1)
		return 0;
	ok = strstr(lua_tostring(L, -1), "bad argument") != NULL;
	lua_pop(L, 1);
	return ok;
}

static int run_q(const char *code, const char *arg, int quiet)
{
	int top = lua_gettop(L);

	if (luaL_loadstring(L, code) != 0)
		goto err;
	lua_getglobal(L, "core");
	if (arg)
		lua_pushstring(L, arg);
	else
		lua_pushnil(L);
	if (lua_pcall(L, 2, LUA_MULTRET, 0) != 0)
		goto err;
	return lua_gettop(L) - top;
err:
	if (quiet) {
		lua_settop(L, top + 1); /* the error message stays for the caller */
	} else {
		fprintf(stderr, "  lua: %s\n", lua_tostring(L, -1));
		lua_settop(L, top);
	}
	return -1;
}

static void path_in(char *out, const char *rel)
{
	snprintf(out, PATH_MAX, "%s/%s", base, rel);
}

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static int file_is(const char *path, const char *text)
{
	char buf[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf);
	close(fd);
	return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int count_entries(const char *dir)
{
	char cmd[PATH_MAX + 64];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
	f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static void test_mkdtemp(void)
{
	struct stat st;
	char want[PATH_MAX];
	const char *p;

	/* a full template */
	snprintf(want, sizeof want, "%s/t-XXXXXX", base);
	CHECK(run("local core, a = ...; return core.mkdtemp(a)", want) == 1);
	p = lua_tostring(L, -1);
	CHECK(p && strncmp(p, base, strlen(base)) == 0 && strlen(p) == strlen(want));
	CHECK(p && strstr(p, "XXXXXX") == NULL);
	CHECK(p && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
	lua_pop(L, 1);

	/* a directory: glsb-XXXXXX inside it, with or without the slash */
	CHECK(run("local core, a = ...; return core.mkdtemp(a)", base) == 1);
	p = lua_tostring(L, -1);
	snprintf(want, sizeof want, "%s/glsb-", base);
	CHECK(p && strncmp(p, want, strlen(want)) == 0 && strlen(p) == strlen(want) + 6);
	CHECK(p && stat(p, &st) == 0 && S_ISDIR(st.st_mode));
	lua_pop(L, 1);
	snprintf(want, sizeof want, "%s/", base);
	CHECK(run("local core, a = ...; return core.mkdtemp(a)", want) == 1);
	p = lua_tostring(L, -1);
	CHECK(p && strncmp(p, want, strlen(want)) == 0 && strstr(p, "/glsb-") && stat(p, &st) == 0);
	lua_pop(L, 1);

	/* a name prefix */
	snprintf(want, sizeof want, "%s/work-", base);
	CHECK(run("local core, a = ...; return core.mkdtemp(a)", want) == 1);
	p = lua_tostring(L, -1);
	CHECK(p && strncmp(p, want, strlen(want)) == 0 && strlen(p) == strlen(want) + 6 && stat(p, &st) == 0);
	lua_pop(L, 1);

	/* the default lands in $TMPDIR or /tmp and is distinct each time */
	CHECK(run("local core = ...; local a, b = core.mkdtemp(), core.mkdtemp();"
		  "local ok = a ~= b and core.rmtree(a) and core.rmtree(b); return ok", NULL) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);

	/* failures of the world are values, misuse raises */
	CHECK(run("local core = ...; return core.mkdtemp('/nonexistent-glsb/x-XXXXXX')", NULL) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "/nonexistent-glsb/x-") != NULL);
	CHECK_STR(lua_tostring(L, -1), "ENOENT");
	lua_pop(L, 3);
	CHECK(misuse("local core = ...; return core.mkdtemp({})", NULL));
	CHECK(misuse("local core = ...; return core.mkdtemp('')", NULL));
}

/* base/outside holds a dir and a file that every rmtree below must leave alone. */
static void make_outside(void)
{
	char p[PATH_MAX];

	path_in(p, "outside");
	mkdir(p, 0755);
	path_in(p, "outside/keep.txt");
	write_text(p, "keep");
	path_in(p, "outside/sub");
	mkdir(p, 0755);
	path_in(p, "outside/sub/deep.txt");
	write_text(p, "deep");
	path_in(p, "outside-file");
	write_text(p, "file");
}

static int outside_intact(void)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];

	path_in(a, "outside/keep.txt");
	path_in(b, "outside/sub/deep.txt");
	path_in(c, "outside-file");
	return file_is(a, "keep") && file_is(b, "deep") && file_is(c, "file");
}

static void test_rmtree_no_follow(void)
{
	char t[PATH_MAX], p[PATH_MAX], o[PATH_MAX];

	make_outside();
	path_in(t, "tree");
	mkdir(t, 0755);
	path_in(p, "tree/a");
	mkdir(p, 0755);
	path_in(p, "tree/a/b");
	mkdir(p, 0755);
	path_in(p, "tree/a/b/f.txt");
	write_text(p, "x");
	/* symlinks to a directory and a file outside, at two depths, and a dangling one */
	path_in(o, "outside");
	path_in(p, "tree/link-dir");
	CHECK(symlink(o, p) == 0);
	path_in(p, "tree/a/b/link-dir");
	CHECK(symlink("../../../outside", p) == 0);
	path_in(o, "outside-file");
	path_in(p, "tree/a/link-file");
	CHECK(symlink(o, p) == 0);
	path_in(p, "tree/dangling");
	CHECK(symlink("/nonexistent-glsb", p) == 0);
	/* a read-only directory with content (as an unpacked archive may have) */
	path_in(p, "tree/ro");
	mkdir(p, 0755);
	path_in(p, "tree/ro/f");
	write_text(p, "ro");
	path_in(p, "tree/ro");
	chmod(p, 0500);
	/* a fifo is removed like any other non-directory */
	path_in(p, "tree/a/fifo");
	CHECK(mkfifo(p, 0600) == 0);

	CHECK(run("local core, a = ...; return core.rmtree(a)", t) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);
	CHECK(!exists(t));
	CHECK(outside_intact());
}

static void test_rmtree_top_symlink(void)
{
	char p[PATH_MAX], o[PATH_MAX], slash[PATH_MAX + 1];

	/* The path itself a symlink to a directory: the link goes, the directory stays. */
	path_in(o, "outside");
	path_in(p, "top-link");
	CHECK(symlink(o, p) == 0);
	CHECK(run("local core, a = ...; return core.rmtree(a)", p) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);
	CHECK(!exists(p));
	CHECK(outside_intact());

	/* A trailing slash (which would make the kernel follow the link) changes nothing. */
	CHECK(symlink(o, p) == 0);
	snprintf(slash, sizeof slash, "%s/", p);
	CHECK(glsb_rmtree(slash, o, sizeof o, NULL) == 0);
	CHECK(!exists(p));
	CHECK(outside_intact());
}

static void test_rmtree_edges(void)
{
	char p[PATH_MAX], err[256];

	/* missing path, missing parent: success */
	path_in(p, "never-there");
	CHECK(glsb_rmtree(p, err, sizeof err, NULL) == 0);
	path_in(p, "never/there/either");
	CHECK(glsb_rmtree(p, err, sizeof err, NULL) == 0);
	/* a plain file */
	path_in(p, "plain");
	write_text(p, "x");
	CHECK(glsb_rmtree(p, err, sizeof err, NULL) == 0);
	CHECK(!exists(p));
	/* paths it refuses */
	CHECK(glsb_rmtree("/", err, sizeof err, NULL) != 0);
	CHECK(strstr(err, "refusing") != NULL);
	CHECK(glsb_rmtree("", err, sizeof err, NULL) != 0);
	CHECK(glsb_rmtree(".", err, sizeof err, NULL) != 0);
	CHECK(glsb_rmtree("..", err, sizeof err, NULL) != 0);
	path_in(p, "outside/..");
	CHECK(glsb_rmtree(p, err, sizeof err, NULL) != 0);
	CHECK(outside_intact());
	/* a non-directory in the middle of the path is a failure of the world, reported */
	path_in(p, "outside-file/x");
	CHECK(run("local core, a = ...; return core.rmtree(a)", p) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "outside-file") != NULL);
	CHECK_STR(lua_tostring(L, -1), "ENOTDIR");
	lua_pop(L, 3);
	CHECK(run("local core = ...; return core.rmtree(42)", NULL) == 1); /* numbers convert */
	lua_pop(L, 1);
	CHECK(misuse("local core = ...; return core.rmtree()", NULL));
}

/* Enter a private mount namespace: as root directly, else through a user namespace. */
static int private_mounts(void)
{
	if (unshare(CLONE_NEWNS) != 0) {
		uid_t uid = getuid();
		gid_t gid = getgid();
		char map[64];
		int fd;
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
			return -1;
		fd = open("/proc/self/setgroups", O_WRONLY);
		if (fd >= 0) {
			(void)!write(fd, "deny", 4);
			close(fd);
		}
		snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
		fd = open("/proc/self/uid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			return -1;
		close(fd);
		snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
		fd = open("/proc/self/gid_map", O_WRONLY);
		if (fd < 0 || write(fd, map, strlen(map)) < 0)
			return -1;
		close(fd);
	}
	return mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL);
}

/* In a child with its own mount namespace: mount `how` at tree/mnt and rmtree the tree.
 * Exit codes: 0 refused and outside intact, 2 no namespace, 3 mount failed, 1 otherwise. */
static int mount_child(int bind)
{
	char t[PATH_MAX], m[PATH_MAX], o[PATH_MAX], err[PATH_MAX + 256];
	int rc;

	if (private_mounts() != 0)
		return 2;
	path_in(t, "mtree");
	path_in(m, "mtree/mnt");
	path_in(o, "outside");
	if (bind)
		rc = mount(o, m, "none", MS_BIND, NULL); /* same device: only the mount root attribute tells */
	else
		rc = mount("tmpfs", m, "tmpfs", 0, "size=64k");
	if (rc != 0)
		return 3;
	if (!bind) {
		char f[PATH_MAX];
		path_in(f, "mtree/mnt/in-tmpfs");
		write_text(f, "t");
		if (!file_is(f, "t"))
			return 1;
	}
	rc = glsb_rmtree(t, err, sizeof err, NULL);
	if (rc == 0 || !strstr(err, "mount point") || !strstr(err, "mtree/mnt"))
		return 1;
	if (bind && !outside_intact())
		return 1;
	if (!bind) {
		char f[PATH_MAX];
		path_in(f, "mtree/mnt/in-tmpfs");
		if (!file_is(f, "t"))
			return 1;
	}
	return 0;
}

static void test_rmtree_mounts(void)
{
	int bind;

	for (bind = 0; bind < 2; bind++) {
		char t[PATH_MAX], m[PATH_MAX];
		pid_t pid;
		int status = 0;

		path_in(t, "mtree");
		path_in(m, "mtree/mnt");
		mkdir(t, 0755);
		mkdir(m, 0755);
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			int rc = mount_child(bind);
			lua_close(L); /* the child's copy, so leak checkers see a clean exit */
			_exit(rc);
		}
		CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
			fprintf(stderr, "  cannot enter a mount namespace (need root or user namespaces)\n");
		if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
			fprintf(stderr, "  mount(%s) failed in the child\n", bind ? "bind" : "tmpfs");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		/* back in our namespace the mount is gone: the tree goes entirely */
		CHECK(glsb_rmtree(t, m, sizeof m, NULL) == 0);
		CHECK(!exists(t));
		CHECK(outside_intact());
	}
}

/* Builds a chain of `depth` directories "d" under top (each also holding a file), with mkdirat and
 * at most two fds open: paths this long cannot be named at all. Returns 0 or -1. */
static int make_chain(const char *top, int depth)
{
	int fd, next, i;

	if (mkdir(top, 0755) != 0 || (fd = open(top, O_RDONLY | O_DIRECTORY)) < 0)
		return -1;
	for (i = 0; i < depth; i++) {
		int f = openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (f < 0 || close(f) != 0 || mkdirat(fd, "d", i % 97 == 0 ? 0500 : 0755) != 0 ||
		    (next = openat(fd, "d", O_RDONLY | O_DIRECTORY)) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		fd = next;
	}
	close(fd);
	return 0;
}

/* A 20,000-deep chain (a sandbox can leave one) goes entirely with 32 fds and a 256 KiB stack: the walk
 * holds neither a C frame nor an fd per level. Some levels are read-only (0500), as unpacked trees are. */
static void test_rmtree_deep(void)
{
	char shm[] = "/dev/shm/glsb-test-fs-XXXXXX", t[PATH_MAX];
	pid_t pid;
	int status = 0;
	/* On tmpfs when there is one: 20,000 mkdirs cost seconds on a journaled disk, milliseconds there. */
	int on_shm = mkdtemp(shm) != NULL;

	if (on_shm)
		snprintf(t, sizeof t, "%s/deep", shm);
	else
		path_in(t, "deep");
	CHECK(make_chain(t, 20000) == 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct rlimit fds = {32, 32}, stack = {256 << 10, 256 << 10};
		char err[PATH_MAX + 256];
		const char *preload = getenv("LD_PRELOAD");
		int rc;
		if (setrlimit(RLIMIT_NOFILE, &fds) != 0 || setrlimit(RLIMIT_STACK, &stack) != 0) {
			/* valgrind keeps fds of its own and refuses lower limits: there the walk runs unlimited,
			 * for the memory checks; the plain and ASan runs enforce the limits. */
			if (!preload || !strstr(preload, "vgpreload")) {
				lua_close(L);
				_exit(3);
			}
			fprintf(stderr, "  under valgrind: fd and stack limits not applied\n");
		}
		rc = glsb_rmtree(t, err, sizeof err, NULL);
		if (rc != 0)
			fprintf(stderr, "  %s\n", err);
		lua_close(L);
		_exit(rc == 0 ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!exists(t));
	if (exists(t)) { /* the child failed: leave nothing behind either way */
		char err[PATH_MAX + 256];
		glsb_rmtree(t, err, sizeof err, NULL);
	}
	if (on_shm)
		CHECK(rmdir(shm) == 0);
}

/* A wide tree: many subdirectories in one directory, each with files, then a chain in the middle. The
 * walk resumes each listing where it left it (telldir/seekdir) and misses nothing. */
static void test_rmtree_wide(void)
{
	char t[PATH_MAX], p[PATH_MAX + 64];
	int i, j;

	path_in(t, "wide");
	CHECK(mkdir(t, 0755) == 0);
	for (i = 0; i < 600; i++) {
		snprintf(p, sizeof p, "%s/s%d", t, i);
		mkdir(p, 0755);
		for (j = 0; j < 2; j++) {
			snprintf(p, sizeof p, "%s/s%d/f%d", t, i, j);
			write_text(p, "x");
		}
		snprintf(p, sizeof p, "%s/file%d", t, i);
		write_text(p, "y");
	}
	snprintf(p, sizeof p, "%s/s300/chain", t);
	CHECK(make_chain(p, 300) == 0);
	CHECK(run("local core, a = ...; return core.rmtree(a)", t) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);
	CHECK(!exists(t));
}

static void test_write_file_atomic(void)
{
	char d[PATH_MAX], p[PATH_MAX];
	struct stat st;

	path_in(d, "atomic");
	mkdir(d, 0755);
	path_in(p, "atomic/f.json");
	CHECK(run("local core, a = ...; return core.write_file_atomic(a, 'one\\0two', 384)", p) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600 && st.st_size == 7);
	/* overwrite; default mode 0644; no temp file left behind */
	CHECK(run("local core, a = ...; return core.write_file_atomic(a, 'new')", p) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);
	CHECK(file_is(p, "new"));
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0644);
	CHECK(count_entries(d) == 1);
	/* a relative path works too */
	CHECK(run("local core, a = ...; return core.write_file_atomic(a, '')", "glsb-test-rel.tmp") == 1);
	CHECK(lua_toboolean(L, -1) && exists("glsb-test-rel.tmp"));
	lua_pop(L, 1);
	unlink("glsb-test-rel.tmp");
	/* failures: missing directory, target is a directory; nothing left behind */
	path_in(p, "atomic/missing/f");
	CHECK(run("local core, a = ...; return core.write_file_atomic(a, 'x')", p) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "atomic/missing/f") != NULL);
	CHECK_STR(lua_tostring(L, -1), "ENOENT");
	lua_pop(L, 3);
	path_in(p, "atomic/sub");
	mkdir(p, 0755);
	CHECK(run("local core, a = ...; return core.write_file_atomic(a, 'x')", p) == 3);
	CHECK(lua_isnil(L, -3));
	CHECK_STR(lua_tostring(L, -1), "EISDIR");
	lua_pop(L, 3);
	CHECK(count_entries(d) == 2);
	/* misuse */
	CHECK(misuse("local core, a = ...; return core.write_file_atomic(a, 'x', 8^5)", p));
	CHECK(misuse("local core, a = ...; return core.write_file_atomic(a, 'x', -1)", p));
	CHECK(misuse("local core, a = ...; return core.write_file_atomic(a .. '/', 'x')", d));
	CHECK(misuse("local core, a = ...; return core.write_file_atomic(a)", p));
}

/* Moves out of a tree a sandbox wrote (root/...): never through a symlink, never a symlink itself. */
static void test_move_dir_beneath(void)
{
	char root[PATH_MAX], p[PATH_MAX], dest[PATH_MAX], o[PATH_MAX];
	static const char code[] = "local core, a = ...; local root, rel, dest = a:match('^(.-)|(.-)|(.*)$')\n"
				   "return core.move_dir_beneath(root, rel, dest)";
	char arg[3 * PATH_MAX + 4];

	make_outside();
	path_in(root, "mv");
	mkdir(root, 0755);
	path_in(p, "mv/layer");
	mkdir(p, 0755);
	path_in(p, "mv/layer/site");
	mkdir(p, 0755);
	path_in(p, "mv/layer/site/pkg.py");
	write_text(p, "pkg");
	path_in(dest, "site-moved");

	/* the good case: a real directory below real directories */
	snprintf(arg, sizeof arg, "%s|layer/site|%s", root, dest);
	CHECK(run(code, arg) == 1);
	CHECK(lua_toboolean(L, -1));
	lua_pop(L, 1);
	path_in(p, "site-moved/pkg.py");
	CHECK(file_is(p, "pkg"));
	/* the destination is never replaced */
	path_in(p, "mv/layer/site");
	mkdir(p, 0755);
	CHECK(run(code, arg) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "site-moved") != NULL);
	lua_pop(L, 3);
	CHECK(exists(p));

	/* a symlinked component: "layer" -> outside; nothing outside moves */
	path_in(o, "outside");
	path_in(p, "mv/link");
	CHECK(symlink(o, p) == 0);
	path_in(dest, "never-there");
	snprintf(arg, sizeof arg, "%s|link/sub|%s", root, dest);
	CHECK(run(code, arg) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "symlink") != NULL);
	CHECK_STR(lua_tostring(L, -1), "ELOOP");
	lua_pop(L, 3);
	/* the last component a symlink to a directory */
	snprintf(arg, sizeof arg, "%s|link|%s", root, dest);
	CHECK(run(code, arg) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "symlink") != NULL);
	lua_pop(L, 3);
	/* "..", ".", empty components, a file */
	snprintf(arg, sizeof arg, "%s|layer/../../outside|%s", root, dest);
	CHECK(run(code, arg) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "'..'") != NULL);
	lua_pop(L, 3);
	snprintf(arg, sizeof arg, "%s|layer/./site|%s", root, dest);
	CHECK(run(code, arg) == 3);
	lua_pop(L, 3);
	snprintf(arg, sizeof arg, "%s|layer//site|%s", root, dest);
	CHECK(run(code, arg) == 3);
	lua_pop(L, 3);
	path_in(p, "mv/layer/file");
	write_text(p, "f");
	snprintf(arg, sizeof arg, "%s|layer/file|%s", root, dest);
	CHECK(run(code, arg) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "not a directory") != NULL);
	lua_pop(L, 3);
	CHECK(!exists(dest));
	CHECK(outside_intact());
	/* misuse: an absolute or empty rel, a dest without a name */
	snprintf(arg, sizeof arg, "%s|/layer/site|%s", root, dest);
	CHECK(misuse(code, arg));
	snprintf(arg, sizeof arg, "%s||%s", root, dest);
	CHECK(misuse(code, arg));
	snprintf(arg, sizeof arg, "%s|layer/site|relative", root);
	CHECK(misuse(code, arg));
}

static void test_listdir(void)
{
	char d[PATH_MAX], p[PATH_MAX];

	path_in(d, "ls");
	mkdir(d, 0755);
	path_in(p, "ls/a");
	write_text(p, "a");
	path_in(p, "ls/b");
	mkdir(p, 0755);
	CHECK(run("local core, d = ...; local t = core.listdir(d); table.sort(t); return table.concat(t, ',')", d) == 1);
	CHECK_STR(lua_tostring(L, -1), "a,b");
	lua_pop(L, 1);
	CHECK(run("local core, d = ...; return #core.listdir(d .. '/b')", d) == 1);
	CHECK(lua_tointeger(L, -1) == 0);
	lua_pop(L, 1);
	/* failures of the world are values */
	CHECK(run("local core, d = ...; return core.listdir(d .. '/missing')", d) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "missing") != NULL);
	CHECK_STR(lua_tostring(L, -1), "ENOENT");
	lua_pop(L, 3);
	CHECK(run("local core, d = ...; return core.listdir(d .. '/a')", d) == 3);
	CHECK_STR(lua_tostring(L, -1), "ENOTDIR");
	lua_pop(L, 3);
	CHECK(misuse("local core = ...; return core.listdir()", NULL));
}

static void test_realpath_getpid_module_path(void)
{
	char p[PATH_MAX], exe[PATH_MAX], want[PATH_MAX];
	ssize_t n;

	path_in(p, "rp-link");
	CHECK(symlink("outside/sub", p) == 0);
	CHECK(realpath(base, want) != NULL);
	strncat(want, "/outside/sub", sizeof want - strlen(want) - 1);
	CHECK(run("local core, a = ...; return core.realpath(a .. '/./')", p) == 1);
	CHECK_STR(lua_tostring(L, -1), want);
	lua_pop(L, 1);
	CHECK(run("local core = ...; return core.realpath('/nonexistent-glsb/x')", NULL) == 3);
	CHECK(lua_isnil(L, -3) && strstr(lua_tostring(L, -2), "nonexistent-glsb") != NULL);
	CHECK_STR(lua_tostring(L, -1), "ENOENT");
	lua_pop(L, 3);

	CHECK(run("local core = ...; return core.getpid()", NULL) == 1);
	CHECK(lua_isinteger(L, -1) && lua_tointeger(L, -1) == getpid());
	lua_pop(L, 1);

	/* The core is linked into this test binary, so module_path is the executable. */
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	CHECK(n > 0);
	exe[n > 0 ? n : 0] = '\0';
	CHECK(run("local core = ...; return core.module_path()", NULL) == 1);
	CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), exe) == 0);
	lua_pop(L, 1);
	/* and it does not depend on the working directory */
	{
		char cwd[PATH_MAX];
		CHECK(getcwd(cwd, sizeof cwd) != NULL);
		CHECK(chdir("/") == 0);
		CHECK(run("local core = ...; return core.module_path()", NULL) == 1);
		CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), exe) == 0);
		lua_pop(L, 1);
		CHECK(chdir(cwd) == 0);
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(base, sizeof base, "%s/glsb-test-fs-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	L = luaL_newstate();
	luaL_openlibs(L);
	luaL_requiref(L, "glsb.core", luaopen_glsb_core, 0);
	lua_setglobal(L, "core");

	RUN(test_mkdtemp);
	RUN(test_rmtree_no_follow);
	RUN(test_rmtree_top_symlink);
	RUN(test_rmtree_edges);
	RUN(test_rmtree_mounts);
	RUN(test_rmtree_deep);
	RUN(test_rmtree_wide);
	RUN(test_write_file_atomic);
	RUN(test_move_dir_beneath);
	RUN(test_listdir);
	RUN(test_realpath_getpid_module_path);
	CHECK(lua_gettop(L) == 0);
	lua_close(L);

	/* The scratch tree goes with the code under test; confirm with the shell's view too. */
	{
		char err[PATH_MAX + 256];
		CHECK(glsb_rmtree(base, err, sizeof err, NULL) == 0);
		CHECK(!exists(base));
	}
	printf("%d checks, %d failed\n", check_count, check_failures);
	return CHECK_EXIT();
}
