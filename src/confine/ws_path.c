/* ws_path.c: pure validation of workspace-relative paths and names; shared by
 * `write` (the target path) and `run` (cwd components), fuzzed by fuzz_ws_path. */
#include <string.h>

#include "ws_path.h"

static enum glsb_ws_path_err check_component(const char *c, size_t n)
{
	if (n == 0)
		return GLSB_WS_PATH_EMPTY_COMPONENT;
	if (n == 1 && c[0] == '.')
		return GLSB_WS_PATH_DOT;
	if (n == 2 && c[0] == '.' && c[1] == '.')
		return GLSB_WS_PATH_DOTDOT;
	if (n > GLSB_WS_NAME_MAX)
		return GLSB_WS_PATH_NAME_TOO_LONG;
	return GLSB_WS_PATH_OK;
}

enum glsb_ws_path_err glsb_ws_path_split(const char *p, size_t n, struct glsb_ws_path *out)
{
	out->ncomp = 0;
	if (n == 0)
		return GLSB_WS_PATH_EMPTY;
	/* NUL first: the kernel would silently cut the path there. */
	if (memchr(p, '\0', n))
		return GLSB_WS_PATH_NUL;
	if (p[0] == '/')
		return GLSB_WS_PATH_ABSOLUTE;
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		enum glsb_ws_path_err e = check_component(p + start, i - start);
		if (e != GLSB_WS_PATH_OK)
			return e;
		start = i + 1;
	}
	if (n >= GLSB_WS_PATH_MAX)
		return GLSB_WS_PATH_TOO_LONG;
	/* Valid: copy with each '/' turned into the terminator of its component. */
	memcpy(out->buf, p, n);
	out->buf[n] = '\0';
	start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		out->buf[i] = '\0';
		out->off[out->ncomp++] = (unsigned short)start;
		start = i + 1;
	}
	return GLSB_WS_PATH_OK;
}

enum glsb_ws_path_err glsb_ws_name_check(const char *p, size_t n)
{
	if (memchr(p, '\0', n))
		return GLSB_WS_PATH_NUL;
	if (memchr(p, '/', n))
		return GLSB_WS_PATH_SLASH;
	return check_component(p, n);
}

static const struct {
	const char *code, *message;
} reasons[] = {
	[GLSB_WS_PATH_OK] = {"ok", "path is valid"},
	[GLSB_WS_PATH_EMPTY] = {"empty_path", "the path is empty"},
	[GLSB_WS_PATH_NUL] = {"nul_byte", "the path contains a NUL byte"},
	[GLSB_WS_PATH_ABSOLUTE] = {"absolute_path", "the path is absolute; it must be relative to the workspace root"},
	[GLSB_WS_PATH_EMPTY_COMPONENT] = {"empty_component", "the path has an empty component ('//' or a trailing '/')"},
	[GLSB_WS_PATH_DOT] = {"dot_component", "the path has a '.' component"},
	[GLSB_WS_PATH_DOTDOT] = {"dotdot_component", "the path has a '..' component"},
	[GLSB_WS_PATH_NAME_TOO_LONG] = {"name_too_long", "a path component is longer than 255 bytes"},
	[GLSB_WS_PATH_TOO_LONG] = {"path_too_long", "the path is longer than 4095 bytes"},
	[GLSB_WS_PATH_SLASH] = {"slash_in_name", "a single name was expected but it contains '/'"},
};

const char *glsb_ws_path_code(enum glsb_ws_path_err e)
{
	if ((unsigned)e >= sizeof reasons / sizeof reasons[0])
		return "invalid_path";
	return reasons[e].code;
}

const char *glsb_ws_path_message(enum glsb_ws_path_err e)
{
	if ((unsigned)e >= sizeof reasons / sizeof reasons[0])
		return "the path is invalid";
	return reasons[e].message;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long glsb_ws_hex_decode(const char *hex, size_t n, unsigned char *out)
{
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval(hex[i]), lo = hexval(hex[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	return (long)(n / 2);
}
