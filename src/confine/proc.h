/* proc.h: this process and the programs it starts, for every glsb-confine command. */
#ifndef GLSB_PROC_H
#define GLSB_PROC_H

#include <stddef.h>

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
