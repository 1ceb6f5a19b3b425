/* ws_util.c: what `write` and `run` share: JSON on stdout, openat2, number parsing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ws_util.h"
#include "files.h"
#include "json.h"
#include "ws_result.h"

int glsb_ws_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct glsb_open_how how = {flags, mode, resolve};
	return (int)glsb_sys_openat2(dirfd, path, &how);
}

int glsb_ws_emit(struct glsb_jbuf *b)
{
	glsb_jbuf_put(b, "\n", 1);
	if (b->failed) {
		static const char oom[] = "{\"ok\":false,\"error\":\"out_of_memory\","
					  "\"message\":\"out of memory while encoding the result\"}\n";
		glsb_write_all(STDOUT_FILENO, oom, sizeof oom - 1);
		return -1;
	}
	return glsb_write_all(STDOUT_FILENO, b->p, b->len);
}

int glsb_ws_fail(const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof msg)
		n = sizeof msg - 1;
	struct glsb_jbuf b = {0};
	glsb_ws_json_error(&b, code, msg, (size_t)n);
	glsb_ws_emit(&b);
	glsb_jbuf_free(&b);
	return 1;
}

const char *glsb_ws_lookup_code(int err)
{
	switch (err) {
	case ELOOP: return "symlink";       /* RESOLVE_NO_SYMLINKS / NO_MAGICLINKS / O_NOFOLLOW */
	case EXDEV: return "escape";        /* RESOLVE_BENEATH refused the walk */
	case ENOTDIR: return "not_directory";
	case ENOENT: return "not_found";
	case EACCES:
	case EPERM: return "permission_denied";
	case ENAMETOOLONG: return "path_too_long";
	case EAGAIN: return "retry";        /* RESOLVE_CACHED-style or a rename race seen by the kernel */
	default: return "io_error";
	}
}

int glsb_ws_parse_u64(const char *s, unsigned long long *out)
{
	unsigned long long v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > (~0ULL - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}
