/* sb_rlimits.c: the per-process limits of everything in the sandbox: CPU seconds, data (heap)
 * size, file size (never above the storage size), open files, processes, and no core dumps. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "sb.h"

static void set_limit(struct sb *sb, int res, const char *name, rlim_t soft, rlim_t hard)
{
	struct rlimit rl = {soft, hard};
	if (setrlimit(res, &rl) < 0)
		glsb_sb_child_fail(sb, "setrlimit %s: %s", name, strerror(errno));
}

long glsb_sb_apply_rlimits(struct sb *sb)
{
	const struct sb_options *o = &sb->opt;
	rlim_t mb = 1024 * 1024;
	long fsize = o->file_mb < o->disk_mb ? o->file_mb : o->disk_mb;

	set_limit(sb, RLIMIT_CPU, "cpu", (rlim_t)o->cpu_s, (rlim_t)o->cpu_s + 5);
	set_limit(sb, RLIMIT_DATA, "data", (rlim_t)o->memory_mb * mb, (rlim_t)o->memory_mb * mb);
	set_limit(sb, RLIMIT_FSIZE, "fsize", (rlim_t)fsize * mb, (rlim_t)fsize * mb);
	set_limit(sb, RLIMIT_NOFILE, "nofile", (rlim_t)o->nofile, (rlim_t)o->nofile);
	set_limit(sb, RLIMIT_NPROC, "nproc", (rlim_t)o->nproc, (rlim_t)o->nproc);
	set_limit(sb, RLIMIT_CORE, "core", 0, 0);
	return fsize;
}
