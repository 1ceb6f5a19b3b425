/* cgroup_version.h: what each cgroup version gives cgroup.c, one file per version as nsjail has
 * (cgroup2.cc, cgroup.cc): cgroup_v2.c and cgroup_v1.c. Not for files outside cgroup*.c. */
#ifndef GLSB_CGROUP_VERSION_H
#define GLSB_CGROUP_VERSION_H

#include "sbkit.h"

struct glsb_cg_version {
	int version; /* 1 or 2 */
	/* Create the leaf (v2) or leaves (v1) named name below our cgroup with the limits: 0, or -1
	 * with cg->why set and nothing left behind. A CPU quota that cannot be set leaves cg->cpu 0
	 * and cg->cpu_why set, and is not a failure. */
	int (*create)(struct glsb_sb_cgroup *cg, const char *name, const struct glsb_sb_limits *lim);
	/* Open what a new task needs to join the leaves (glsb_sb_cgroup_prepare_join). 0 or -1. */
	int (*prepare_join)(struct glsb_sb_cgroup *cg);
	/* Files of the memory leaf: the OOM-kill counter ("oom_kill N" line), use and peak in bytes. */
	const char *oom_file, *current_file, *peak_file;
	/* Append "cgroup_vN":... describing this machine (glsb_sb_cgroup_describe). */
	void (*describe)(struct glsb_jbuf *b);
};

extern const struct glsb_cg_version glsb_cg_v2, glsb_cg_v1;

#endif
