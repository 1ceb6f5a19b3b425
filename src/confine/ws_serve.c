/* ws_serve.c: `glsb-confine serve`, the sandbox's file server (CONTROL.md, "files"): a long-lived
 * confined child of the supervisor, made exactly as the child of a `call` (sb_call.c: the sandbox's
 * cgroup, namespaces, uid, rlimits, seccomp filter, a Landlock domain of its own), which answers the
 * host's sb.files requests in-process instead of a confined child and a coreutils program for each:
 * a request costs a round trip through the supervisor, not a fork, six setns, a Landlock domain and
 * an exec (about 1.2 ms against 0.1).
 *
 * It sees what the code in the sandbox sees (the sandbox's mount namespace as the sandbox user), and
 * does with it what the per-call commands did: exists is test -e (stat, following links), list is
 * find -H PATH -maxdepth 1 (the path followed when it is a link, its entries not), mkdir is mkdir -p,
 * remove is rm -rf (never through a link), read is `glsb-confine read --root / --follow` (links
 * resolved within the sandbox's root, a regular file opened without waiting on a FIFO), open is that
 * file opened for the host, its descriptor passed with the answer (downloads: the host reads it itself,
 * no byte through a pipe or the channel), and write is
 * `glsb-confine write` itself, run in a child of its own (it narrows its Landlock domain to the root
 * it writes beneath, which this process must not do to itself).
 *
 * Requests on stdin: "ID LEN\n" and LEN bytes: NUL-ended words, the operation and its arguments, then
 * (write) the data. One at a time, answered in order on stdout: one JSON line
 * {"id":ID,"ev":"files","ok":true,...,"len":N} and N bytes (list's records, read's file), or
 * {"id":ID,"ev":"files","ok":false,"error":CODE,"message":TEXT,"len":0}. It ends at end of file on
 * stdin; it dies with the sandbox (it is in its pid namespace) and with the supervisor. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "files.h"
#include "json.h"
#include "kernel.h"
#include "ws_path.h"
#include "ws_util.h"

#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10
#endif

#define REQUEST_MAX GLSB_FILES_REQUEST_MAX /* a write of at most 1 MiB and its words */
#define READ_MAX GLSB_FILES_DATA_MAX        /* larger files: `too_large`, and the host uses `read` */
#define LIST_MAX GLSB_FILES_DATA_MAX        /* list's records; more: `too_large`, and the host uses find */

static unsigned long long req_id;

static void answer(struct glsb_jbuf *head, const void *data, size_t n)
{
	glsb_jbuf_printf(head, ",\"len\":%zu}\n", n);
	if (head->failed) {
		glsb_jbuf_free(head);
		glsb_jbuf_printf(head, "{\"id\":%llu,\"ev\":\"files\",\"ok\":false,\"error\":\"out_of_memory\","
			       "\"message\":\"out of memory\",\"len\":0}\n", req_id);
		data = NULL;
		n = 0;
	}
	if (glsb_write_all(STDOUT_FILENO, head->p, head->len) < 0 || (n && glsb_write_all(STDOUT_FILENO, data, n) < 0))
		_exit(1); /* the supervisor is gone */
	glsb_jbuf_free(head);
}

static void start(struct glsb_jbuf *b, int ok)
{
	glsb_jbuf_printf(b, "{\"id\":%llu,\"ev\":\"files\",\"ok\":%s", req_id, ok ? "true" : "false");
}

static void fail(const char *code, const char *what, const char *path, int err)
{
	struct glsb_jbuf b = {0};
	char msg[600];
	snprintf(msg, sizeof msg, "%s '%.400s': %s", what, path, strerror(err));
	start(&b, 0);
	glsb_jbuf_printf(&b, ",\"error\":\"%s\",\"message\":", code);
	glsb_json_cstr(&b, msg);
	answer(&b, NULL, 0);
}

static void fail_errno(const char *what, const char *path, int err)
{
	fail(err == ENOENT ? "not_found" : err == ENOTDIR ? "not_directory" : err == EACCES || err == EPERM
	     ? "permission_denied" : err == EEXIST ? "exists" : "io_error", what, path, err);
}

static void ok_field(const char *field, int value)
{
	struct glsb_jbuf b = {0};
	start(&b, 1);
	if (field)
		glsb_jbuf_printf(&b, ",\"%s\":%s", field, value ? "true" : "false");
	answer(&b, NULL, 0);
}

/* test -e */
static void op_exists(const char *path)
{
	struct stat st;
	ok_field("exists", stat(path, &st) == 0);
}

static char type_of(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : 'o';
}

/* find -H PATH -maxdepth 1: records "TYPE\tSIZE\tNAME\0" of the entries (lstat), in readdir order */
static void op_list(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return fail_errno("list", path, errno);
	if (!S_ISDIR(st.st_mode))
		return fail("not_directory", "list", path, ENOTDIR);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		return fail_errno("list", path, e);
	}
	struct glsb_jbuf out = {0};
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat es;
		char t = 'o';
		long long size = 0;
		if (fstatat(dfd, de->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0) {
			t = type_of(es.st_mode);
			size = (long long)es.st_size;
		}
		glsb_jbuf_printf(&out, "%c\t%lld\t", t, size);
		glsb_jbuf_put(&out, de->d_name, strlen(de->d_name) + 1);
		if (out.len > LIST_MAX) {
			closedir(d);
			glsb_jbuf_free(&out);
			return fail("too_large", "list", path, EFBIG);
		}
	}
	int e = errno;
	closedir(d);
	if (e || out.failed) {
		glsb_jbuf_free(&out);
		return fail_errno("list", path, out.failed ? ENOMEM : e);
	}
	struct glsb_jbuf b = {0};
	start(&b, 1);
	answer(&b, out.p, out.len);
	glsb_jbuf_free(&out);
}

/* mkdir -p: created = whether a directory was made */
static void op_mkdir(const char *path)
{
	size_t n = strlen(path);
	char *p = malloc(n + 1);
	if (!p)
		return fail_errno("make_dir", path, ENOMEM);
	memcpy(p, path, n + 1);
	int created = 0;
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		if (p[i - 1] == '/')
			continue; /* "//" or a trailing slash */
		char c = p[i];
		p[i] = '\0';
		if (mkdir(p, 0777) == 0) {
			created = 1;
		} else {
			int e = errno;
			struct stat st;
			if (e != EEXIST || stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
				fail_errno("make_dir", p, e); /* EEXIST: something that is no directory is there */
				free(p);
				return;
			}
		}
		p[i] = c;
	}
	free(p);
	ok_field("created", created);
}

static int remove_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	return (type == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT ? -1 : 0;
}

/* rm -rf: a missing path is fine; links are removed, never followed; "/" and a last component "."
 * or ".." are refused, as rm refuses them */
static void op_remove(const char *path)
{
	const char *last = strrchr(path, '/');
	last = last ? last + 1 : path;
	if (!strcmp(path, "/") || !strcmp(last, ".") || !strcmp(last, ".."))
		return fail("refused", "remove", path, EINVAL);
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return ok_field(NULL, 0);
		return fail_errno("remove", path, errno);
	}
	int rc = S_ISDIR(st.st_mode) ? nftw(path, remove_one, 32, FTW_DEPTH | FTW_PHYS) : unlink(path);
	if (rc < 0)
		return fail_errno("remove", path, errno);
	ok_field(NULL, 0);
}

/* The regular file root/rel, opened without waiting on a FIFO, of at most max bytes -> its fd and size,
 * or -1 after answering why. follow: links are followed but resolved within root (`read --follow`), else
 * none may be crossed (`read`: RESOLVE_BENEATH, no symlinks). limit: what this answer can hold too
 * (READ_MAX for read's bytes; none for open, whose bytes the host reads itself). */
static int open_file(const char *what, const char *root, const char *rel, size_t rel_len, const char *max_s,
		     int follow, unsigned long long limit, struct stat *st)
{
	unsigned long long max;
	if (glsb_ws_parse_u64(max_s, &max) < 0) {
		fail("usage", what, rel, EINVAL);
		return -1;
	}
	char path[GLSB_WS_PATH_MAX + 1];
	if (rel_len > GLSB_WS_PATH_MAX || memchr(rel, '\0', rel_len)) {
		fail("usage", what, root, EINVAL);
		return -1;
	}
	memcpy(path, rel, rel_len);
	path[rel_len] = '\0';
	int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *r = path;
	while (follow && *r == '/')
		r++;
	int fd = rootfd < 0 ? -1 : glsb_ws_openat2(rootfd, *r ? r : ".", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0,
					       follow ? RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS : GLSB_WS_RESOLVE);
	int e = errno;
	if (rootfd >= 0)
		close(rootfd);
	if (fd < 0) {
		if (rootfd < 0)
			fail("root_invalid", what, root, e);
		else if (e == ENXIO)
			fail("not_regular_file", what, path, e);
		else if (e == ELOOP)
			fail("symlink", what, path, e);
		else
			fail(glsb_ws_lookup_code(e), what, path, e);
		return -1;
	}
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		fail("not_regular_file", what, path, EINVAL);
		return -1;
	}
	if ((unsigned long long)st->st_size > max || (unsigned long long)st->st_size > limit) {
		close(fd);
		struct glsb_jbuf b = {0};
		start(&b, 0);
		glsb_jbuf_printf(&b, ",\"error\":\"too_large\",\"bytes\":%lld,\"message\":\"larger than %llu bytes\"",
				 (long long)st->st_size, max < limit ? max : limit);
		answer(&b, NULL, 0);
		return -1;
	}
	return fd;
}

/* glsb-confine read --root / --follow, of files up to READ_MAX: the bytes in the answer */
static void op_read(const char *path, const char *max_s)
{
	struct stat st;
	int fd = open_file("read", "/", path, strlen(path), max_s, 1, READ_MAX, &st);
	if (fd < 0)
		return;
	size_t size = (size_t)st.st_size, got = 0;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		close(fd);
		return fail_errno("read", path, ENOMEM);
	}
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* shrank meanwhile: what there is, as `read` would send it short */
		got += (size_t)n;
	}
	close(fd);
	struct glsb_jbuf b = {0};
	start(&b, 1);
	glsb_jbuf_printf(&b, ",\"bytes\":%zu", got);
	answer(&b, buf, got);
	free(buf);
}

/* The same file opened for the host, which reads it itself (a download: one copy on the host, no byte
 * through a pipe or the channel): the answer says its size and carries the descriptor (SCM_RIGHTS on our
 * stdout, a socket; the supervisor passes it on). The descriptor is read-only, of a regular file; what
 * the host reads of it is at most the size said, and a file that shrinks meanwhile arrives short. */
static void op_open(const char *root, const char *rel_hex, const char *max_s, const char *mode)
{
	static char rel[GLSB_WS_PATH_MAX];
	size_t hl = strlen(rel_hex);
	long rl = hl / 2 <= sizeof rel ? glsb_ws_hex_decode(rel_hex, hl, (unsigned char *)rel) : -1;
	if (rl < 0 || (strcmp(mode, "follow") && strcmp(mode, "beneath")))
		return fail("usage", "open", root, EINVAL);
	struct stat st;
	int fd = open_file("open", root, rel, (size_t)rl, max_s, !strcmp(mode, "follow"), ~0ULL, &st);
	if (fd < 0)
		return;
	struct glsb_jbuf b = {0};
	start(&b, 1);
	glsb_jbuf_printf(&b, ",\"bytes\":%lld,\"fd\":true,\"len\":0}\n", (long long)st.st_size);
	if (b.failed) {
		close(fd);
		glsb_jbuf_free(&b);
		return fail_errno("open", root, ENOMEM);
	}
	/* the descriptor with the answer's first byte, the rest after it */
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct iovec iov = {b.p, 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	ssize_t n;
	do
		n = sendmsg(STDOUT_FILENO, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n != 1 || glsb_write_all(STDOUT_FILENO, b.p + 1, b.len - 1) < 0)
		_exit(1); /* the supervisor is gone */
	glsb_jbuf_free(&b);
}

/* Writes go to a writer per root (ws_write.c glsb_ws_writer): a child of ours, started by the first
 * write beneath that root, that set up `glsb-confine write`'s confinement once (its Landlock domain
 * allows writes beneath the root only; ours must not narrow) and then writes as `write` does. */
#define WRITERS 8
static struct {
	char root[256];
	pid_t pid;
	int in, out;
} writers[WRITERS];

static void writer_end(int i)
{
	close(writers[i].in);
	close(writers[i].out);
	kill(writers[i].pid, SIGKILL);
	while (waitpid(writers[i].pid, NULL, 0) < 0 && errno == EINTR)
		;
	writers[i].pid = 0;
	writers[i].root[0] = '\0';
}

/* the writer of root, started when there is none -> its index, or -1 with errno */
static int writer_of(const char *root)
{
	int free_slot = -1;
	for (int i = 0; i < WRITERS; i++) {
		if (writers[i].pid > 0 && !strcmp(writers[i].root, root))
			return i;
		if (writers[i].pid <= 0 && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0 || strlen(root) >= sizeof writers[0].root) {
		errno = EMFILE;
		return -1;
	}
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0) {
		int e = errno;
		close(in[0]);
		close(in[1]);
		errno = e;
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		/* no exec follows: what is not the writer's own goes by hand (another writer's pipes, our
		 * request stream) */
		if (dup2(in[0], STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0)
			_exit(1);
		if (glsb_sys_close_range(3, ~0U, 0) < 0)
			for (int fd = 3; fd < 1024; fd++)
				close(fd);
		_exit(glsb_ws_writer(root));
	}
	int e = errno;
	close(in[0]);
	close(out[1]);
	if (pid < 0) {
		close(in[1]);
		close(out[0]);
		errno = e;
		return -1;
	}
	snprintf(writers[free_slot].root, sizeof writers[free_slot].root, "%s", root);
	writers[free_slot].pid = pid;
	writers[free_slot].in = in[1];
	writers[free_slot].out = out[0];
	return free_slot;
}

/* glsb-confine write --root ROOT --path-hex REL --max-bytes N (overwriting), by the root's writer: its
 * JSON line is the answer's fields */
static void op_write(const char *root, const char *rel_hex, const char *data, size_t n)
{
	static unsigned char rel[4096];
	size_t hl = strlen(rel_hex);
	long rl = hl / 2 <= sizeof rel ? glsb_ws_hex_decode(rel_hex, hl, rel) : -1;
	if (rl < 0)
		return fail("usage", "write", root, EINVAL);
	int w = writer_of(root);
	if (w < 0)
		return fail_errno("write", root, errno);
	uint32_t head[2] = {(uint32_t)rl, (uint32_t)n};
	char line[4096];
	size_t len = 0;
	int ok = glsb_write_all(writers[w].in, head, sizeof head) == 0 &&
		 glsb_write_all(writers[w].in, rel, (size_t)rl) == 0 && glsb_write_all(writers[w].in, data, n) == 0;
	while (ok) {
		ssize_t r = read(writers[w].out, line + len, sizeof line - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ok = 0;
			break;
		}
		len += (size_t)r;
		if (memchr(line, '\n', len) || len >= sizeof line - 1)
			break;
	}
	line[len] = '\0';
	char *nl = strchr(line, '\n');
	if (!ok || !nl || line[0] != '{' || line[1] != '"' || nl[1] != '\0') {
		writer_end(w); /* it ended, or said what is not one answer: the next write starts another */
		return fail("io_error", "write", root, EIO);
	}
	*nl = '\0';
	/* its line is {"ok":...}: the answer is it, with our id in front and the length after */
	struct glsb_jbuf b = {0};
	glsb_jbuf_printf(&b, "{\"id\":%llu,\"ev\":\"files\",", req_id);
	glsb_jbuf_put(&b, line + 1, strlen(line + 1) - 1); /* without its braces */
	answer(&b, NULL, 0);
}

/* Requests are read in large reads into one buffer (a request's header and body usually in one); what
 * comes after a request stays for the next. */
static struct {
	char *p;
	size_t have, used;
} in;

/* Makes at least n bytes available at in.p + in.used -> 0, or -1 at end of file */
static int need(size_t n)
{
	if (in.used > 0 && in.used + n > REQUEST_MAX + 128) {
		memmove(in.p, in.p + in.used, in.have - in.used);
		in.have -= in.used;
		in.used = 0;
	}
	while (in.have - in.used < n) {
		ssize_t r = read(STDIN_FILENO, in.p + in.have, REQUEST_MAX + 128 - in.have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		in.have += (size_t)r;
	}
	return 0;
}

/* the next word of a request body, or NULL */
static const char *word(const char *body, size_t len, size_t *at)
{
	if (*at >= len)
		return NULL;
	const char *w = body + *at;
	const char *end = memchr(w, '\0', len - *at);
	if (!end)
		return NULL;
	*at += (size_t)(end - w) + 1;
	return w;
}

int glsb_cmd_serve(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	in.p = malloc(REQUEST_MAX + 128);
	if (!in.p)
		return 1;
	signal(SIGPIPE, SIG_IGN); /* a writer that died is an EPIPE to answer, not our end */
	for (;;) {
		/* "ID LEN\n" */
		char *nl;
		size_t scanned = 0;
		while (!(nl = memchr(in.p + in.used + scanned, '\n', in.have - in.used - scanned))) {
			scanned = in.have - in.used;
			if (scanned >= 64 || need(scanned + 1) < 0)
				return scanned >= 64; /* a header too long, or end of file: the supervisor closed us */
		}
		char *head = in.p + in.used;
		*nl = '\0';
		in.used += (size_t)(nl - head) + 1;
		char *sp = strchr(head, ' ');
		unsigned long long len;
		if (!sp || (*sp = '\0', glsb_ws_parse_u64(head, &req_id) < 0) || glsb_ws_parse_u64(sp + 1, &len) < 0 ||
		    len > REQUEST_MAX || need((size_t)len) < 0)
			return 1;
		char *body = in.p + in.used;
		in.used += (size_t)len;
		size_t at = 0;
		const char *op = word(body, len, &at), *a1 = word(body, len, &at);
		if (!op || !a1) {
			fail("usage", "request", "", EINVAL);
		} else if (!strcmp(op, "exists")) {
			op_exists(a1);
		} else if (!strcmp(op, "list")) {
			op_list(a1);
		} else if (!strcmp(op, "mkdir")) {
			op_mkdir(a1);
		} else if (!strcmp(op, "remove")) {
			op_remove(a1);
		} else if (!strcmp(op, "open")) {
			const char *rel = word(body, len, &at), *max = word(body, len, &at), *mode = word(body, len, &at);
			if (mode)
				op_open(a1, rel, max, mode);
			else
				fail("usage", "open", a1, EINVAL);
		} else if (!strcmp(op, "read")) {
			const char *max = word(body, len, &at);
			if (max)
				op_read(a1, max);
			else
				fail("usage", "read", a1, EINVAL);
		} else if (!strcmp(op, "write")) {
			const char *rel = word(body, len, &at);
			if (rel)
				op_write(a1, rel, body + at, (size_t)len - at);
			else
				fail("usage", "write", a1, EINVAL);
		} else {
			fail("usage", "unknown operation", op, EINVAL);
		}
		if (in.used == in.have)
			in.used = in.have = 0;
	}
}
