/* sb_options.c: `glsb-confine sandbox`'s usage text and option parsing. */
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sb.h"

static const char usage_text[] =
	"usage: glsb-confine sandbox [options] -- PROGRAM [ARGS...]\n"
	"\n"
	"Run PROGRAM (looked up in the sandbox PATH unless it contains '/') as uid 1000 \"user\" in\n"
	"fresh user, mount, pid, net, ipc, uts, cgroup and time namespaces, on a private root:\n"
	"read-only binds of /usr, /lib*, /bin, /sbin (symlinks kept as on the host), selected /etc\n"
	"files (loader cache, certificates, alternatives, timezone, nsswitch, python3, ...),\n"
	"generated /etc/passwd, group, hostname, hosts (and resolv.conf with --network); a fresh /proc;\n"
	"/dev with null, zero, full, random, urandom (no tty; /dev/shm -> /tmp); writable /tmp,\n"
	"/home/user and /files (see --storage). The\n"
	"root itself is read-only. Capabilities are dropped, no_new_privs set, Landlock (best ABI)\n"
	"allows read+exec on the system, read+write on /home/user, /files, /tmp and --bind targets\n"
	"and (ABI 6+) scopes signals and abstract unix sockets to the sandbox; a seccomp filter\n"
	"denies mount, namespaces, ptrace, kernel modules, bpf, perf, keyrings, clock setting,\n"
	"io_uring, TIOCSTI, ... with EPERM (clone3: ENOSYS), kills other ABIs (x32, i386), and\n"
	"allows only unix, inet, inet6 and netlink-route sockets (any other: EAFNOSUPPORT).\n"
	"A PID 1 inside reaps orphans and forwards signals; a supervisor outside waits, forwards\n"
	"SIGTERM/SIGINT/SIGQUIT (a second one kills), removes the cgroup (and the workspace with\n"
	"--cleanup), and exits with PROGRAM's status (code, or 128+signal). SIGHUP to the\n"
	"supervisor kills the sandbox at once and still cleans up. If the process that started\n"
	"glsb-confine dies, the supervisor gets that SIGHUP (PR_SET_PDEATHSIG), so the whole\n"
	"sandbox is killed and removed.\n"
	"stdin, stdout and stderr are PROGRAM's; no other descriptor is passed in. Run as root,\n"
	"pipes and sockets among them are chowned to the sandbox user so that /dev/stdout and\n"
	"/dev/stderr can be reopened inside.\n"
	"\n"
	"options:\n"
	"  --workspace DIR      host dir (required; created 0700 if missing). With --storage\n"
	"                       workspace, DIR/home is /home/user (HOME and initial cwd) and\n"
	"                       DIR/files is /files, both read-write.\n"
	"  --storage private|workspace   default private with --cleanup, else workspace.\n"
	"                       private: /tmp, /home/user and /files are one tmpfs of --disk-mb\n"
	"                       and --max-inodes in the sandbox's own mount namespace: nothing\n"
	"                       reaches the host, a full disk is ENOSPC, the content is gone with\n"
	"                       the sandbox. It is memory: its pages count in the memory cgroup.\n"
	"                       workspace: binds of DIR/home and DIR/files (host disk, NOT bounded\n"
	"                       by --disk-mb, neither in bytes nor in files), /tmp a tmpfs.\n"
	"  --ro-bind SRC DST    extra read-only bind (repeatable); a regular file of at most\n"
	"                       1 MiB is copied instead\n"
	"  --bind SRC DST       extra read-write bind (repeatable); SRC must be writable by the\n"
	"                       sandbox user's host uid (\"host_uid\" in the report)\n"
	"  --env K=V            PROGRAM's environment is exactly these (repeatable) plus\n"
	"                       HOME=/home/user PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8\n"
	"                       unless given\n"
	"  --network            the outside, from a net namespace of its own (default: the same\n"
	"                       namespace with a loopback only): user-mode networking by\n"
	"                       slirp4netns (tap0 10.0.2.100/24, gateway 10.0.2.2, DNS 10.0.2.3),\n"
	"                       with nftables rules set by the sandbox's init before PROGRAM:\n"
	"                       never the host (its loopback: slirp4netns --disable-host-loopback;\n"
	"                       its addresses), 169.254.0.0/16 or IPv6, unless --net-allow says so.\n"
	"                       slirp4netns and nft are looked up in PATH, then /usr/sbin, /sbin.\n"
	"  --net-allow A        with --network: reachable (repeatable, at most 256): an IPv4\n"
	"                       address or CIDR, or a name, resolved now, whose addresses are\n"
	"                       allowed and pinned in the sandbox's /etc/hosts. Wins over\n"
	"                       --net-deny and over what is never reached.\n"
	"  --net-deny CIDR      with --network: not reachable (repeatable, at most 256): an IPv4\n"
	"                       address or CIDR (0.0.0.0/0: only --net-allow is reachable; the\n"
	"                       DNS server too, so only the pinned names resolve)\n"
	"  --memory-mb N        default 1024: cgroup memory limit (socket buffers included: v2\n"
	"                       charges them to memory.max, v1 gets the same limit in\n"
	"                       memory.kmem.tcp.limit_in_bytes) and RLIMIT_DATA\n"
	"  --cpus F             default 1: cgroup CPU quota in CPUs (v2 cpu.max, v1\n"
	"                       cpu.cfs_quota_us per 100 ms cpu.cfs_period_us); 0: none\n"
	"  --cpu-seconds N      default 3600: RLIMIT_CPU, per process\n"
	"  --max-processes N    default 256: cgroup pids limit and RLIMIT_NPROC\n"
	"  --max-file-mb N      default 512: RLIMIT_FSIZE (capped at --disk-mb)\n"
	"  --disk-mb N          default 1024: size of the storage (private), or of /tmp (workspace);\n"
	"                       /dev/shm points to /tmp; also a cap on RLIMIT_FSIZE\n"
	"  --max-inodes N       default 64 per MB of --disk-mb, at least 4096: files and\n"
	"                       directories the private storage can hold\n"
	"  --max-open-files N   default 1024: RLIMIT_NOFILE\n"
	"  --id-base N          ids when run as root, see below (default: a free slot)\n"
	"  --id-slots N         default 4096: how many slots of 65536 ids root may hand out\n"
	"  --allow-degraded     start even if a required feature is missing (it is listed in\n"
	"                       \"missing\"); user, mount and pid namespaces are always required\n"
	"  --report-fd N        write JSON lines to fd N (REPORT.md). Just before PROGRAM\n"
	"                       starts: {\"ok\":true,\"pid\":HOST_PID_OF_SANDBOX_INIT,\"applied\":{\n"
	"                       userns,mountns,pidns,netns,ipcns,utsns,cgroupns,timens: bool,\n"
	"                       no_new_privs, seccomp: bool, landlock_abi: N, cgroup: \"v2\"|\"v1\"|\n"
	"                       false, cgroup_dirs | cgroup_reason, rlimits, tmp_mb, storage,\n"
	"                       network, cgroup_cpus: F|false, cgroup_sockets: bool, uid,\n"
	"                       host_uid, host_gid, id_slot},\"missing\":[...],\n"
	"                       \"optional_missing\":[...]}; when it\n"
	"                       ends: {\"exit\":{\"code\":N|null,\"signal\":N|null,\"oom_kills\":N|null,\n"
	"                       \"oom_killed\":BOOL}} (PROGRAM's own status; oom_killed: SIGKILLed\n"
	"                       while the OOM killer worked in its cgroup), then fd N is closed.\n"
	"                       On failure {\"ok\":false,\"error\":MSG,\"missing\":[...]}, exit 125.\n"
	"                       Without --report-fd, errors go to stderr.\n"
	"  --cleanup            remove DIR (recursively, not following symlinks) at the end\n"
	"  --config-fd N        read more options from fd N: a decimal byte count and a newline,\n"
	"                       then that many bytes of NUL-terminated words, as argv would hold\n"
	"                       them (PROGRAM and its arguments after --). Exactly that much is\n"
	"                       read: with N = 0, PROGRAM's stdin follows. Nothing of the config\n"
	"                       then shows in the supervisor's /proc/PID/cmdline.\n"
	"  --control-fd N|R,W   serve the control channel (CONTROL.md) on a socket N, or requests\n"
	"                       on R and replies on W: calls of `glsb-confine write|run|read|pack` run\n"
	"                       in confined children the code in the sandbox cannot reach. N may\n"
	"                       be the --report-fd socket.\n"
	"\n"
	"Ids: run as root, sandbox uid/gid 0 and 1000 are host ids N and N+1000, like a subordinate\n"
	"id range: N = 1879048192 + k * 65536 for a slot k of its own (0 <= k < --id-slots, held by\n"
	"an flock on /run/glsb-confine/ids/slot-k while the supervisor runs, free again when it\n"
	"exits, also by a crash), or N = --id-base for all. Its user namespace is owned by N+1000,\n"
	"so per-user kernel limits (inotify instances, RLIMIT_NPROC, ...) are per sandbox.\n"
	"DIR/home and DIR/files are chowned to N+1000. Host root never owns what the sandbox\n"
	"writes (no setuid-root file can be planted on the host disk), the sandbox has no owner\n"
	"rights on root's files, and RLIMIT_NPROC applies (root is exempt). Files the caller puts\n"
	"in DIR/files are read-only inside unless chowned to N+1000.\n"
	"Run unprivileged, uid/gid 1000 is the caller's own uid/gid (the only id it may map): all\n"
	"sandboxes of one user share that user's kernel limits; run as root for one id each.\n"
	"\n"
	"Required: user/mount/pid/net/ipc/uts namespaces, Landlock, seccomp,\n"
	"no_new_privs. Optional (listed in optional_missing): cgroup and time namespaces, cgroup\n"
	"limits: v2 memory+pids(+cpu) in a leaf glsb/sb-<pid>-<time> below our cgroup when they can\n"
	"be enabled there (else, as root, below the hierarchy's top), else v1 memory/pids/cpu\n"
	"hierarchies (\"cgroup\"); the CPU quota (\"cgroup_cpu\"); socket buffers charged\n"
	"(\"cgroup_sockets\"). Unix-socket queues are charged to no cgroup by the kernel: they are\n"
	"bounded only by --max-open-files x --max-processes x net.core.wmem_max.\n"
	"GLSB_CONFINE_CGROUP2_ROOT=DIR (for tests): DIR stands for the cgroup2 hierarchy and our\n"
	"own cgroup; knobs there are plain files, each write appended as a line; v1 is not tried.\n"
	"Empty leaves of supervisors that were SIGKILLed are removed by the next sandbox.\n"
	"What /proc shows inside: PID 1's command line is \"glsb-confine\", its environment blank\n"
	"and its memory unreadable (not dumpable). mountinfo shows no workspace path with private\n"
	"storage, and small files given to --ro-bind are copied, not bound; a directory bind\n"
	"still shows its host path (the kernel reports a bind's path within its filesystem).\n"
	"Exit: PROGRAM's status; 125 if the sandbox could not be set up; 2 on usage errors.\n";

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* --config-fd N: options come from fd N as "<decimal length>\n" and then that many bytes of
 * NUL-terminated words, exactly as argv would hold them (PROGRAM and its arguments after "--").
 * Read exactly that much, so fd 0 can carry the config first and PROGRAM's stdin after it.
 * Returns a malloc'd NULL-terminated word array (the words in the same block), or NULL with a
 * message on stderr. */
#define CONFIG_MAX (1 << 20)
static char **read_config(int fd, int *nwords)
{
	char head[24];
	size_t hl = 0;
	unsigned long len = 0;
	for (;;) {
		ssize_t n = read(fd, head + hl, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || hl + 1 >= sizeof head) {
			fprintf(stderr, "glsb-confine sandbox: --config-fd %d: no length line\n", fd);
			return NULL;
		}
		if (head[hl] == '\n')
			break;
		if (head[hl] < '0' || head[hl] > '9') {
			fprintf(stderr, "glsb-confine sandbox: --config-fd %d: the length is not a number\n", fd);
			return NULL;
		}
		len = len * 10 + (unsigned long)(head[hl] - '0');
		if (len > CONFIG_MAX) {
			fprintf(stderr, "glsb-confine sandbox: --config-fd %d: more than 1 MiB\n", fd);
			return NULL;
		}
		hl++;
	}
	/* one block: the word pointers, then the words */
	size_t words_max = len / 2 + 2;
	char **w = malloc(words_max * sizeof *w + len + 1);
	if (!w) {
		fprintf(stderr, "glsb-confine sandbox: --config-fd: out of memory\n");
		return NULL;
	}
	char *text = (char *)(w + words_max);
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, text + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "glsb-confine sandbox: --config-fd %d: ended after %zu of %lu bytes\n", fd,
				got, len);
			free(w);
			return NULL;
		}
		got += (size_t)n;
	}
	if (len && text[len - 1] != '\0') {
		fprintf(stderr, "glsb-confine sandbox: --config-fd %d: the last word is not NUL-terminated\n", fd);
		free(w);
		return NULL;
	}
	int n = 0;
	for (size_t off = 0; off < len; off += strlen(text + off) + 1)
		w[n++] = text + off;
	w[n] = NULL;
	*nwords = n;
	return w;
}

static int parse_words(struct sb *sb, int argc, char **argv, int from_config);

int glsb_sb_parse_options(struct sb *sb, int argc, char **argv)
{
	struct sb_options *o = &sb->opt;

	*o = (struct sb_options){.report_fd = -1, .memory_mb = 1024, .cpu_s = 3600, .nproc = 256,
				 .file_mb = 512, .disk_mb = 1024, .nofile = 1024,
				 .id_base = DEFAULT_ID_BASE, .id_slots = SB_DEFAULT_ID_SLOTS,
				 .cpus = 1.0, .private_storage = -1, .control_in = -1,
				 .control_out = -1};
	return parse_words(sb, argc, argv, 0);
}

static int parse_words(struct sb *sb, int argc, char **argv, int from_config)
{
	struct sb_options *o = &sb->opt;
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int more = argc - i - 1;
		long n;
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (!strcmp(a, "--network")) {
			o->network = 1;
		} else if ((!strcmp(a, "--net-allow") || !strcmp(a, "--net-deny")) && more >= 1) {
			int allow = a[6] == 'a';
			int *count = allow ? &o->nnet_allow : &o->nnet_deny;
			if (*count >= SB_NET_RULES_MAX) {
				fprintf(stderr, "glsb-confine sandbox: more than %d %s\n", SB_NET_RULES_MAX, a);
				return EXIT_USAGE;
			}
			(allow ? o->net_allow : o->net_deny)[(*count)++] = argv[++i];
		} else if (!strcmp(a, "--allow-degraded")) {
			o->degraded = 1;
		} else if (!strcmp(a, "--cleanup")) {
			o->cleanup = 1;
		} else if (!strcmp(a, "--workspace") && more >= 1) {
			o->workspace = argv[++i];
		} else if ((!strcmp(a, "--ro-bind") || !strcmp(a, "--bind")) && more >= 2) {
			const char *dst = argv[i + 2];
			if (o->nbinds >= (int)(sizeof o->binds / sizeof o->binds[0]) ||
			    dst[0] != '/' || !dst[1] || strstr(dst, "/..") || strlen(dst) > 200) {
				fprintf(stderr, "glsb-confine sandbox: bad or too many binds (%s)\n", dst);
				return EXIT_USAGE;
			}
			o->binds[o->nbinds++] = (struct sb_bind){argv[i + 1], dst, a[2] == 'b'};
			i += 2;
		} else if (!strcmp(a, "--cpus") && more >= 1) {
			/* cpu.max / cfs_quota_us take at least 1 ms per 100 ms period */
			char *end;
			double v = strtod(argv[++i], &end);
			if (end == argv[i] || *end || !(v == 0 || (v >= 0.01 && v <= 4096))) {
				fprintf(stderr, "glsb-confine sandbox: bad option --cpus %s (0, or 0.01 to 4096)\n",
					argv[i]);
				return EXIT_USAGE;
			}
			o->cpus = v;
		} else if (!strcmp(a, "--storage") && more >= 1) {
			const char *v = argv[++i];
			if (strcmp(v, "private") && strcmp(v, "workspace")) {
				fprintf(stderr, "glsb-confine sandbox: bad option --storage %s (private or workspace)\n", v);
				return EXIT_USAGE;
			}
			o->private_storage = !strcmp(v, "private");
		} else if (!strcmp(a, "--config-fd") && more >= 1 && !from_config) {
			long fd;
			int nw = 0;
			if (parse_long(argv[++i], 0, INT_MAX, &fd) < 0 || fcntl((int)fd, F_GETFD) < 0) {
				fprintf(stderr, "glsb-confine sandbox: --config-fd %s is not an open descriptor\n", argv[i]);
				return EXIT_USAGE;
			}
			char **w = read_config((int)fd, &nw);
			if (!w)
				return EXIT_USAGE;
			/* the config's words, then whatever followed on the command line */
			char **all = malloc(((size_t)nw + (size_t)(argc - i) + 1) * sizeof *all);
			if (!all) {
				free(w);
				return EXIT_USAGE;
			}
			int k = 0;
			all[k++] = argv[0];
			for (int j = 0; j < nw; j++)
				all[k++] = w[j];
			for (int j = i + 1; j < argc; j++)
				all[k++] = argv[j];
			all[k] = NULL;
			sb->config_words = w;
			sb->config_argv = all;
			return parse_words(sb, k, all, 1);
		} else if (!strcmp(a, "--control-fd") && more >= 1) {
			long r, w = -1;
			char *comma = strchr(argv[++i], ',');
			if (comma)
				*comma = '\0';
			int bad = parse_long(argv[i], 0, INT_MAX, &r) < 0 ||
				  (comma && parse_long(comma + 1, 0, INT_MAX, &w) < 0);
			if (comma)
				*comma = ',';
			if (!comma)
				w = r;
			if (bad || fcntl((int)r, F_GETFD) < 0 || fcntl((int)w, F_GETFD) < 0) {
				fprintf(stderr, "glsb-confine sandbox: bad --control-fd %s (N or R,W, open)\n", argv[i]);
				return EXIT_USAGE;
			}
			o->control_in = (int)r;
			o->control_out = (int)w;
			fcntl(o->control_in, F_SETFD, FD_CLOEXEC);
			fcntl(o->control_out, F_SETFD, FD_CLOEXEC);
		} else if (!strcmp(a, "--env") && more >= 1) {
			if (!strchr(argv[i + 1], '=') || o->nenv >= 256) {
				fprintf(stderr, "glsb-confine sandbox: bad --env %s\n", argv[i + 1]);
				return EXIT_USAGE;
			}
			o->env[o->nenv++] = argv[++i];
		} else if (more >= 1 && a[0] == '-' && a[1] == '-') {
			/* Bounds keep every product (MB to bytes) far from overflow. */
			const struct {
				const char *name;
				long *val;
				long min, max;
			} nums[] = {
				{"--memory-mb", &o->memory_mb, 1, 1L << 24},
				{"--cpu-seconds", &o->cpu_s, 1, 1L << 30},
				{"--max-processes", &o->nproc, 1, 1L << 22},
				{"--max-file-mb", &o->file_mb, 1, 1L << 24},
				{"--disk-mb", &o->disk_mb, 1, 1L << 24},
				{"--max-open-files", &o->nofile, 16, 1L << 20},
				{"--max-inodes", &o->max_inodes, 64, 1L << 30},
				{"--id-base", &o->id_base, 1, 4294967294L - SANDBOX_UID},
				{"--id-slots", &o->id_slots, 1, SB_DEFAULT_ID_SLOTS},
				{"--report-fd", &n, 0, INT_MAX},
			};
			size_t k;
			for (k = 0; k < sizeof nums / sizeof nums[0]; k++)
				if (!strcmp(a, nums[k].name))
					break;
			if (k == sizeof nums / sizeof nums[0] ||
			    parse_long(argv[i + 1], nums[k].min, nums[k].max, nums[k].val) < 0) {
				fprintf(stderr, "glsb-confine sandbox: bad option %s %s\n", a, argv[i + 1]);
				return EXIT_USAGE;
			}
			if (nums[k].val == &o->id_base)
				o->id_base_given = 1;
			if (nums[k].val == &n) {
				if (fcntl((int)n, F_GETFD) < 0) {
					fprintf(stderr, "glsb-confine sandbox: --report-fd %ld is not open\n", n);
					return EXIT_USAGE;
				}
				o->report_fd = (int)n;
				fcntl(o->report_fd, F_SETFD, FD_CLOEXEC);
			}
			i++;
		} else if (a[0] == '-') {
			fprintf(stderr, "glsb-confine sandbox: unknown option %s (see --help)\n", a);
			return EXIT_USAGE;
		} else {
			break;
		}
	}
	if (i >= argc || !o->workspace) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	o->argv = argv + i;
	/* An ephemeral sandbox keeps nothing: private storage; a kept workspace is on the host. */
	if (o->private_storage < 0)
		o->private_storage = o->cleanup;
	if (!o->max_inodes)
		o->max_inodes = o->disk_mb * 64 > 4096 ? o->disk_mb * 64 : 4096;
	return -1;
}
