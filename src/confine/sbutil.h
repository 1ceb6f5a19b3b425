/* sbutil.h: small helpers shared by sandbox.c and doctor.c: a fixed-size JSON text buffer
 * (no allocation, usable between clone and exec) and file/dir helpers. */
#ifndef GLSB_SB_UTIL_H
#define GLSB_SB_UTIL_H

#include <stddef.h>
#include <sys/types.h>

struct glsb_sb_buf {
	char data[8192];
	size_t len;
	int overflow;
};

/* Append printf-style text; on overflow the buffer keeps what fit and sets overflow. */
void glsb_sb_buf_printf(struct glsb_sb_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* snprintf that callers use where truncation is acceptable (messages, bounded paths that are
 * checked by the call that uses them). Returns what snprintf returns. */
int glsb_sb_fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Append s as a JSON string literal (quotes included). */
void glsb_sb_buf_json_str(struct glsb_sb_buf *b, const char *s);

/* write() all of buf, retrying on EINTR and short writes. 0 or -1. */
int glsb_sb_write_all(int fd, const void *buf, size_t len);
/* Create (or truncate) path with mode and the given content. 0 or -1 with errno. */
int glsb_sb_write_file(const char *path, const char *data, mode_t mode);
/* Write a short string to an existing file (cgroup/proc knobs). 0 or -1 with errno. */
int glsb_sb_write_knob(const char *path, const char *data);
/* Read up to cap-1 bytes of a small file into buf, NUL-terminated. Length or -1. */
ssize_t glsb_sb_read_file(const char *path, char *buf, size_t cap);
/* mkdir -p; existing directories are fine. 0 or -1 with errno. */
int glsb_sb_mkdirs(const char *path, mode_t mode);
/* Remove path recursively without following symlinks (unlinkat/openat with O_NOFOLLOW). */
int glsb_sb_remove_tree(const char *path);
/* 1 if the whitespace/comma separated list contains word. */
int glsb_sb_has_word(const char *list, const char *word);

#endif
