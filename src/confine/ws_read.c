/* ws_read.c: `glsb-confine read` (downloads): one regular file beneath a root, opened without
 * following links (or with --follow, following them only within the root) and without
 * waiting on a FIFO, read whole up to a cap, and printed as a JSON header line and its bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
#include "files.h"
#include "ws_path.h"
#include "ws_util.h"

#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10
#endif

static const char read_usage[] =
	"usage: glsb-confine read --root DIR (--path REL | --path-hex HEX) --max-bytes N [--follow]\n"
	"\n"
	"Print the regular file ROOT/REL: a line {\"ok\":true,\"bytes\":N} and then exactly N\n"
	"raw bytes (exit 0). REL is relative as for `write` (--path-hex: its exact bytes in hex).\n"
	"No component may be a symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|\n"
	"RESOLVE_NO_MAGICLINKS); with --follow, symlinks are followed but resolved within ROOT\n"
	"(RESOLVE_IN_ROOT: an absolute target or '..' never leaves it). The file is opened\n"
	"O_NONBLOCK (a FIFO fails instead of waiting), must be a regular file of at most N\n"
	"bytes; its size then is announced and exactly that many bytes follow, streamed\n"
	"(splice(2)): a file that grows meanwhile is sent as its first bytes; one that shrinks\n"
	"ends the output short with exit status 1.\n"
	"\n"
	"Failure (exit 1): one line {\"ok\":false,\"error\":CODE,\"message\":TEXT}.\n"
	"CODE: usage, empty_path, nul_byte, absolute_path, empty_component, dot_component,\n"
	"  dotdot_component, name_too_long, path_too_long, root_invalid, openat2_unavailable,\n"
	"  symlink, escape, not_directory, not_found, permission_denied, not_regular_file,\n"
	"  too_large, io_error, out_of_memory\n";

int glsb_cmd_read(int argc, char **argv)
{
	const char *root = NULL, *path_arg = NULL, *path_hex = NULL;
	unsigned long long max = 0;
	int have_max = 0, follow = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(read_usage, stdout);
			return 0;
		} else if (!strcmp(a, "--follow")) {
			follow = 1;
		} else if (i + 1 < argc && !strcmp(a, "--root")) {
			root = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--path")) {
			path_arg = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--path-hex")) {
			path_hex = argv[++i];
		} else if (i + 1 < argc && !strcmp(a, "--max-bytes")) {
			if (glsb_ws_parse_u64(argv[++i], &max) || max > (1ULL << 40))
				return glsb_ws_fail("usage", "--max-bytes wants a decimal integer in [0, 2^40], got '%s'", argv[i]);
			have_max = 1;
		} else {
			return glsb_ws_fail("usage", "unknown or incomplete option '%s' (see glsb-confine read --help)", a);
		}
	}
	if (!root)
		return glsb_ws_fail("usage", "--root is required");
	if (!path_arg == !path_hex)
		return glsb_ws_fail("usage", "exactly one of --path and --path-hex is required");
	if (!have_max)
		return glsb_ws_fail("usage", "--max-bytes is required");

	/* The path, as exact bytes, validated like write's. */
	static struct glsb_ws_path pp;
	const char *p = path_arg;
	size_t plen = p ? strlen(p) : 0;
	unsigned char *decoded = NULL;
	if (path_hex) {
		size_t hl = strlen(path_hex);
		decoded = malloc(hl / 2 + 1);
		if (!decoded)
			return glsb_ws_fail("out_of_memory", "decoding --path-hex");
		long dl = glsb_ws_hex_decode(path_hex, hl, decoded);
		if (dl < 0) {
			free(decoded);
			return glsb_ws_fail("usage", "--path-hex wants an even number of hex digits (0-9, a-f, A-F)");
		}
		p = (const char *)decoded;
		plen = (size_t)dl;
	}
	enum glsb_ws_path_err pe = glsb_ws_path_split(p, plen, &pp);
	free(decoded);
	if (pe != GLSB_WS_PATH_OK)
		return glsb_ws_fail(glsb_ws_path_code(pe), "%s", glsb_ws_path_message(pe));
	char rel[GLSB_WS_PATH_MAX];
	size_t rl = 0;
	for (size_t i = 0; i < pp.ncomp; i++) {
		const char *c = glsb_ws_path_comp(&pp, i);
		size_t cl = strlen(c);
		if (i)
			rel[rl++] = '/';
		memcpy(rel + rl, c, cl);
		rl += cl;
	}
	rel[rl] = '\0';

	int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return glsb_ws_fail("root_invalid", "cannot open the root directory '%s': %s", root, strerror(errno));
	uint64_t resolve = follow ? RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS : GLSB_WS_RESOLVE;
	int fd = glsb_ws_openat2(rootfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0, resolve);
	int e = errno;
	close(rootfd);
	if (fd < 0) {
		if (e == ENOSYS || e == E2BIG)
			return glsb_ws_fail("openat2_unavailable", "openat2 is unavailable (%s); refusing to resolve "
					    "the path unconfined", strerror(e));
		if (e == ENXIO)
			return glsb_ws_fail("not_regular_file", "'%s' is not a regular file", rel);
		if (e == ELOOP)
			return glsb_ws_fail("symlink", "'%s': a component is a symlink or magic link (never followed)",
					    rel);
		return glsb_ws_fail(glsb_ws_lookup_code(e), "'%s': %s", rel, strerror(e));
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return glsb_ws_fail("not_regular_file", "'%s' is not a regular file", rel);
	}
	if ((unsigned long long)st.st_size > max) {
		close(fd);
		return glsb_ws_fail("too_large", "'%s' has %lld bytes, more than --max-bytes %llu", rel,
				    (long long)st.st_size, max);
	}
	/* The size fstat gave is what is announced and sent: the bytes stream to stdout (splice(2)
	 * from the page cache into the pipe, no copy through our memory; plain reads where stdout
	 * takes no splice). A file that grows meanwhile is sent as its first N bytes; one that
	 * shrinks cannot be: the output stops short and the exit status is 1 (the host compares
	 * the count it got with N and checks the status). */
	unsigned long long len = (unsigned long long)st.st_size;
	char head[64];
	int hl = snprintf(head, sizeof head, "{\"ok\":true,\"bytes\":%llu}\n", len);
	if (glsb_write_all(STDOUT_FILENO, head, (size_t)hl) < 0) {
		close(fd);
		return 1;
	}
	int rc = 0, use_splice = 1;
	loff_t off = 0;
	static unsigned char buf[65536];
	while ((unsigned long long)off < len) {
		size_t want = len - (unsigned long long)off < (1u << 20) ? (size_t)(len - (unsigned long long)off)
									 : (1u << 20);
		ssize_t r;
		if (use_splice) {
			r = splice(fd, &off, STDOUT_FILENO, NULL, want, SPLICE_F_MOVE);
			if (r < 0 && (errno == EINVAL || errno == ENOSYS) && off == 0) {
				use_splice = 0;
				continue;
			}
		} else {
			r = pread(fd, buf, want < sizeof buf ? want : sizeof buf, off);
			if (r > 0 && glsb_write_all(STDOUT_FILENO, buf, (size_t)r) < 0)
				r = -1;
			if (r > 0)
				off += r;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "glsb-confine read: '%s': %s after %lld of %llu bytes\n", rel,
				r < 0 ? strerror(errno) : "the file shrank", (long long)off, len);
			rc = 1;
			break;
		}
	}
	close(fd);
	return rc;
}
