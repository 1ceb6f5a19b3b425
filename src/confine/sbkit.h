/* sbkit.h: the confinement pieces used by `sandbox` (and `write`) and probed by `doctor`:
 * namespace probes, Landlock, the seccomp filter and cgroup limits. Each returns a failure
 * value; none exits. */
#ifndef GLSB_SB_KIT_H
#define GLSB_SB_KIT_H

#include <stdint.h>
#include <sys/types.h>

#include "kernel.h"
#include "json.h"

/* --- namespaces (ns.c) --- */
struct glsb_sb_ns {
	const char *name; /* "userns", "pidns", ... as in the JSON reports */
	int flag;         /* CLONE_NEW* */
};
extern const struct glsb_sb_ns glsb_sb_namespaces[];
extern const int glsb_sb_namespace_count;
/* Try unshare(CLONE_NEWUSER) then unshare(flag) in a throwaway child: 0 or an errno. */
int glsb_sb_probe_ns(int flag);

/* --- Landlock (landlock.c) --- */
#define GLSB_LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define GLSB_LL_RX (GLSB_LL_READ | LANDLOCK_ACCESS_FS_EXECUTE)
#define GLSB_LL_DEV (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
		     LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define GLSB_LL_RW (~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK))

/* Flags of glsb_sb_landlock_begin. */
#define GLSB_LL_SCOPE 1      /* ABI >= 6: signals and abstract unix sockets stay in the domain */
#define GLSB_LL_HANDLE_NET 2 /* ABI >= 4: TCP bind/connect are handled (so denied: no net rules) */

/* Highest Landlock ABI the kernel offers, or 0 (errno says why). */
int glsb_sb_landlock_abi(void);
/* Every filesystem right the given ABI can handle. */
uint64_t glsb_sb_landlock_fs_rights(int abi);

struct glsb_sb_landlock {
	int fd;
	int abi;
	uint64_t handled;
};
/* Create a ruleset handling every fs right of abi (and what flags ask). 0 or -1 with errno. */
int glsb_sb_landlock_begin(struct glsb_sb_landlock *ll, int abi, unsigned flags);
/* Allow access (masked to what is handled) beneath path, or beneath the file open at fd.
 * 0 or -1 with errno. */
int glsb_sb_landlock_allow(struct glsb_sb_landlock *ll, const char *path, uint64_t access);
int glsb_sb_landlock_allow_fd(struct glsb_sb_landlock *ll, int fd, uint64_t access);
/* restrict_self (no_new_privs must be set) and close the ruleset. 0 or -1 with errno. */
int glsb_sb_landlock_enforce(struct glsb_sb_landlock *ll);
void glsb_sb_landlock_abort(struct glsb_sb_landlock *ll);

/* The sandbox's policy, enforced on the calling process: read on /, read+exec on /usr and the
 * real /bin, /sbin, /lib* directories, read+write on /tmp, /home/user and /files, the devices
 * in /dev, plus extra (the --bind/--ro-bind targets); signals and abstract unix sockets scoped
 * (ABI >= 6). no_new_privs must be set. 0, or -1 with a reason in why. */
struct glsb_sb_ll_path {
	const char *path;
	uint64_t access;
};
int glsb_sb_landlock_sandbox(int abi, const struct glsb_sb_ll_path *extra, int nextra, char *why,
			     size_t whylen);
/* `write`'s policy: filesystem access denied everywhere except, beneath rootfd, what a write
 * needs (make dirs and regular files, write, truncate, remove/rename files, read directories,
 * refer); TCP bind/connect denied (ABI >= 4), signals and abstract unix sockets scoped (ABI >= 6).
 * Sets no_new_privs. Requires abi >= 3. 0, or -1 with a reason in why. */
int glsb_sb_landlock_confine_writes(int rootfd, int abi, char *why, size_t whylen);

/* --- seccomp (seccomp.c) --- */
/* Install the sandbox's denylist filter (no_new_privs must be set). 0 or -1 with errno. */
int glsb_sb_seccomp_install(void);
/* Number of syscalls denied by the filter (for reports). */
int glsb_sb_seccomp_rule_count(void);

/* --- cgroups (cgroup.c: v2 in cgroup_v2.c, v1 in cgroup_v1.c, both use cgroup_leaf.c) --- */
struct glsb_sb_limits {
	long memory_mb;                   /* memory.max / limit_in_bytes (and v1's TCP buffers) */
	long pids;                        /* pids.max */
	long cpu_quota_us, cpu_period_us; /* CPU bandwidth; quota 0: no CPU limit */
};
struct glsb_sb_cgroup {
	int version;       /* 0 none, 1, 2 */
	int ndirs;
	char dirs[3][512]; /* created leaf cgroups: v2 one, v1 memory, pids and/or cpu */
	int mem_idx;       /* index of the memory leaf in dirs, or -1 */
	int cpu;           /* the CPU quota is set */
	int sockets;       /* socket buffers are charged (v2: memory.max; v1: kmem.tcp limit) */
	char why[256];     /* why nothing was created */
	char cpu_why[256]; /* why no CPU quota */
	int born_fd;       /* v2: the leaf, for clone3(CLONE_INTO_CGROUP); or -1 */
	int tasks_fds[3];  /* v1: each leaf's "tasks", opened for writing; or -1 */
	int lock_fds[3];   /* each leaf's directory, flocked (LOCK_EX) from its creation to its
			    * removal: what tells collectors its owner lives (cgroup_leaf.c); or -1 */
};
/* Create a leaf cgroup glsb/<name> below this process's cgroup with the limits (v2 when memory
 * and pids can be enabled there, else v1 memory/pids/cpu). 0, or -1 with why set. A CPU quota
 * that cannot be set leaves cpu 0 and cpu_why set, and is not a failure. */
int glsb_sb_cgroup_create(struct glsb_sb_cgroup *cg, const char *name,
			  const struct glsb_sb_limits *lim);
/* The leaf's OOM-kill counter (v2 memory.events, v1 memory.oom_control), or -1 if unknown. */
long glsb_sb_cgroup_oom_kills(const struct glsb_sb_cgroup *cg);
/* The leaf's memory use and its peak in bytes (-1 where unknown). */
void glsb_sb_cgroup_memory(const struct glsb_sb_cgroup *cg, long long *current, long long *peak);
/* Joining a cgroup moves a task under the kernel's global threadgroup lock, whose first taker
 * after a quiet while waits a whole RCU grace period (10-15 ms here). Two ways around it, made
 * ready before the fork: v2 creates the child in the leaf (clone3 CLONE_INTO_CGROUP, born_fd);
 * v1 lets the single-threaded child move its one thread by writing "0" to each leaf's "tasks"
 * (no global lock for a thread moving itself), through descriptors we opened: the kernel
 * checks the opener's credentials, so the child needs none. 0 or -1 with errno. */
int glsb_sb_cgroup_prepare_join(struct glsb_sb_cgroup *cg);
/* v1, in the child: move the calling thread (the whole process, single-threaded) through the
 * descriptors above. Nothing to do (0) without them. 0 or -1 with errno. */
int glsb_sb_cgroup_join_self(const struct glsb_sb_cgroup *cg);
void glsb_sb_cgroup_close_join(struct glsb_sb_cgroup *cg);
/* fork-like clone (no new stack) with flags (CLONE_NEW* ...), born in the leaf when the
 * cgroup allows it (v2); *born tells whether it was. The pid, 0 in the child, -1 with errno. */
long glsb_sb_cgroup_clone(const struct glsb_sb_cgroup *cg, unsigned long flags, int *born);
/* Move pid into the created cgroup(s). 0 or -1 with errno. */
int glsb_sb_cgroup_attach(const struct glsb_sb_cgroup *cg, pid_t pid);
/* GLSB_CONFINE_TEST_HOLD_CGROUP (a test hook): pause while the new leaves are empty. */
void glsb_sb_cgroup_test_hold(void);
/* Remove the created cgroup(s); waits briefly for the kernel to release them. */
void glsb_sb_cgroup_remove(struct glsb_sb_cgroup *cg);
/* In a child: close its copies of the leaves' locks (the owner keeps holding them). */
void glsb_sb_cgroup_forget_locks(struct glsb_sb_cgroup *cg);
/* Append "cgroup_v2":...,"cgroup_v1":... describing this machine to a JSON object. */
void glsb_sb_cgroup_describe(struct glsb_jbuf *b);

#endif
