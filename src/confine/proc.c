/* proc.c: this process and the programs it starts, for every glsb-confine command: the PATH
 * lookup of a program, hiding our command line and environment, copies of string arrays. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"

static int is_exec_file(int dirfd, const char *path)
{
	struct stat st;
	return fstatat(dirfd, path, &st, 0) == 0 && S_ISREG(st.st_mode) &&
	       faccessat(dirfd, path, X_OK, 0) == 0;
}

int glsb_find_program(int dirfd, const char *name, const char *path, char *out, size_t cap)
{
	struct stat st;

	if (strchr(name, '/')) {
		if ((size_t)snprintf(out, cap, "%s", name) >= cap) {
			errno = ENAMETOOLONG;
			return -1;
		}
		return fstatat(dirfd, name, &st, 0);
	}
	for (const char *p = path ? path : ""; path;) {
		size_t n = strcspn(p, ":");
		/* POSIX: an empty PATH entry is the current directory */
		int len = n ? snprintf(out, cap, "%.*s/%s", (int)n, p, name) : snprintf(out, cap, "./%s", name);
		if (len > 0 && (size_t)len < cap && is_exec_file(dirfd, out))
			return 0;
		if (!p[n])
			break;
		p += n + 1;
	}
	errno = ENOENT;
	return -1;
}

extern char **environ;
static char *args_start, *args_end, *env_start, *env_end;

void glsb_remember_process_text(int argc, char **argv)
{
	/* exec lays the strings out back to back: argv's, then environ's */
	if (argc < 1)
		return;
	char *end = argv[0];
	for (int i = 0; i < argc; i++) {
		if (argv[i] != end)
			return; /* not the layout we know: leave it */
		end = argv[i] + strlen(argv[i]) + 1;
	}
	args_start = argv[0];
	args_end = end;
	env_start = env_end = end;
	for (char **e = environ; *e && *e == env_end; e++)
		env_end = *e + strlen(*e) + 1;
}

void glsb_hide_process_text(const char *title)
{
	if (!args_start)
		return;
	size_t n = (size_t)(args_end - args_start), tl = strlen(title);
	memset(args_start, 0, n);
	memcpy(args_start, title, tl < n ? tl : n - 1);
	/* A non-NUL last byte tells the kernel the title was rewritten (setproctitle style):
	 * /proc/PID/cmdline then shows it up to its NUL, not the zeros after it. */
	if (tl + 1 < n)
		args_end[-1] = ' ';
	memset(env_start, 0, (size_t)(env_end - env_start));
}

char **glsb_dup_strings(char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	char **out = calloc(n + 1, sizeof *out);
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i])))
			out = NULL;
	if (!out)
		_exit(125);
	return out;
}
