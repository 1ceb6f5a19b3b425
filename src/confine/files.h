/* files.h: the file helpers every glsb-confine command shares: whole writes, small files and
 * knobs, directories made and trees removed. */
#ifndef GLSB_FILES_H
#define GLSB_FILES_H

#include <stddef.h>
#include <sys/types.h>

/* write() all of buf, retrying on EINTR and short writes. 0 or -1. */
int glsb_write_all(int fd, const void *buf, size_t len);
/* Create (or truncate) path with mode and the given content. 0 or -1 with errno. */
int glsb_write_file(const char *path, const char *data, mode_t mode);
/* Write a short string to an existing file (cgroup/proc knobs). 0 or -1 with errno. */
int glsb_write_knob(const char *path, const char *data);
/* Read up to cap-1 bytes of a small file into buf, NUL-terminated. Length or -1. */
ssize_t glsb_read_file(const char *path, char *buf, size_t cap);
/* mkdir -p; existing directories are fine. 0 or -1 with errno. */
int glsb_mkdirs(const char *path, mode_t mode);
/* Remove path recursively without following symlinks (unlinkat/openat with O_NOFOLLOW). */
int glsb_remove_tree(const char *path);

#endif
