/* sbutil.h: small helpers every glsb-confine command shares: messages, whole writes, small
 * files and knobs, directories, and the PATH lookup of a program. */
#ifndef GLSB_SB_UTIL_H
#define GLSB_SB_UTIL_H

#include <stddef.h>
#include <sys/types.h>

/* snprintf that callers use where truncation is acceptable (messages, bounded paths that are
 * checked by the call that uses them). Returns what snprintf returns. */
int glsb_sb_fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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

/* Find a program the way execvp would, but with the given PATH (the one of the environment the
 * program will get, not ours): a name containing '/' is taken as it is (it must exist); else
 * each entry of path (an empty entry is the current directory; relative entries are relative
 * to dirfd) is tried for a regular file we may execute. The result goes to out, relative to
 * dirfd when it is relative. 0, or -1 with errno (ENOENT: in no entry). */
int glsb_find_program(int dirfd, const char *name, const char *path, char *out, size_t cap);

/* What /proc/PID/cmdline and /proc/PID/environ show of a process is its own memory (the
 * argument and environment strings exec put on its stack). Remember where they are (main);
 * hide them later in a process that others may see (the sandbox's init, a call child): the
 * command line becomes title, the environment zeros. Strings there are gone after hiding:
 * copy what is still needed first (glsb_dup_strings). */
void glsb_remember_process_text(int argc, char **argv);
void glsb_hide_process_text(const char *title);
/* A deep copy of a NULL-terminated string array (exits on allocation failure: only used
 * between fork and exec, where nothing else could be done). */
char **glsb_dup_strings(char *const *v);

#endif
