/* ws_write.c: `glsb-confine write`, write_workspace_file: one file written
 * atomically and durably beneath a workspace root, never through a link, never
 * replacing a file unless asked, under a Landlock domain that allows writes
 * beneath the root only. Fails closed when the kernel lacks any of it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "files.h"
#include "json.h"
#include "ws_result.h"
#include "ws_path.h"
#include "ws_util.h"
#include "sbkit.h"

#ifndef O_TMPFILE
#define O_TMPFILE (020000000 | O_DIRECTORY)
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#define PROC_SUPER_MAGIC_ 0x9fa0

static const char write_usage[] =
	"usage: glsb-confine write --root DIR (--path REL | --path-hex HEX) --max-bytes N\n"
	"                          [--no-overwrite]  < DATA\n"
	"\n"
	"Write DATA (stdin, at most N bytes; at most N+1 bytes are read) to ROOT/REL.\n"
	"DATA streams into the temporary file (splice(2) from a pipe): it is never held\n"
	"whole in memory; more than N bytes fail before anything is named or created.\n"
	"REL is relative: no leading '/', no empty, '.' or '..' component, no NUL byte.\n"
	"--path-hex gives REL as hex of its exact bytes (any byte string; a NUL is rejected).\n"
	"Missing parent directories are created beneath ROOT. No component may be a\n"
	"symlink or magic link (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|\n"
	"RESOLVE_NO_MAGICLINKS, one component at a time); the target may not be a\n"
	"symlink, a directory or a special file. --no-overwrite refuses to replace an\n"
	"existing file (atomically: link/RENAME_NOREPLACE, never check-then-write).\n"
	"Before any mutation a Landlock domain (ABI >= 3) allows writes beneath ROOT only.\n"
	"The data goes to a temporary file in the target directory (O_TMPFILE, else a\n"
	"random name with O_EXCL), is fsynced, linked/renamed into place, and the\n"
	"directory is fsynced: a crash leaves the old or the new content.\n"
	"\n"
	"Requires openat2 (Linux 5.6), Landlock ABI 3 (Linux 6.2) and procfs at\n"
	"/proc/self/fd; without any of them it fails closed and writes nothing.\n"
	"\n"
	"Output: one JSON line on stdout.\n"
	"  success (exit 0): {\"ok\":true,\"bytes\":N,\"path\":REL,\"replaced\":BOOL}\n"
	"  failure (exit 1): {\"ok\":false,\"error\":CODE,\"message\":TEXT}\n"
	"CODE: usage, empty_path, nul_byte, absolute_path, empty_component, dot_component,\n"
	"  dotdot_component, name_too_long, path_too_long, too_large, root_invalid,\n"
	"  symlink, escape, not_directory, target_symlink, is_directory, not_regular_file,\n"
	"  exists, openat2_unavailable, landlock_unavailable, proc_unavailable,\n"
	"  landlock_failed, permission_denied, no_space, io_error, out_of_memory\n"
	"too_large is also a file past RLIMIT_FSIZE (SIGXFSZ is ignored: the write fails\n"
	"with EFBIG and says so); no_space a full file system.\n";

struct write_req {
	const char *root;
	const char *path_arg;
	const char *path_hex;
	unsigned long long max_bytes;
	int have_max, overwrite;
};

static int parse_args(int argc, char **argv, struct write_req *rq)
{
	rq->overwrite = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(write_usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--no-overwrite")) {
			rq->overwrite = 0;
		} else if (!strcmp(a, "--overwrite")) {
			rq->overwrite = 1;
		} else if (i + 1 < argc && !strcmp(a, "--root")) {
			rq->root = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--path")) {
			rq->path_arg = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--path-hex")) {
			rq->path_hex = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--max-bytes")) {
			if (glsb_ws_parse_u64(argv[++i], &rq->max_bytes) || rq->max_bytes > (1ULL << 40))
				return glsb_ws_fail("usage", "--max-bytes wants a decimal integer in [0, 2^40], got '%s'", argv[i]);
			rq->have_max = 1;
		} else {
			return glsb_ws_fail("usage", "unknown or incomplete option '%s' (see glsb-confine write --help)", a);
		}
	}
	if (!rq->root)
		return glsb_ws_fail("usage", "--root is required");
	if (!rq->path_arg == !rq->path_hex)
		return glsb_ws_fail("usage", "exactly one of --path and --path-hex is required");
	if (!rq->have_max)
		return glsb_ws_fail("usage", "--max-bytes is required");
	return 0;
}

/* Copy stdin into fd, at most max+1 bytes (*n: the count copied; more than max means too large);
 * with exact (a writer's request: the data is followed by the next request, not by end of file),
 * exactly max bytes, and an end of file before them fails. splice(2) moves the pipe's pages into the
 * file without a copy through our memory; where stdin is not a pipe or the file takes no splice,
 * plain reads and writes. The data is never held whole in memory. Returns 0, or -1 with errno and
 * *what naming the failing side. */
#define COPY_CHUNK (1 << 20)
static unsigned long long copied; /* what the last copy_payload took from stdin (glsb_ws_writer) */
static int copy_payload(int fd, unsigned long long max, int exact, unsigned long long *n, const char **what)
{
	unsigned long long limit = exact ? max : max + 1, done = 0;
	int use_splice = 1;
	static unsigned char buf[65536];
	while (done < limit) {
		size_t want = limit - done < COPY_CHUNK ? (size_t)(limit - done) : COPY_CHUNK;
		ssize_t r;
		if (use_splice) {
			r = splice(STDIN_FILENO, NULL, fd, NULL, want, SPLICE_F_MOVE);
			if (r < 0 && (errno == EINVAL || errno == ENOSYS || errno == EBADF) && done == 0) {
				use_splice = 0; /* stdin is no pipe, or the filesystem takes no splice */
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				/* which side failed: a full disk is the file's; anything else may be either */
				*what = errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? "writing the data for"
											 : "copying the data for";
				*n = done;
				return -1;
			}
		} else {
			if (want > sizeof buf)
				want = sizeof buf;
			r = read(STDIN_FILENO, buf, want);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				*what = "reading the data from stdin for";
				*n = done;
				return -1;
			}
			if (r > 0 && glsb_write_all(fd, buf, (size_t)r) < 0) {
				*what = "writing the data for";
				*n = done;
				return -1;
			}
		}
		if (r > 0)
			copied += (unsigned long long)r;
		if (r == 0 && exact) {
			*what = "reading the data from stdin for";
			*n = done;
			errno = EIO;
			return -1;
		}
		if (r == 0)
			break;
		done += (unsigned long long)r;
	}
	*n = done;
	return 0;
}

static int fail_errno(const char *what, const char *name, int err)
{
	const char *code = glsb_ws_lookup_code(err);
	if (err == ENOSPC || err == EDQUOT)
		code = "no_space";
	if (err == EFBIG)
		return glsb_ws_fail("too_large", "%s '%s': larger than the file size limit (RLIMIT_FSIZE, "
				    "--max-file-mb of the sandbox)", what, name);
	if (err == EACCES && !strcmp(code, "permission_denied"))
		return glsb_ws_fail(code, "%s '%s': %s (Landlock or file permissions)", what, name, strerror(err));
	if (err == ELOOP)
		return glsb_ws_fail(code, "%s '%s': it is a symlink or magic link (links are never followed)", what, name);
	return glsb_ws_fail(code, "%s '%s': %s", what, name, strerror(err));
}

/* Check the kernel offers everything the write relies on; fail closed otherwise. */
static int check_features(int rootfd, int *procfd, int *abi)
{
	int fd = glsb_ws_openat2(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, GLSB_WS_RESOLVE);
	if (fd < 0) {
		if (errno == ENOSYS || errno == EINVAL || errno == E2BIG || errno == EPERM)
			return glsb_ws_fail("openat2_unavailable",
					    "openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS is unavailable (%s); "
					    "refusing an unconfined write", strerror(errno));
		return glsb_ws_fail("root_invalid", "cannot resolve the root: %s", strerror(errno));
	}
	close(fd);
	*procfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct statfs sfs;
	if (*procfd < 0 || fstatfs(*procfd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC_) {
		int e = *procfd < 0 ? errno : 0;
		if (*procfd >= 0)
			close(*procfd);
		*procfd = -1;
		return glsb_ws_fail("proc_unavailable", "/proc/self/fd is not a procfs directory%s%s; refusing to write",
				    e ? ": " : "", e ? strerror(e) : "");
	}
	*abi = glsb_sb_landlock_abi();
	if (*abi < 3) {
		int e = errno;
		close(*procfd);
		*procfd = -1;
		if (*abi == 0)
			return glsb_ws_fail("landlock_unavailable",
					    "Landlock is unavailable (%s); refusing an unconfined write", strerror(e));
		return glsb_ws_fail("landlock_unavailable",
				    "Landlock ABI %d is older than 3 (REFER and TRUNCATE); refusing an unconfined write",
				    *abi);
	}
	return 0;
}

/* Open each parent component from *from on, starting at the directory fromfd (not consumed);
 * returns a new fd of the last directory opened, or -1 after printing the error. With create,
 * missing ones are created (and the directory holding each is fsynced); without, the walk stops
 * at the first missing one and *from says which (pp->ncomp - 1: none is missing). */
static int open_parents(int fromfd, const struct glsb_ws_path *pp, size_t *from, int create)
{
	int cur = glsb_ws_openat2(fromfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, GLSB_WS_RESOLVE);
	if (cur < 0) {
		fail_errno("opening the root", ".", errno);
		return -1;
	}
	for (size_t i = *from; i + 1 < pp->ncomp; i++) {
		const char *name = glsb_ws_path_comp(pp, i);
		int next = -1, created = 0;
		for (int tries = 0; tries < 4 && next < 0; tries++) {
			next = glsb_ws_openat2(cur, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
					       GLSB_WS_RESOLVE);
			if (next >= 0 || errno != ENOENT)
				break;
			if (!create) {
				*from = i;
				return cur;
			}
			if (mkdirat(cur, name, 0777) == 0)
				created = 1;
			else if (errno != EEXIST) {
				int e = errno;
				close(cur);
				fail_errno("creating directory", name, e);
				return -1;
			}
		}
		if (next < 0) {
			int e = errno;
			close(cur);
			fail_errno("opening directory", name, e);
			return -1;
		}
		/* The new entry must survive a crash before anything is put under it. */
		if (created && fsync(cur) < 0) {
			int e = errno;
			close(next);
			close(cur);
			fail_errno("syncing the directory holding", name, e);
			return -1;
		}
		close(cur);
		cur = next;
	}
	*from = pp->ncomp - 1;
	return cur;
}

static void random_name(char *out, size_t size)
{
	unsigned char r[8] = {0};
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		/* Uniqueness only; O_EXCL/link still refuse a clash. */
		unsigned long long t = (unsigned long long)getpid() ^ (unsigned long long)(uintptr_t)out;
		memcpy(r, &t, sizeof r);
	}
	snprintf(out, size, ".glsb-write-%02x%02x%02x%02x%02x%02x%02x%02x.tmp",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

struct target {
	int dirfd, procfd;
	int tmpdirfd; /* where the temporary file is made: dirfd, or its deepest existing ancestor
		       * while the parents are still to be created (a new directory is on the same
		       * filesystem as its parent, so linkat/renameat from there into it work) */
	const char *name;
	int overwrite;
	int exists;
	mode_t old_mode;
};

/* Create the temporary file: O_TMPFILE (nameless) when the filesystem allows,
 * else a random name created with O_EXCL. tmpname[0] is '\0' for O_TMPFILE. */
static int create_temp(const struct target *t, char *tmpname, size_t size)
{
	tmpname[0] = '\0';
	int fd = glsb_ws_openat2(t->tmpdirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666, GLSB_WS_RESOLVE);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	for (int tries = 0; tries < 8; tries++) {
		random_name(tmpname, size);
		fd = glsb_ws_openat2(t->tmpdirfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666,
				     GLSB_WS_RESOLVE);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		tmpname[0] = '\0';
	return fd;
}

/* Give the data its final name. Without overwrite only operations that fail
 * when the name exists are used (linkat, RENAME_NOREPLACE), so a file created
 * concurrently is never replaced. *namedir is the directory holding tmpname (when
 * it has one). Returns 0 or -1 with errno. */
static int commit(const struct target *t, int tmpfd, char *tmpname, size_t size, int *namedir)
{
	if (!tmpname[0]) { /* O_TMPFILE: link it in through its /proc/self/fd magic link */
		char fdname[16];
		snprintf(fdname, sizeof fdname, "%d", tmpfd);
		if (!t->overwrite)
			return linkat(t->procfd, fdname, t->dirfd, t->name, AT_SYMLINK_FOLLOW);
		int r = -1;
		for (int tries = 0; tries < 8; tries++) {
			random_name(tmpname, size);
			r = linkat(t->procfd, fdname, t->dirfd, tmpname, AT_SYMLINK_FOLLOW);
			if (r == 0 || errno != EEXIST)
				break;
		}
		if (r < 0) {
			tmpname[0] = '\0';
			return -1;
		}
		*namedir = t->dirfd;
	}
	if (t->overwrite)
		return renameat(*namedir, tmpname, t->dirfd, t->name);
	if (syscall(SYS_renameat2, *namedir, tmpname, t->dirfd, t->name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* No RENAME_NOREPLACE on this filesystem: link (never replaces) then drop the temp name. */
	if (linkat(*namedir, tmpname, t->dirfd, t->name, 0) < 0)
		return -1;
	unlinkat(*namedir, tmpname, 0);
	return 0;
}

static int inspect_target(struct target *t)
{
	struct stat st;
	if (fstatat(t->dirfd, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return fail_errno("inspecting the target", t->name, errno);
	}
	if (S_ISLNK(st.st_mode))
		return glsb_ws_fail("target_symlink", "the target '%s' is a symlink; it is never followed or replaced",
				    t->name);
	if (S_ISDIR(st.st_mode))
		return glsb_ws_fail("is_directory", "the target '%s' is a directory", t->name);
	if (!S_ISREG(st.st_mode))
		return glsb_ws_fail("not_regular_file", "the target '%s' exists and is not a regular file", t->name);
	if (!t->overwrite)
		return glsb_ws_fail("exists", "the target '%s' exists and overwrite is false", t->name);
	t->exists = 1;
	t->old_mode = st.st_mode & 0777;
	return 0;
}

/* Everything from the first mutation on; runs under the Landlock domain. The data streams from
 * stdin into the temporary file (never held whole in memory); more than max bytes fail the write
 * before any missing parent directory is created or anything gets the target's name. With
 * t->dirfd < 0 the parents from index missing on are created once the data is complete. */
static int do_write(struct target *t, const struct glsb_ws_path *pp, size_t missing, unsigned long long max,
		    int exact)
{
	if (t->dirfd >= 0 && inspect_target(t))
		return 1;
	char tmpname[64];
	int tmpfd = create_temp(t, tmpname, sizeof tmpname), namedir = t->tmpdirfd;
	if (tmpfd < 0)
		return fail_errno("creating a temporary file next to", t->name, errno);
	int rc = 0, e = 0, too_large = 0;
	const char *what = NULL;
	unsigned long long len = 0;
	if (t->exists && fchmod(tmpfd, t->old_mode) < 0)
		e = errno, what = "keeping the mode of";
	else if (copy_payload(tmpfd, max, exact, &len, &what) < 0)
		e = errno;
	else if (len > max)
		too_large = 1, what = "too_large";
	else if (fsync(tmpfd) < 0)
		e = errno, what = "syncing the data for";
	if (!what && t->dirfd < 0) {
		/* the data is complete and within the cap: now the missing parents */
		t->dirfd = open_parents(t->tmpdirfd, pp, &missing, 1);
		if (t->dirfd < 0 || inspect_target(t))
			rc = 1, what = "printed";
	}
	if (!what && commit(t, tmpfd, tmpname, sizeof tmpname, &namedir) < 0)
		e = errno, what = "moving the data into place as";
	if (too_large)
		rc = glsb_ws_fail("too_large", "the data is larger than --max-bytes %llu", max);
	else if (what && !rc) {
		if (e == EEXIST)
			rc = glsb_ws_fail("exists", "the target '%s' appeared during the write and overwrite is false",
					  t->name);
		else
			rc = fail_errno(what, t->name, e);
	}
	if (what && tmpname[0])
		unlinkat(namedir, tmpname, 0); /* every failure leaves the temp name, if there is one */
	close(tmpfd);
	if (rc)
		return rc;
	if (fsync(t->dirfd) < 0)
		return fail_errno("syncing the directory of", t->name, errno);
	struct glsb_jbuf b = {0};
	char rel[GLSB_WS_PATH_MAX];
	size_t n = 0;
	for (size_t i = 0; i < pp->ncomp; i++) {
		const char *c = glsb_ws_path_comp(pp, i);
		size_t cl = strlen(c);
		if (i)
			rel[n++] = '/';
		memcpy(rel + n, c, cl);
		n += cl;
	}
	glsb_ws_json_write_result(&b, (size_t)len, rel, n, t->exists);
	rc = glsb_ws_emit(&b) ? 1 : 0;
	glsb_jbuf_free(&b);
	return rc;
}

/* What a write does once for its root: open it, check that the kernel offers everything the write
 * relies on, and confine writes beneath it (a Landlock domain of its own). 0, or 1 after printing why. */
static int open_root(const char *root, int *rootfd, int *procfd)
{
	*rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*rootfd < 0)
		return glsb_ws_fail("root_invalid", "cannot open the root directory '%s': %s", root, strerror(errno));
	int abi = 0;
	if (check_features(*rootfd, procfd, &abi))
		return 1;
	char why[256];
	if (glsb_sb_landlock_confine_writes(*rootfd, abi, why, sizeof why) < 0)
		return glsb_ws_fail("landlock_failed", "%s; refusing an unconfined write", why);
	return 0;
}

/* One write of the relative path p (plen exact bytes) beneath the open root, its data on stdin; prints
 * its one JSON line. 0 or 1. */
static int write_one(int rootfd, int procfd, const char *p, size_t plen, unsigned long long max, int overwrite,
		     int exact)
{
	static struct glsb_ws_path pp;
	enum glsb_ws_path_err pe = glsb_ws_path_split(p, plen, &pp);
	if (pe != GLSB_WS_PATH_OK)
		return glsb_ws_fail(glsb_ws_path_code(pe), "%s", glsb_ws_path_message(pe));
	struct target t = {.dirfd = -1, .tmpdirfd = -1, .overwrite = overwrite, .procfd = procfd,
			   .name = glsb_ws_path_comp(&pp, pp.ncomp - 1)};
	/* Every mutation happens inside the Landlock domain. The parents that exist are opened now;
	 * missing ones are made only once the data is known to fit. */
	size_t missing = 0;
	int rc = 1;
	t.tmpdirfd = open_parents(rootfd, &pp, &missing, 0);
	if (t.tmpdirfd >= 0) {
		if (missing == pp.ncomp - 1)
			t.dirfd = t.tmpdirfd;
		rc = do_write(&t, &pp, missing, max, exact);
	}
	if (t.dirfd >= 0 && t.dirfd != t.tmpdirfd)
		close(t.dirfd);
	if (t.tmpdirfd >= 0)
		close(t.tmpdirfd);
	return rc;
}

int glsb_cmd_write(int argc, char **argv)
{
	struct write_req rq = {0};
	/* Past RLIMIT_FSIZE a write fails with EFBIG and is reported, instead of SIGXFSZ ending the
	 * helper with no answer. */
	signal(SIGXFSZ, SIG_IGN);
	if (parse_args(argc, argv, &rq))
		return 1;

	/* The path, as exact bytes. */
	const char *p = rq.path_arg;
	size_t plen = p ? strlen(p) : 0;
	unsigned char *decoded = NULL;
	if (rq.path_hex) {
		size_t hl = strlen(rq.path_hex);
		decoded = malloc(hl / 2 + 1);
		if (!decoded)
			return glsb_ws_fail("out_of_memory", "decoding --path-hex");
		long dl = glsb_ws_hex_decode(rq.path_hex, hl, decoded);
		if (dl < 0) {
			free(decoded);
			return glsb_ws_fail("usage", "--path-hex wants an even number of hex digits (0-9, a-f, A-F)");
		}
		p = (const char *)decoded;
		plen = (size_t)dl;
	}
	int rootfd = -1, procfd = -1;
	int rc = open_root(rq.root, &rootfd, &procfd);
	if (!rc)
		rc = write_one(rootfd, procfd, p, plen, rq.max_bytes, rq.overwrite, 0);
	free(decoded);
	if (procfd >= 0)
		close(procfd);
	if (rootfd >= 0)
		close(rootfd);
	return rc;
}

static int read_exact(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* The file server's writer for one root (ws_serve.c): `write`'s confinement set up once, then one
 * write per request on stdin (a 4-byte path length and 4-byte data length, native order; the path's
 * exact bytes; the data), each answered by `write`'s JSON line on stdout. Returns at end of file. */
int glsb_ws_writer(const char *root)
{
	signal(SIGXFSZ, SIG_IGN);
	int rootfd = -1, procfd = -1;
	if (open_root(root, &rootfd, &procfd))
		return 1;
	static char path[GLSB_WS_PATH_MAX + 1];
	for (;;) {
		uint32_t head[2];
		if (read_exact(STDIN_FILENO, head, sizeof head) < 0)
			return 0;
		if (head[0] > GLSB_WS_PATH_MAX || read_exact(STDIN_FILENO, path, head[0]) < 0)
			return 1;
		copied = 0;
		write_one(rootfd, procfd, path, head[0], head[1], 1, 1);
		/* a write refused before its data was taken (a bad path, a directory in the way) leaves the
		 * data on stdin: it goes, so that the next request starts where it should */
		char sink[65536];
		for (unsigned long long left = head[1] - copied; left > 0;) {
			ssize_t r = read(STDIN_FILENO, sink, left < sizeof sink ? (size_t)left : sizeof sink);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return 1;
			left -= (unsigned long long)r;
		}
	}
}
