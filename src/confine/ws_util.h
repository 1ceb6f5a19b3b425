/* ws_util.h: what `write` and `run` share: JSON on stdout, openat2, number parsing. */
#ifndef GLSB_WS_UTIL_H
#define GLSB_WS_UTIL_H

#include <stdint.h>

#include "kernel.h"
#include "json.h"

/* Every lookup below the workspace root uses exactly these. */
#define GLSB_WS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* openat2(dirfd, path, {flags, mode, resolve}); returns an fd or -1 with errno. */
int glsb_ws_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);

/* Write b and a newline to stdout; 0 or -1. */
int glsb_ws_emit(struct glsb_jbuf *b);

/* Print {"ok":false,"error":code,"message":...} on stdout; returns 1 (the exit status). */
int glsb_ws_fail(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Map an errno from a lookup beneath the root to a reason code: "symlink",
 * "escape", "not_directory", "not_found", ... */
const char *glsb_ws_lookup_code(int err);

/* Strict decimal parsing: the whole string, no sign, no overflow; 0 or -1. */
int glsb_ws_parse_u64(const char *s, unsigned long long *out);

#endif
