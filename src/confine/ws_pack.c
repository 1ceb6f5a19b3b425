/* ws_pack.c: `glsb-confine pack` (the local provider's snapshots): the trees below the given roots as
 * one tar stream on stdout, made by the system's GNU tar with arguments and an environment of our own,
 * so that nothing the sandbox set (TAR_OPTIONS, a tar on its PATH) changes what it does: symlinks are
 * archived as symlinks and never followed, another file system mounted below a root is not entered. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"

#define TAR "/usr/bin/tar"
#define MAX_ROOTS 8

static const char pack_usage[] =
	"usage: glsb-confine pack --root DIR [--root DIR ...]\n"
	"\n"
	"Print one tar archive of the trees below each DIR on stdout (GNU format, entries sorted\n"
	"by name, numeric owners, holes of sparse files kept as holes), named as each DIR without\n"
	"its leading '/' (--root /home/user: home/user/...). DIR is an absolute path without '.',\n"
	"'..' or empty components, and a directory (not a symlink). " TAR " makes the archive, with\n"
	"exactly these arguments and an environment of PATH and LC_ALL=C only: symlinks are\n"
	"archived as symlinks (never followed), hard links as links, a file system mounted below a\n"
	"DIR is not entered (--one-file-system), no xattrs or ACLs.\n"
	"\n"
	"Exit status: tar's (0; 1: a file changed while it was read; 2: a file could not be read,\n"
	"named on stderr). A refused DIR: a line 'glsb-confine pack: ...' on stderr, exit 2,\n"
	"nothing on stdout.\n";

__attribute__((format(printf, 1, 2))) static int refuse(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("glsb-confine pack: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 2;
}

/* An absolute path of one or more plain components: no "", ".", ".." component, no trailing '/'. */
static int canonical(const char *p)
{
	if (p[0] != '/' || p[1] == '\0')
		return 0;
	for (const char *c = p + 1;;) {
		const char *end = strchr(c, '/');
		size_t n = end ? (size_t)(end - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (!end)
			return 1;
		c = end + 1;
	}
}

int glsb_cmd_pack(int argc, char **argv)
{
	const char *roots[MAX_ROOTS];
	int nroots = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(pack_usage, stdout);
			return 0;
		} else if (i + 1 < argc && !strcmp(a, "--root")) {
			if (nroots == MAX_ROOTS)
				return refuse("at most %d roots", MAX_ROOTS);
			roots[nroots++] = argv[++i];
		} else {
			return refuse("unknown or incomplete option '%s' (see glsb-confine pack --help)", a);
		}
	}
	if (nroots == 0)
		return refuse("--root is required");
	for (int i = 0; i < nroots; i++) {
		struct stat st;
		if (!canonical(roots[i]))
			return refuse("--root '%s': not an absolute path of plain components", roots[i]);
		if (lstat(roots[i], &st) < 0 || !S_ISDIR(st.st_mode))
			return refuse("--root '%s': not a directory", roots[i]);
	}

	char *targv[24 + MAX_ROOTS];
	int n = 0;
	const char *fixed[] = {"tar", "--create", "--file=-", "--format=gnu", "--sort=name", "--sparse",
			       "--numeric-owner", "--one-file-system", "--no-acls", "--no-xattrs", "--no-selinux",
			       "--no-wildcards", "--directory=/", "--"};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		targv[n++] = (char *)fixed[i];
	for (int i = 0; i < nroots; i++)
		targv[n++] = (char *)roots[i] + 1;
	targv[n] = NULL;
	char *envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
	execve(TAR, targv, envp);
	return refuse("cannot run " TAR ": %s", strerror(errno));
}
