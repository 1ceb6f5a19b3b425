/* cgroup_leaf.h: what both cgroup versions share (cgroup_v1.c, cgroup_v2.c, cgroup.c): finding a
 * hierarchy and our place in it, writing knobs, and the leaves themselves (made under their
 * owner's lock, collected when their owner is gone, removed). Not for files outside cgroup*.c. */
#ifndef GLSB_CGROUP_LEAF_H
#define GLSB_CGROUP_LEAF_H

#include <stddef.h>

#include "sbkit.h"

/* Read the test hooks (GLSB_CONFINE_CGROUP2_ROOT, GLSB_CONFINE_TEST_CGROUP_PARENT) once per
 * glsb_sb_cgroup_create. */
void glsb_cg_read_hooks(void);
/* GLSB_CONFINE_CGROUP2_ROOT=DIR (a test hook): DIR stands for the cgroup2 mount and our own
 * cgroup, and knobs are plain files there, each write appended as a line, so a spec can check
 * what the v2 path writes on a machine whose cgroup2 hierarchy has no controllers. v1 is not
 * tried then. NULL when not set. */
const char *glsb_cg_fake_v2_root(void);
/* The directory below our cgroup that holds the leaves: "glsb", or the plain name
 * GLSB_CONFINE_TEST_CGROUP_PARENT gives (spec/confine/cgroup_collect_spec.lua), so that a spec's
 * stale collections only ever look at its own leaves, never at other sandboxes'. */
const char *glsb_cg_leaves_dir(void);

/* Mount point (and root) of the cgroup2 hierarchy (want == NULL) or of the v1 hierarchy whose
 * super options include controller want, from /proc/self/mountinfo. 1 if found. */
int glsb_cg_find_mount(const char *want, char *mnt, size_t cap, char *root, size_t rcap);
/* Directory of this process's cgroup in that hierarchy, e.g. /sys/fs/cgroup/memory/a/b. 1 if found. */
int glsb_cg_own_dir(const char *want, char *out, size_t cap);

/* Write value to dir/name (a plain append under the fake v2 root). 0 or -1 with errno. */
int glsb_cg_knob(const char *dir, const char *name, const char *value);
/* 1 if dir/file lists both controllers. */
int glsb_cg_has_controllers(const char *dir, const char *file, const char *want1, const char *want2);

/* Create parent/<leaves dir>/<name> (or <name>1 ... <name>9 if a stale leaf has that name) into
 * out, locked for its owner: *lock_fd is its directory, flocked, or -1. Collects the stale
 * leaves of dead owners first. 0, or -1 with errno. */
int glsb_cg_make_leaf(const char *parent, const char *name, char *out, size_t cap, int *lock_fd);
/* Remove cg's leaves (waiting briefly for the kernel to release them), close their locks, and
 * set ndirs and version to 0. */
void glsb_cg_remove_leaves(struct glsb_sb_cgroup *cg);

#endif
