/* sb.h: what the files of `glsb-confine sandbox` share: its options, the state the supervisor
 * builds before clone (the child works on its own copy), and one function per step. sandbox.c
 * reads as the list of steps; each concern lives in its own file, in layers (each file calls only
 * files below it; scripts/check-layers checks it):
 *   sandbox.c        the steps                        sb_supervisor.c  clone, wait, clean up
 *   sb_control.c     the control channel (CONTROL.md) sb_call.c        a call's confined child
 *   sb_init.c        PID 1 inside                     sb_options.c     usage text and option parsing
 *   sb_env.c         PROGRAM's environment            sb_mounts.c      mount plan and the private root
 *   sb_ids.c         id maps, workspace owner,        sb_net.c         hostname and loopback
 *                    becoming the sandbox user        sb_rlimits.c     rlimits
 *   sb_report.c      the --report-fd JSON
 * and, shared with `doctor` (sbkit.h): cgroup*.c, seccomp.c, landlock.c, ns.c. */
#ifndef GLSB_SB_H
#define GLSB_SB_H

#include <limits.h>
#include <stdarg.h>
#include <poll.h>
#include <sys/types.h>

#include "sbkit.h"

#define SANDBOX_UID 1000
#define SANDBOX_HOME "/home/user"
/* Host ids of the sandbox when started by root: inside uid/gid N is host ID_BASE + N (N = 0
 * and 1000 only), like a subordinate id range. 0x70000000 is above the ranges useradd and
 * systemd-nspawn hand out. */
#define DEFAULT_ID_BASE 1879048192L
/* Without --id-base, each sandbox started by root claims its own slot of that range
 * (sb_ids.c): ids DEFAULT_ID_BASE + k * SB_ID_SLOT_SIZE (+ 1000), k < --id-slots. */
#define SB_ID_SLOT_SIZE 65536L
#define SB_DEFAULT_ID_SLOTS 4096L
#define NEWROOT "/tmp" /* where the new root tmpfs is built, in the new mount namespace only */
#define EXIT_SETUP 125
#define EXIT_USAGE 2

/* --- options (sb_options.c) --- */
struct sb_bind {
	const char *src, *dst;
	int rw;
};

#define SB_NET_RULES_MAX 256

struct sb_options {
	const char *workspace;
	struct sb_bind binds[64];
	int nbinds;
	const char *env[256];
	int nenv;
	int network, degraded, cleanup, report_fd;
	const char *net_allow[SB_NET_RULES_MAX], *net_deny[SB_NET_RULES_MAX]; /* --net-allow, --net-deny */
	int nnet_allow, nnet_deny;
	long memory_mb, cpu_s, nproc, file_mb, disk_mb, nofile, id_base, id_slots;
	int id_base_given;
	double cpus; /* CPU quota in CPUs; 0: none */
	int private_storage; /* /tmp, /home/user, /files on one private tmpfs (else host binds) */
	int control_in, control_out; /* --control-fd (CONTROL.md), or -1 */
	long max_inodes;     /* of the private storage */
	char **argv; /* PROGRAM and its arguments */
};

/* --- the mount plan (sb_mounts.c) --- */
/* M_COPY: a small regular file copied into the root tmpfs (cheaper than a bind mount). */
enum sb_mkind { M_BIND_RO, M_BIND_RW, M_SYMLINK, M_DEV, M_COPY };
#define SB_COPY_MAX (1 << 20)
struct sb_mount {
	enum sb_mkind kind;
	int fd; /* source (O_PATH; O_RDONLY to copy), opened by the child in its mount ns */
	int isdir, follow;
	char src[512];
	char dst[256];
	char target[256]; /* symlink target */
};

/* What the child applied, for the report. */
struct sb_applied {
	int timens, cgroupns, nnp, landlock_abi, seccomp;
	long fsize_mb;
};

/* --network: the user-mode network (sb_usernet.c). Built by the supervisor before clone; the
 * child reads rules and hosts from its copy. */
#define SB_FORWARDS_MAX 64
struct sb_usernet {
	char slirp[PATH_MAX], nft[PATH_MAX]; /* the programs */
	char *rules;                   /* the nftables ruleset the child loads */
	char *hosts;                   /* lines for /etc/hosts: the names --net-allow pinned */
	char api[108];                 /* slirp4netns's API socket (in the workspace's top dir) */
	pid_t pid;                     /* slirp4netns, or -1 */
	int exit_fd;                   /* its --exit-fd's other end: closed, it exits; or -1 */
	int nfwd;
	struct { unsigned guest, host; } fwd[SB_FORWARDS_MAX]; /* ports forwarded (sb:get_host) */
};

struct sb {
	struct sb_options opt;
	struct sb_usernet net;
	/* built by the supervisor before clone */
	struct sb_mount plan[128];
	int nplan;
	char ws_real[PATH_MAX];
	pid_t owner;                  /* the process that started us (PR_SET_PDEATHSIG) */
	int ns_fds[6];                /* the sandbox's user, mnt, ipc, uts, net, pid namespaces, for
				       * calls (--control-fd only; -1 where it has none of its own) */
	char **config_words;          /* --config-fd: the words read, and argv spliced with them */
	char **config_argv;
	int root_mode;                /* started as root: shifted id map */
	int detached_sources;         /* plan fds are open_tree clones made by the supervisor */
	long host_uid, host_gid;      /* what the sandbox user is on the host */
	long id_slot;                 /* the id range claimed, or -1 */
	int id_lock_fd;               /* holds the claim (flock) until the supervisor exits */
	int clone_flags;              /* namespaces the child was created with */
	struct glsb_sb_cgroup cgroup;
	int have_cgroup;
	int born_in_cgroup;           /* the child was created in the leaf (v2 CLONE_INTO_CGROUP) */
	int reported_ok;              /* the ok:true line went out: an exit line follows */
	int failed_setup;             /* the child sent an 'E' line */
	int program_status;           /* PROGRAM's raw wait status from init's 'X' line, or -1 */
	long oom_kills_at_start;      /* the leaf's OOM-kill counter before PROGRAM ran, or -1 */
	char missing[512];            /* JSON array body of required features missing */
	char opt_missing[512];        /* JSON array body of optional features missing */
	/* supervisor <-> child */
	int sup_sfd;                  /* the supervisor's signalfd, closed in the child */
	int status_wr;                /* child -> supervisor: 'O' + applied JSON, or 'E' + error JSON */
	int sync_rd;                  /* supervisor -> child: '1' ids mapped, '2' cgroup joined */
};

/* sb_options.c: parse argv into sb->opt. -1 to go on; else the exit status (0 after --help). */
int glsb_sb_parse_options(struct sb *sb, int argc, char **argv);

/* sb_report.c */
void glsb_sb_add_missing(struct sb *sb, const char *name, int required);
/* Supervisor: write {"ok":false,...} to the report fd (or the message to stderr), close it. */
void glsb_sb_report_failure(struct sb *sb, const char *msg);
/* Child: send the 'E' message to the supervisor and exit EXIT_SETUP. */
__attribute__((noreturn, format(printf, 2, 3))) void glsb_sb_child_fail(struct sb *sb,
									 const char *fmt, ...);
/* Child: send the 'O' message (what was applied) to the supervisor. */
void glsb_sb_report_applied(struct sb *sb, const struct sb_applied *a);
/* The status pipe (child -> supervisor) carries lines: "O" + the applied JSON body, or "E" +
 * the error JSON body (set-up), then from init "X" + PROGRAM's raw wait status.
 * Supervisor: read what is there into msg: 0 while more may come, 1 at EOF. */
int glsb_sb_read_status(int fd, struct glsb_jbuf *msg);
/* Supervisor: take the next complete line out of msg (1), or 0 if there is none yet. */
int glsb_sb_take_status(struct glsb_jbuf *msg, char *line, size_t cap);
/* Supervisor: turn an 'O'/'E' line into the report line (the child cannot know its host pid).
 * After 'E' the report fd is closed; after 'O' it stays open for the exit line. */
void glsb_sb_forward_status(struct sb *sb, const char *msg, pid_t pid);
/* Supervisor: the exit line (status as from waitpid, and the OOM kills seen), then close the
 * report fd. */
void glsb_sb_report_exit(struct sb *sb, int status);

/* sb_mounts.c */
int glsb_sb_plan_mounts(struct sb *sb, char *err, size_t errcap);   /* supervisor */
void glsb_sb_plan_close(struct sb *sb);
/* Open what the plan binds and copies: as root, the supervisor does it before clone (binds as
 * detached mounts, sb->detached_sources); unprivileged, the child, before its ids change. */
int glsb_sb_open_mount_sources(struct sb *sb, char *err, size_t errcap);
void glsb_sb_build_root(struct sb *sb);                             /* child, userns root */

/* sb_ids.c */
/* Supervisor, root without --id-base: claim a free id range (sets opt.id_base). 0 or -1. */
int glsb_sb_claim_id_slot(struct sb *sb, char *err, size_t errcap);
int glsb_sb_prepare_workspace(struct sb *sb, char *err, size_t errcap); /* supervisor */
void glsb_sb_give_stdio(struct sb *sb);                                 /* supervisor, root */
int glsb_sb_write_id_maps(struct sb *sb, pid_t pid, char *err, size_t errcap);
void glsb_sb_become_userns_root(struct sb *sb);                         /* child */
void glsb_sb_drop_privileges(struct sb *sb);                            /* child */

/* sb_net.c (child) */
void glsb_sb_setup_uts_net(struct sb *sb);

/* sb_usernet.c: --network. Supervisor: prepare (before clone: find the programs, resolve the
 * names, build the rules and hosts lines), start (after the id maps: slirp4netns on the child's
 * namespaces, waited for until tap0 is up), forward (a control-channel `forward`: one host port
 * on 127.0.0.1 to a port of the sandbox; the same port twice gives the same host port), stop
 * (kill and reap slirp4netns, free what prepare made). Child: apply (the rules, before PROGRAM).
 * Each returns 0 or -1 with err set; forward also 1 when the sandbox has no network. */
int glsb_sb_net_prepare(struct sb *sb, char *err, size_t errcap);
int glsb_sb_net_start(struct sb *sb, pid_t pid, char *err, size_t errcap);
void glsb_sb_net_apply(struct sb *sb);
int glsb_sb_net_forward(struct sb *sb, unsigned guest_port, unsigned *host_port, char *err, size_t errcap);
void glsb_sb_net_stop(struct sb *sb);
/* The first half of stop, for the supervisor's clean-up: SIGKILL now (its tun device takes the kernel
 * some 15 ms to take down), reaped by stop after the cgroup and the workspace are removed. */
void glsb_sb_net_kill(struct sb *sb);

/* sb_rlimits.c (child): returns the RLIMIT_FSIZE in MB that was set. */
long glsb_sb_apply_rlimits(struct sb *sb);

/* sb_init.c (child): become PID 1's loop: run prog, reap, forward signals, exit with its status. */
__attribute__((noreturn)) void glsb_sb_run_init(struct sb *sb, const char *prog, char **envp);

/* sb_env.c: PROGRAM's environment: exactly --env plus HOME, PATH and LANG unless given. */
char **glsb_sb_program_env(const struct sb *sb);

/* sb_control.c: the control channel (CONTROL.md), served by the supervisor once the sandbox
 * reported. pollfds fills at most 5 entries and their indexes (-1: not polled). */
int glsb_sb_control_open(struct sb *sb, char *err, size_t errcap);
#define SB_CONTROL_FDS 7 /* at most this many pollfds (and idx slots) from glsb_sb_control_pollfds */
int glsb_sb_control_pollfds(struct sb *sb, struct pollfd *p, int *idx);
void glsb_sb_control_events(struct sb *sb, const struct pollfd *p, const int *idx);
int glsb_sb_control_timeout_ms(void);
void glsb_sb_control_reap(struct sb *sb); /* on SIGCHLD */
void glsb_sb_control_finish(struct sb *sb); /* the sandbox ended: end the call, flush, close */

/* sb_call.c: a call's confined child (CONTROL.md). */
#define SB_NS_FDS 6
extern const char *const glsb_sb_ns_fd_names[SB_NS_FDS];
/* Supervisor, right after clone (the child is still reachable): open its namespaces. */
int glsb_sb_call_open_namespaces(struct sb *sb, pid_t pid, char *err, size_t errcap);
void glsb_sb_call_close_namespaces(struct sb *sb);
int glsb_sb_call_allowed(const char *command);
pid_t glsb_sb_call_start(struct sb *sb, int argc, char **argv, int fds[3], char *err, size_t errcap);

/* sb_supervisor.c */
pid_t glsb_sb_start_child(struct sb *sb, int pipes[2][2], void (*child_main)(struct sb *),
			  char *err, size_t errcap);
/* Wait for the report, signals and the end of the sandbox; returns the exit status. */
int glsb_sb_supervise(struct sb *sb, pid_t pid, int status_fd);
void glsb_sb_cleanup(struct sb *sb);

#endif
