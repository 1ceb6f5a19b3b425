/* ws_path.h: pure validation of workspace-relative paths and names (no I/O). */
#ifndef GLSB_WS_PATH_H
#define GLSB_WS_PATH_H

#include <stddef.h>

/* Limits mirror the kernel's: a name is at most NAME_MAX bytes, a path with its
 * terminating NUL fits PATH_MAX. */
#define GLSB_WS_NAME_MAX 255
#define GLSB_WS_PATH_MAX 4096
#define GLSB_WS_MAX_COMPONENTS (GLSB_WS_PATH_MAX / 2)

/* Reason codes; glsb_ws_path_code() gives the stable string used as "error". */
enum glsb_ws_path_err {
	GLSB_WS_PATH_OK = 0,
	GLSB_WS_PATH_EMPTY,          /* "" */
	GLSB_WS_PATH_NUL,            /* a NUL byte anywhere */
	GLSB_WS_PATH_ABSOLUTE,       /* starts with '/' */
	GLSB_WS_PATH_EMPTY_COMPONENT,/* "a//b", "a/" */
	GLSB_WS_PATH_DOT,            /* a "." component */
	GLSB_WS_PATH_DOTDOT,         /* a ".." component */
	GLSB_WS_PATH_NAME_TOO_LONG,  /* a component over NAME_MAX bytes */
	GLSB_WS_PATH_TOO_LONG,       /* the whole path does not fit PATH_MAX */
	GLSB_WS_PATH_SLASH,          /* a single name that contains '/' */
};

/* A validated path split into NUL-terminated components kept in buf. */
struct glsb_ws_path {
	char buf[GLSB_WS_PATH_MAX];
	size_t ncomp;
	unsigned short off[GLSB_WS_MAX_COMPONENTS];
};

/* Validate p[0..n) as a relative path of plain names; on success fill *out.
 * Never reads past n; p need not be NUL-terminated. */
enum glsb_ws_path_err glsb_ws_path_split(const char *p, size_t n, struct glsb_ws_path *out);

/* Validate one name (a cwd component): non-empty, not "."/"..", no '/', no NUL. */
enum glsb_ws_path_err glsb_ws_name_check(const char *p, size_t n);

static inline const char *glsb_ws_path_comp(const struct glsb_ws_path *pp, size_t i)
{
	return pp->buf + pp->off[i];
}

const char *glsb_ws_path_code(enum glsb_ws_path_err e);     /* "absolute_path", ... */
const char *glsb_ws_path_message(enum glsb_ws_path_err e);  /* one English sentence */

/* Decode hex (upper or lower case, even length) into out (room for n/2 bytes).
 * Returns the number of bytes written, or -1 on a malformed string. */
long glsb_ws_hex_decode(const char *hex, size_t n, unsigned char *out);

#endif
