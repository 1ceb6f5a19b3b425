/* sandbox.c: `glsb-confine sandbox`: run PROGRAM in fresh namespaces on a private read-only
 * root, with Landlock, seccomp, no capabilities, rlimits and cgroup limits, under a small
 * supervisor that outlives it, reports what was applied and cleans up. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include "confine.h"
#include "sbkit.h"

#define SANDBOX_UID 1000
#define SANDBOX_HOME "/home/user"
/* Host ids of the sandbox when started by root: inside uid/gid N is host ID_BASE + N (N = 0
 * and 1000 only), like a subordinate id range. 0x70000000 is above the ranges useradd and
 * systemd-nspawn hand out. */
#define DEFAULT_ID_BASE 1879048192L
#define NEWROOT "/tmp" /* where the new root tmpfs is built, in the new mount namespace only */
#define EXIT_SETUP 125

static const char usage_text[] =
	"usage: glsb-confine sandbox [options] -- PROGRAM [ARGS...]\n"
	"\n"
	"Run PROGRAM (looked up in the sandbox PATH unless it contains '/') as uid 1000 \"user\" in\n"
	"fresh user, mount, pid, net, ipc, uts, cgroup and time namespaces, on a private root:\n"
	"read-only binds of /usr, /lib*, /bin, /sbin (symlinks kept as on the host), selected /etc\n"
	"files (loader cache, certificates, alternatives, timezone, nsswitch, python3, ...; with\n"
	"--network also resolv.conf), generated /etc/passwd, group, hostname, hosts; a fresh /proc;\n"
	"/dev with null, zero, full, random, urandom (no tty; /dev/shm -> /tmp); tmpfs /tmp. The\n"
	"root itself is read-only. Capabilities are dropped, no_new_privs set, Landlock (best ABI)\n"
	"allows read+exec on the system, read+write on /home/user, /files, /tmp and --bind targets\n"
	"and (ABI 6+) scopes signals and abstract unix sockets to the sandbox; a seccomp filter\n"
	"denies mount, namespaces, ptrace, kernel modules, bpf, perf, keyrings, clock setting,\n"
	"io_uring, TIOCSTI, ... with EPERM (clone3: ENOSYS), and kills other ABIs (x32, i386).\n"
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
	"  --workspace DIR      host dir (required; created 0700 if missing). DIR/home is /home/user\n"
	"                       (HOME and initial cwd), DIR/files is /files, both read-write.\n"
	"  --ro-bind SRC DST    extra read-only bind (repeatable)\n"
	"  --bind SRC DST       extra read-write bind (repeatable); SRC must be writable by the\n"
	"                       sandbox user's host uid (\"host_uid\" in the report)\n"
	"  --env K=V            PROGRAM's environment is exactly these (repeatable) plus\n"
	"                       HOME=/home/user PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8\n"
	"                       unless given\n"
	"  --network            share the host network (default: own net namespace, loopback only)\n"
	"  --memory-mb N        default 1024: cgroup memory limit and RLIMIT_DATA\n"
	"  --cpu-seconds N      default 3600: RLIMIT_CPU, per process\n"
	"  --max-processes N    default 256: cgroup pids limit and RLIMIT_NPROC\n"
	"  --max-file-mb N      default 512: RLIMIT_FSIZE (capped at --disk-mb)\n"
	"  --disk-mb N          default 1024: size of the tmpfs /tmp (/dev/shm points there), and a\n"
	"                       cap on RLIMIT_FSIZE. It does NOT bound the total written to\n"
	"                       /home/user and /files (host disk) nor the number of files there.\n"
	"  --max-open-files N   default 1024: RLIMIT_NOFILE\n"
	"  --id-base N          ids when run as root, see below (default 1879048192)\n"
	"  --allow-degraded     start even if a required feature is missing (it is listed in\n"
	"                       \"missing\"); user, mount and pid namespaces are always required\n"
	"  --report-fd N        write one JSON line to fd N, then close it. Just before PROGRAM\n"
	"                       starts: {\"ok\":true,\"pid\":HOST_PID_OF_SANDBOX_INIT,\"applied\":{\n"
	"                       userns,mountns,pidns,netns,ipcns,utsns,cgroupns,timens: bool,\n"
	"                       no_new_privs, seccomp: bool, landlock_abi: N, cgroup: \"v2\"|\"v1\"|\n"
	"                       false, cgroup_dirs | cgroup_reason, rlimits, tmp_mb, network,\n"
	"                       uid, host_uid, host_gid},\"missing\":[...],\"optional_missing\":[...]}\n"
	"                       On failure {\"ok\":false,\"error\":MSG,\"missing\":[...]}, exit 125.\n"
	"                       Without --report-fd, errors go to stderr.\n"
	"  --cleanup            remove DIR (recursively, not following symlinks) at the end\n"
	"\n"
	"Ids: run as root, sandbox uid/gid 0 and 1000 are host ids N and N+1000 (--id-base), like\n"
	"a subordinate id range, and DIR/home and DIR/files are chowned to N+1000. Host root never\n"
	"owns what the sandbox writes (no setuid-root file can be planted on the host disk), the\n"
	"sandbox has no owner rights on root's files, and RLIMIT_NPROC applies (root is exempt).\n"
	"Files the caller puts in DIR/files are read-only inside unless chowned to N+1000.\n"
	"Run unprivileged, uid/gid 1000 is the caller's own uid/gid (the only id it may map).\n"
	"\n"
	"Required: user/mount/pid/net(unless --network)/ipc/uts namespaces, Landlock, seccomp,\n"
	"no_new_privs. Optional (listed in optional_missing): cgroup and time namespaces, cgroup\n"
	"limits: v2 memory+pids in a leaf glsb/sb-<pid>-<time> below our cgroup when they can be\n"
	"enabled there (else, as root, below the hierarchy's top), else v1 memory/pids hierarchies.\n"
	"Empty leaves of supervisors that were SIGKILLed are removed by the next sandbox.\n"
	"Exit: PROGRAM's status; 125 if the sandbox could not be set up; 2 on usage errors.\n";

/* M_COPY: a small regular file copied into the root tmpfs (cheaper than a bind mount). */
enum mkind { M_BIND_RO, M_BIND_RW, M_SYMLINK, M_DEV, M_COPY };
#define COPY_MAX (1 << 20)
struct mnt {
	enum mkind kind;
	int fd;    /* source (O_PATH; O_RDONLY to copy), opened by the child in its mount ns */
	int isdir, follow;
	char src[512];
	char dst[256];
	char target[256]; /* symlink target */
};

struct bindarg {
	const char *src, *dst;
	int rw;
};

static struct {
	const char *workspace;
	struct bindarg binds[64];
	int nbinds;
	const char *env[256];
	int nenv;
	int network, degraded, cleanup, report_fd;
	long memory_mb, cpu_s, nproc, file_mb, disk_mb, nofile, id_base;
	char **argv;
} opt = {.report_fd = -1, .memory_mb = 1024, .cpu_s = 3600, .nproc = 256, .file_mb = 512,
	 .disk_mb = 1024, .nofile = 1024, .id_base = DEFAULT_ID_BASE};

/* State built by the supervisor before clone; the child sees a copy. */
static struct mnt plan[128];
static int nplan;
static char ws_real[PATH_MAX];
static int root_mode;         /* started as root: shifted id map */
static long host_uid, host_gid; /* what the sandbox user is on the host */
static int clone_flags;
static struct glsb_sb_cgroup cgroup;
static char missing[512];     /* JSON array body of required features missing */
static char opt_missing[512]; /* JSON array body of optional features missing */

/* --- small helpers -------------------------------------------------------------------- */

static void list_add(char *list, size_t cap, const char *name)
{
	size_t len = strlen(list);
	snprintf(list + len, cap - len, "%s\"%s\"", len ? "," : "", name);
}

static void add_missing(const char *name, int required)
{
	if (required)
		list_add(missing, sizeof missing, name);
	else
		list_add(opt_missing, sizeof opt_missing, name);
}

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

/* Write {"ok":false,...} to the report fd (or the message to stderr) and close it. */
static void report_failure(const char *msg)
{
	if (opt.report_fd < 0) {
		fprintf(stderr, "glsb-confine sandbox: %s\n", msg);
		return;
	}
	struct glsb_sb_buf b = {.len = 0};
	glsb_sb_buf_printf(&b, "{\"ok\":false,\"error\":");
	glsb_sb_buf_json_str(&b, msg);
	glsb_sb_buf_printf(&b, ",\"missing\":[%s]}\n", missing);
	glsb_sb_write_all(opt.report_fd, b.data, b.len);
	close(opt.report_fd);
	opt.report_fd = -1;
}

/* --- the mount plan (supervisor) -------------------------------------------------------- */

static int plan_add(enum mkind kind, const char *src, const char *dst, int follow, char *err,
		    size_t errcap)
{
	struct mnt *m;
	struct stat st;

	if (nplan >= (int)(sizeof plan / sizeof plan[0])) {
		glsb_sb_fmt(err, errcap, "too many mounts");
		return -1;
	}
	m = &plan[nplan];
	memset(m, 0, sizeof *m);
	m->kind = kind;
	m->fd = -1;
	snprintf(m->dst, sizeof m->dst, "%s", dst);
	if (kind == M_SYMLINK) {
		snprintf(m->target, sizeof m->target, "%s", src);
		nplan++;
		return 0;
	}
	if (strlen(src) >= sizeof m->src || (follow ? stat(src, &st) : lstat(src, &st)) < 0) {
		glsb_sb_fmt(err, errcap, "cannot use %s: %s", src,
			    strlen(src) >= sizeof m->src ? "path too long" : strerror(errno));
		return -1;
	}
	snprintf(m->src, sizeof m->src, "%s", src);
	m->isdir = S_ISDIR(st.st_mode);
	m->follow = follow;
	nplan++;
	return 0;
}

/* Add /NAME as on the host: a symlink is recreated, a directory or file bound read-only.
 * Absent entries are skipped. */
static int plan_host_entry(const char *path, int follow, char *err, size_t errcap)
{
	struct stat st;
	char target[256];

	if ((follow ? stat(path, &st) : lstat(path, &st)) < 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(path, target, sizeof target - 1);
		if (n < 0)
			return 0;
		target[n] = '\0';
		return plan_add(M_SYMLINK, target, path, 0, err, errcap);
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return 0;
	if (S_ISREG(st.st_mode) && st.st_size <= COPY_MAX)
		return plan_add(M_COPY, path, path, follow, err, errcap);
	return plan_add(M_BIND_RO, path, path, follow, err, errcap);
}

static int build_plan(char *err, size_t errcap)
{
	static const char *const top[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
					  "/libx32"};
	/* What the dynamic loader, bash, python3, node and TLS clients read from /etc. Never
	 * /etc/ssl whole (/etc/ssl/private holds keys), nor files that may carry the host's
	 * credentials (pip.conf index URLs, environment proxies). Small files are copied. */
	static const char *const etc[] = {
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl/certs",
		"/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf", "/etc/alternatives",
		"/etc/localtime", "/etc/timezone", "/etc/nsswitch.conf", "/etc/host.conf",
		"/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/networks",
		"/etc/mime.types", "/etc/magic", "/etc/magic.mime", "/etc/bash.bashrc", "/etc/profile",
		"/etc/inputrc", "/etc/terminfo", "/etc/os-release", "/etc/debian_version",
		"/etc/lsb-release", "/etc/python3", "/etc/python3.11", "/etc/python3.12",
		"/etc/ld-musl-x86_64.path", "/etc/locale.alias", "/etc/mailcap", "/etc/papersize",
	};
	static const char *const dev[] = {"null", "zero", "full", "random", "urandom"};
	char src[PATH_MAX + 16], dst[300];

	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		if (plan_host_entry(top[i], 0, err, errcap) < 0)
			return -1;
	for (size_t i = 0; i < sizeof etc / sizeof etc[0]; i++)
		if (plan_host_entry(etc[i], 0, err, errcap) < 0)
			return -1;
	/* resolv.conf is often a symlink into /run: bind what it points to. */
	if (opt.network && plan_host_entry("/etc/resolv.conf", 1, err, errcap) < 0)
		return -1;
	for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
		snprintf(src, sizeof src, "/dev/%s", dev[i]);
		if (plan_add(M_DEV, src, src, 1, err, errcap) < 0)
			return -1;
	}
	snprintf(src, sizeof src, "%s/home", ws_real);
	if (plan_add(M_BIND_RW, src, SANDBOX_HOME, 0, err, errcap) < 0)
		return -1;
	snprintf(src, sizeof src, "%s/files", ws_real);
	if (plan_add(M_BIND_RW, src, "/files", 0, err, errcap) < 0)
		return -1;
	for (int i = 0; i < opt.nbinds; i++) {
		char real[PATH_MAX];
		if (!realpath(opt.binds[i].src, real)) {
			glsb_sb_fmt(err, errcap, "bind source %s: %s", opt.binds[i].src, strerror(errno));
			return -1;
		}
		snprintf(dst, sizeof dst, "%s", opt.binds[i].dst);
		if (plan_add(opt.binds[i].rw ? M_BIND_RW : M_BIND_RO, real, dst, 0, err, errcap) < 0)
			return -1;
	}
	return 0;
}

static void plan_close(void)
{
	for (int i = 0; i < nplan; i++)
		if (plan[i].fd >= 0)
			close(plan[i].fd);
	nplan = 0;
}

/* --- the workspace (supervisor) --------------------------------------------------------- */

static int prepare_workspace(char *err, size_t errcap)
{
	static const char *const sub[] = {"home", "files"};
	char p[PATH_MAX + 16];

	if (glsb_sb_mkdirs(opt.workspace, 0700) < 0 || !realpath(opt.workspace, ws_real)) {
		glsb_sb_fmt(err, errcap, "workspace %s: %s", opt.workspace, strerror(errno));
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", ws_real, sub[i]);
		if ((mkdir(p, 0700) < 0 && errno != EEXIST) || lstat(p, &st) < 0 ||
		    (!S_ISDIR(st.st_mode) && (errno = ENOTDIR))) {
			glsb_sb_fmt(err, errcap, "workspace %s: %s", p, strerror(errno));
			return -1;
		}
		if (root_mode && lchown(p, (uid_t)(opt.id_base + SANDBOX_UID),
					(gid_t)(opt.id_base + SANDBOX_UID)) < 0) {
			glsb_sb_fmt(err, errcap, "workspace %s: chown: %s", p, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Scripts reopen their output through /dev/stdout (/proc/self/fd/1), which checks the
 * owner of the pipe: hand anonymous pipes and sockets on 0-2 to the sandbox user (with the
 * shifted ids they are root's otherwise). Files and terminals are left alone. */
static void give_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		struct statfs sf;
		struct stat st;
		if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0 || st.st_uid != geteuid())
			continue;
		if ((S_ISFIFO(st.st_mode) && sf.f_type == 0x50495045 /* PIPEFS_MAGIC */) ||
		    (S_ISSOCK(st.st_mode) && sf.f_type == 0x534F434B /* SOCKFS_MAGIC */))
			if (fchown(fd, (uid_t)host_uid, (gid_t)host_gid) < 0)
				continue; /* only /dev/stdout-style reopening is lost */
	}
}

/* --- inside: the child of clone, pid 1 of the new pid namespace ---------------------------- */

static int sup_sfd = -1;   /* the supervisor's signalfd, closed in the child */
static int status_wr = -1; /* child -> supervisor: 'O' + applied JSON, or 'E' + error JSON */
static int sync_rd = -1;   /* supervisor -> child: '1' ids mapped, '2' cgroup joined */

__attribute__((noreturn, format(printf, 1, 2))) static void child_fail(const char *fmt, ...)
{
	char msg[1024];
	struct glsb_sb_buf b = {.len = 0};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	glsb_sb_buf_printf(&b, "E\"error\":");
	glsb_sb_buf_json_str(&b, msg);
	glsb_sb_buf_printf(&b, ",\"missing\":[%s]", missing);
	glsb_sb_write_all(status_wr, b.data, b.len);
	if (opt.report_fd < 0) {
		char line[1100];
		int n = snprintf(line, sizeof line, "glsb-confine sandbox: %s\n", msg);
		glsb_sb_write_all(2, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
	}
	_exit(EXIT_SETUP);
}

static void mkdirs_or_fail(const char *path)
{
	if (glsb_sb_mkdirs(path, 0755) < 0)
		child_fail("mkdir %s: %s", path, strerror(errno));
}

/* Make a bind read-only (and nosuid/nodev unless a device), recursively when the kernel has
 * mount_setattr. Plain remount keeps the flags the kernel locked on the source. */
static void seal_mount(const char *path, int rdonly, int nodev)
{
	struct glsb_mount_attr a = {
		.attr_set = (rdonly ? MOUNT_ATTR_RDONLY : 0) | MOUNT_ATTR_NOSUID |
			    (nodev ? MOUNT_ATTR_NODEV : 0)};
	if (glsb_sys_mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &a) == 0)
		return;
	if (errno != ENOSYS)
		child_fail("mount_setattr %s: %s", path, strerror(errno));
	struct statvfs sv;
	unsigned long fl = MS_REMOUNT | MS_BIND | MS_NOSUID | (rdonly ? MS_RDONLY : 0) |
			   (nodev ? MS_NODEV : 0);
	if (statvfs(path, &sv) == 0)
		fl |= sv.f_flag & (ST_NODEV | ST_NOEXEC | ST_NOATIME | ST_NODIRATIME | ST_RELATIME);
	if (mount(NULL, path, NULL, fl, NULL) < 0)
		child_fail("remount %s: %s", path, strerror(errno));
}

static void do_bind(const struct mnt *m, const char *dst)
{
	char src[64];

	if (m->isdir) {
		mkdirs_or_fail(dst);
	} else {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s", dst);
		*strrchr(parent, '/') = '\0';
		mkdirs_or_fail(parent);
		int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST && errno != EISDIR)
			child_fail("create %s: %s", dst, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	/* The supervisor opened the source while it could still reach it (a 0700 workspace). */
	snprintf(src, sizeof src, "/proc/self/fd/%d", m->fd);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		child_fail("bind %s on %s: %s", m->src, m->dst, strerror(errno));
	seal_mount(dst, m->kind != M_BIND_RW, m->kind != M_DEV);
}

static void do_copy(const struct mnt *m, const char *dst)
{
	char buf[16384];
	size_t total = 0;
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (out < 0)
		child_fail("create %s: %s", m->dst, strerror(errno));
	for (;;) {
		ssize_t n = read(m->fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			child_fail("read %s: %s", m->src, strerror(errno));
		if (n == 0)
			break;
		total += (size_t)n;
		/* A file that grew past the cap since the plan: refuse rather than fill the root. */
		if (total > COPY_MAX || glsb_sb_write_all(out, buf, (size_t)n) < 0)
			child_fail("copy %s: %s", m->src, total > COPY_MAX ? "too large" : strerror(errno));
	}
	close(out);
}

static void generate_etc(void)
{
	static const struct {
		const char *name, *text;
	} files[] = {
		{"passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\n"
			   "user:x:1000:1000:user:/home/user:/bin/bash\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{"group", "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"},
		{"hostname", "sandbox\n"},
		{"hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	};
	char p[64];

	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(p, sizeof p, NEWROOT "/etc/%s", files[i].name);
		if (glsb_sb_write_file(p, files[i].text, 0644) < 0)
			child_fail("write /etc/%s: %s", files[i].name, strerror(errno));
	}
}

static void build_root(void)
{
	char dst[PATH_MAX], opts[64];

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail("make mounts private: %s", strerror(errno));
	if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") < 0)
		child_fail("mount root tmpfs: %s", strerror(errno));
	mkdirs_or_fail(NEWROOT "/etc");
	mkdirs_or_fail(NEWROOT "/proc");
	mkdirs_or_fail(NEWROOT "/dev");
	mkdirs_or_fail(NEWROOT "/tmp");
	mkdirs_or_fail(NEWROOT "/home/user");
	mkdirs_or_fail(NEWROOT "/files");

	/* /dev: a small tmpfs holding bind-mounted host devices and the usual symlinks. */
	if (mount("tmpfs", NEWROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		child_fail("mount /dev tmpfs: %s", strerror(errno));
	static const char *const links[][2] = {
		{"/proc/self/fd", "fd"},         {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"},   {"/proc/self/fd/2", "stderr"},
		{"/tmp", "shm"}, /* POSIX shm and semaphores land in the size-capped /tmp */
	};
	for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
		snprintf(dst, sizeof dst, NEWROOT "/dev/%s", links[i][1]);
		if (symlink(links[i][0], dst) < 0)
			child_fail("symlink %s: %s", dst, strerror(errno));
	}

	for (int i = 0; i < nplan; i++) {
		const struct mnt *m = &plan[i];
		snprintf(dst, sizeof dst, NEWROOT "%s", m->dst);
		if (m->kind == M_SYMLINK) {
			char parent[PATH_MAX];
			snprintf(parent, sizeof parent, "%s", dst);
			*strrchr(parent, '/') = '\0';
			mkdirs_or_fail(parent);
			if (symlink(m->target, dst) < 0 && errno != EEXIST)
				child_fail("symlink %s: %s", m->dst, strerror(errno));
			continue;
		}
		if (m->kind == M_COPY) {
			char parent[PATH_MAX];
			snprintf(parent, sizeof parent, "%s", dst);
			*strrchr(parent, '/') = '\0';
			mkdirs_or_fail(parent);
			do_copy(m, dst);
			continue;
		}
		do_bind(m, dst);
	}
	plan_close();

	if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		child_fail("mount /proc: %s", strerror(errno));
	snprintf(opts, sizeof opts, "mode=1777,size=%ldm", opt.disk_mb);
	if (mount("tmpfs", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		child_fail("mount /tmp: %s", strerror(errno));
	generate_etc();
	seal_mount(NEWROOT "/dev", 1, 0);

	/* pivot_root(".", ".") stacks the old root on the new one; detaching it leaves only ours. */
	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		child_fail("pivot_root: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		child_fail("remount / read-only: %s", strerror(errno));
}

static void loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		child_fail("socket: %s", strerror(errno));
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(s, SIOCSIFFLAGS, &ifr) < 0))
		child_fail("bring up loopback: %s", strerror(errno));
	close(s);
}

static void set_limit(int res, const char *name, rlim_t soft, rlim_t hard)
{
	struct rlimit rl = {soft, hard};
	if (setrlimit(res, &rl) < 0)
		child_fail("setrlimit %s: %s", name, strerror(errno));
}

static void drop_privileges(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0 ||
	    setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0)
		child_fail("switch to uid %d: %s", SANDBOX_UID, strerror(errno));
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		child_fail("capset: %s", strerror(errno));
}

static void apply_landlock(struct glsb_sb_buf *applied, int abi)
{
	struct glsb_sb_landlock ll;
	/* Abstract unix sockets are per net namespace; with the host's, scope them too. */
	if (glsb_sb_landlock_begin(&ll, abi, 1) < 0)
		child_fail("landlock ruleset (ABI %d): %s", abi, strerror(errno));
	static const struct {
		const char *path;
		uint64_t access;
	} rules[] = {
		{"/", GLSB_LL_READ},
		{"/usr", GLSB_LL_RX},
		{"/dev", GLSB_LL_READ | GLSB_LL_DEV},
		{"/tmp", GLSB_LL_RW},
		{SANDBOX_HOME, GLSB_LL_RW},
		{"/files", GLSB_LL_RW},
	};
	for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
		if (glsb_sb_landlock_allow(&ll, rules[i].path, rules[i].access) < 0)
			child_fail("landlock rule %s: %s", rules[i].path, strerror(errno));
	/* Real directories among /lib*, /bin, /sbin (not merged into /usr) and extra binds. */
	static const char *const top[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
		struct stat st;
		if (lstat(top[i], &st) == 0 && S_ISDIR(st.st_mode) &&
		    glsb_sb_landlock_allow(&ll, top[i], GLSB_LL_RX) < 0)
			child_fail("landlock rule %s: %s", top[i], strerror(errno));
	}
	for (int i = 0; i < opt.nbinds; i++)
		if (glsb_sb_landlock_allow(&ll, opt.binds[i].dst,
					   opt.binds[i].rw ? GLSB_LL_RW : GLSB_LL_RX) < 0)
			child_fail("landlock rule %s: %s", opt.binds[i].dst, strerror(errno));
	if (glsb_sb_landlock_enforce(&ll) < 0)
		child_fail("landlock restrict_self: %s", strerror(errno));
	glsb_sb_buf_printf(applied, ",\"landlock_abi\":%d", abi);
}

/* PATH lookup in the sandbox's environment (execvp would use ours). */
static int find_program(const char *name, const char *path, char *out, size_t cap)
{
	if (strchr(name, '/')) {
		snprintf(out, cap, "%s", name);
		return access(out, X_OK);
	}
	for (const char *p = path; p && *p;) {
		size_t n = strcspn(p, ":");
		snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", name);
		if (access(out, X_OK) == 0)
			return 0;
		p += n + (p[n] == ':');
	}
	errno = ENOENT;
	return -1;
}

static int env_has(const char *key)
{
	size_t kl = strlen(key);
	for (int i = 0; i < opt.nenv; i++)
		if (!strncmp(opt.env[i], key, kl) && opt.env[i][kl] == '=')
			return 1;
	return 0;
}

__attribute__((noreturn)) static void run_init(const char *prog, char **envp)
{
	sigset_t set, none;
	int code = 0;

	/* As PID 1: reap every orphan, forward termination signals to PROGRAM, and exit with its
	 * status; the kernel then kills whatever is left in the namespace. */
	sigemptyset(&none);
	sigemptyset(&set);
	static const int fwd[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
		sigaddset(&set, fwd[i]);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);

	pid_t pid = fork();
	if (pid < 0)
		_exit(EXIT_SETUP);
	if (pid == 0) {
		for (int sig = 1; sig < 65; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (glsb_sys_close_range(3, ~0U, 0) < 0)
			for (int fd = 3; fd < 1024; fd++)
				close(fd);
		execve(prog, opt.argv, envp);
		char msg[512];
		int n = snprintf(msg, sizeof msg, "glsb-confine sandbox: exec %s: %s\n", prog,
				 strerror(errno));
		glsb_sb_write_all(2, msg, (size_t)n);
		_exit(127);
	}
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(pid, sig);
			continue;
		}
		for (;;) {
			int st;
			pid_t w = waitpid(-1, &st, WNOHANG);
			if (w <= 0)
				break;
			if (w == pid) {
				code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				_exit(code);
			}
		}
	}
}

__attribute__((noreturn)) static void child_main(void)
{
	struct glsb_sb_buf applied = {.len = 0};
	sigset_t none;
	char ok;

	/* Dies with the supervisor. Cleared by credential changes, so set again below. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (read(sync_rd, &ok, 1) != 1)
		_exit(EXIT_SETUP);
	/* A session of its own: no controlling terminal, no job control over the caller's. */
	setsid();

	/* Open every bind source now: a bind needs a source in our own mount namespace, and only
	 * before the switch to the sandbox's ids can we cross a 0700 workspace owned by the caller. */
	for (int i = 0; i < nplan; i++) {
		struct mnt *m = &plan[i];
		if (m->kind == M_SYMLINK)
			continue;
		m->fd = open(m->src, (m->kind == M_COPY ? O_RDONLY : O_PATH) | O_CLOEXEC |
				     (m->follow ? 0 : O_NOFOLLOW));
		if (m->fd < 0)
			child_fail("open %s: %s", m->src, strerror(errno));
	}
	if (root_mode && (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0))
		child_fail("become root of the user namespace: %s", strerror(errno));
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	build_root();
	if (sethostname("sandbox", 7) < 0 && (clone_flags & CLONE_NEWUTS))
		child_fail("sethostname: %s", strerror(errno));
	if (clone_flags & CLONE_NEWNET)
		loopback_up();
	/* A time namespace can only be entered by children: PROGRAM will be in it. */
	int timens = unshare(CLONE_NEWTIME) == 0;
	if (!timens)
		add_missing("timens", 0);

	/* The supervisor has put us in the cgroup before anything big is allocated or forked. */
	if (read(sync_rd, &ok, 1) != 1)
		_exit(EXIT_SETUP);
	/* Entered now, the namespace's root is our own leaf: /proc/self/cgroup shows "/". */
	int cgroupns = unshare(CLONE_NEWCGROUP) == 0;
	if (!cgroupns)
		add_missing("cgroupns", 0);

	rlim_t mb = 1024 * 1024;
	long fsize = opt.file_mb < opt.disk_mb ? opt.file_mb : opt.disk_mb;
	set_limit(RLIMIT_CPU, "cpu", (rlim_t)opt.cpu_s, (rlim_t)opt.cpu_s + 5);
	set_limit(RLIMIT_DATA, "data", (rlim_t)opt.memory_mb * mb, (rlim_t)opt.memory_mb * mb);
	set_limit(RLIMIT_FSIZE, "fsize", (rlim_t)fsize * mb, (rlim_t)fsize * mb);
	set_limit(RLIMIT_NOFILE, "nofile", (rlim_t)opt.nofile, (rlim_t)opt.nofile);
	set_limit(RLIMIT_NPROC, "nproc", (rlim_t)opt.nproc, (rlim_t)opt.nproc);
	set_limit(RLIMIT_CORE, "core", 0, 0);

	drop_privileges();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* If the supervisor died before the line above, nothing would kill us: check. */
	struct pollfd p = {sync_rd, POLLIN, 0};
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
		_exit(EXIT_SETUP);
	if (chdir(SANDBOX_HOME) < 0)
		child_fail("chdir %s: %s", SANDBOX_HOME, strerror(errno));

	const struct glsb_sb_ns *ns = glsb_sb_namespaces;
	glsb_sb_buf_printf(&applied, "O\"applied\":{");
	for (int i = 0; i < glsb_sb_namespace_count; i++)
		glsb_sb_buf_printf(&applied, "%s\"%s\":%s", i ? "," : "", ns[i].name,
				   (ns[i].flag == CLONE_NEWTIME     ? timens
				    : ns[i].flag == CLONE_NEWCGROUP ? cgroupns
								    : !!(clone_flags & ns[i].flag))
				   ? "true" : "false");

	int nnp = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
	if (!nnp) {
		add_missing("no_new_privs", 1);
		if (!opt.degraded)
			child_fail("no_new_privs: %s", strerror(errno));
	}
	glsb_sb_buf_printf(&applied, ",\"no_new_privs\":%s,\"capabilities\":[]",
			   nnp ? "true" : "false");

	int abi = glsb_sb_landlock_abi();
	if (abi > 0 && nnp) {
		apply_landlock(&applied, abi);
	} else {
		add_missing("landlock", 1);
		if (!opt.degraded)
			child_fail("Landlock unavailable: %s",
				   abi > 0 ? "needs no_new_privs" : strerror(errno));
		glsb_sb_buf_printf(&applied, ",\"landlock_abi\":0");
	}

	int seccomp = nnp && glsb_sb_seccomp_install() == 0;
	if (!seccomp) {
		add_missing("seccomp", 1);
		if (!opt.degraded)
			child_fail("seccomp filter unavailable: %s",
				   nnp ? strerror(errno) : "needs no_new_privs");
	}
	glsb_sb_buf_printf(&applied, ",\"seccomp\":%s", seccomp ? "true" : "false");
	if (seccomp)
		glsb_sb_buf_printf(&applied, ",\"seccomp_rules\":%d", glsb_sb_seccomp_rule_count());
	glsb_sb_buf_printf(&applied, ",\"cgroup\":%s",
			   cgroup.version == 2 ? "\"v2\"" : cgroup.version == 1 ? "\"v1\"" : "false");
	if (!cgroup.version) {
		glsb_sb_buf_printf(&applied, ",\"cgroup_reason\":");
		glsb_sb_buf_json_str(&applied, cgroup.why);
	} else {
		glsb_sb_buf_printf(&applied, ",\"cgroup_dirs\":[");
		for (int i = 0; i < cgroup.ndirs; i++) {
			glsb_sb_buf_printf(&applied, "%s", i ? "," : "");
			glsb_sb_buf_json_str(&applied, cgroup.dirs[i]);
		}
		glsb_sb_buf_printf(&applied, "]");
	}
	glsb_sb_buf_printf(&applied,
			   ",\"rlimits\":{\"cpu_seconds\":%ld,\"data_mb\":%ld,\"fsize_mb\":%ld,"
			   "\"nofile\":%ld,\"nproc\":%ld},\"tmp_mb\":%ld,\"network\":\"%s\"",
			   opt.cpu_s, opt.memory_mb, fsize, opt.nofile, opt.nproc, opt.disk_mb,
			   opt.network ? "host" : "loopback");
	glsb_sb_buf_printf(&applied, ",\"uid\":%d,\"host_uid\":%ld,\"host_gid\":%ld}", SANDBOX_UID,
			   host_uid, host_gid);

	/* The environment: exactly --env plus defaults. */
	static char *envp[260];
	int ne = 0;
	for (int i = 0; i < opt.nenv; i++)
		envp[ne++] = (char *)opt.env[i];
	if (!env_has("HOME"))
		envp[ne++] = "HOME=" SANDBOX_HOME;
	if (!env_has("PATH"))
		envp[ne++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	if (!env_has("LANG"))
		envp[ne++] = "LANG=C.UTF-8";
	envp[ne] = NULL;
	const char *path = NULL;
	for (int i = 0; i < ne; i++)
		if (!strncmp(envp[i], "PATH=", 5))
			path = envp[i] + 5;
	static char prog[PATH_MAX];
	if (find_program(opt.argv[0], path, prog, sizeof prog) < 0)
		child_fail("program %s: %s", opt.argv[0], strerror(errno));

	glsb_sb_buf_printf(&applied, ",\"missing\":[%s],\"optional_missing\":[%s]", missing,
			   opt_missing);
	if (applied.overflow)
		child_fail("report too long");
	glsb_sb_write_all(status_wr, applied.data, applied.len);
	close(status_wr);
	close(sync_rd);
	run_init(prog, envp);
}

/* --- outside: the supervisor -------------------------------------------------------------- */

static int write_id_maps(pid_t pid, char *err, size_t errcap)
{
	char path[64], map[128];

	if (root_mode) {
		snprintf(map, sizeof map, "0 %ld 1\n%d %ld 1\n", opt.id_base, SANDBOX_UID,
			 opt.id_base + SANDBOX_UID);
	} else {
		/* Unprivileged, only our own id can be mapped, and setgroups must be denied. */
		snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
		if (glsb_sb_write_knob(path, "deny") < 0 && errno != ENOENT)
			goto fail;
		snprintf(map, sizeof map, "%d %d 1\n", SANDBOX_UID, (int)getuid());
	}
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	if (glsb_sb_write_knob(path, map) < 0)
		goto fail;
	if (!root_mode)
		snprintf(map, sizeof map, "%d %d 1\n", SANDBOX_UID, (int)getgid());
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	if (glsb_sb_write_knob(path, map) < 0)
		goto fail;
	return 0;
fail:
	glsb_sb_fmt(err, errcap, "writing %s: %s", path, strerror(errno));
	return -1;
}

static pid_t start_child(int pipes[2][2], char *err, size_t errcap)
{
	/* The cgroup namespace comes later (child_main), once the child is in its own cgroup. */
	int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
		    (opt.network ? 0 : CLONE_NEWNET);

	for (int attempt = 0; attempt < 2; attempt++) {
		clone_flags = flags;
		/* fork-like clone (no new stack): the child continues here with a copy of memory. */
		long pid = syscall(SYS_clone, (unsigned long)flags | SIGCHLD, NULL, NULL, NULL, NULL);
		if (pid == 0) {
			close(pipes[0][1]);
			close(pipes[1][0]);
			sync_rd = pipes[0][0];
			status_wr = pipes[1][1];
			if (opt.report_fd >= 0)
				close(opt.report_fd);
			close(sup_sfd);
			child_main();
		}
		if (pid > 0)
			return (pid_t)pid;
		int clone_errno = errno;
		if (attempt > 0)
			break;
		/* Find out which namespace the kernel refused. */
		int fatal = 0;
		for (int i = 0; i < glsb_sb_namespace_count; i++) {
			const struct glsb_sb_ns *ns = &glsb_sb_namespaces[i];
			if (!(flags & ns->flag) || glsb_sb_probe_ns(ns->flag) == 0)
				continue;
			add_missing(ns->name, 1);
			if (ns->flag == CLONE_NEWUSER || ns->flag == CLONE_NEWNS ||
			    ns->flag == CLONE_NEWPID || !opt.degraded)
				fatal = 1;
			flags &= ~ns->flag;
		}
		if (fatal || flags == clone_flags) {
			char names[256] = "";
			for (int k = 0; k < glsb_sb_namespace_count; k++) {
				const struct glsb_sb_ns *ns = &glsb_sb_namespaces[k];
				size_t len = strlen(names);
				if (clone_flags & ns->flag & ~flags)
					glsb_sb_fmt(names + len, sizeof names - len, "%s%s",
						    len ? ", " : "", ns->name);
			}
			glsb_sb_fmt(err, errcap, "cannot create namespaces (%s)%s%s",
				    strerror(clone_errno), names[0] ? ": missing " : "", names);
			return -1;
		}
	}
	glsb_sb_fmt(err, errcap, "cannot create namespaces: %s", strerror(errno));
	return -1;
}

/* Read what the child wrote to the status pipe: 0 while more may come, 1 at EOF or error. */
static int read_status(int fd, struct glsb_sb_buf *msg)
{
	ssize_t n = read(fd, msg->data + msg->len, sizeof msg->data - 1 - msg->len);
	if (n < 0 && errno == EINTR)
		return 0;
	if (n > 0) {
		msg->len += (size_t)n;
		if (msg->len < sizeof msg->data - 1)
			return 0;
	}
	msg->data[msg->len] = '\0';
	return 1;
}

/* Turn the child's 'O'/'E' message into the report line (the child cannot know its host pid). */
static void forward_status(const struct glsb_sb_buf *msg, pid_t pid)
{
	struct glsb_sb_buf line = {.len = 0};

	if (msg->len == 0 || opt.report_fd < 0)
		return;
	if (msg->data[0] == 'O')
		glsb_sb_buf_printf(&line, "{\"ok\":true,\"pid\":%d,%s}\n", (int)pid, msg->data + 1);
	else
		glsb_sb_buf_printf(&line, "{\"ok\":false,%s}\n", msg->data + 1);
	glsb_sb_write_all(opt.report_fd, line.data, line.len);
	close(opt.report_fd);
	opt.report_fd = -1;
}

int glsb_cmd_sandbox(int argc, char **argv)
{
	char err[1024];
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
			opt.network = 1;
		} else if (!strcmp(a, "--allow-degraded")) {
			opt.degraded = 1;
		} else if (!strcmp(a, "--cleanup")) {
			opt.cleanup = 1;
		} else if (!strcmp(a, "--workspace") && more >= 1) {
			opt.workspace = argv[++i];
		} else if ((!strcmp(a, "--ro-bind") || !strcmp(a, "--bind")) && more >= 2) {
			const char *dst = argv[i + 2];
			if (opt.nbinds >= (int)(sizeof opt.binds / sizeof opt.binds[0]) ||
			    dst[0] != '/' || !dst[1] || strstr(dst, "/..") || strlen(dst) > 200) {
				fprintf(stderr, "glsb-confine sandbox: bad or too many binds (%s)\n", dst);
				return 2;
			}
			opt.binds[opt.nbinds++] = (struct bindarg){argv[i + 1], dst, a[2] == 'b'};
			i += 2;
		} else if (!strcmp(a, "--env") && more >= 1) {
			if (!strchr(argv[i + 1], '=') || opt.nenv >= 256) {
				fprintf(stderr, "glsb-confine sandbox: bad --env %s\n", argv[i + 1]);
				return 2;
			}
			opt.env[opt.nenv++] = argv[++i];
		} else if (more >= 1 && a[0] == '-' && a[1] == '-') {
			/* Bounds keep every product (MB to bytes) far from overflow. */
			const struct {
				const char *name;
				long *val;
				long min, max;
			} nums[] = {
				{"--memory-mb", &opt.memory_mb, 1, 1L << 24},
				{"--cpu-seconds", &opt.cpu_s, 1, 1L << 30},
				{"--max-processes", &opt.nproc, 1, 1L << 22},
				{"--max-file-mb", &opt.file_mb, 1, 1L << 24},
				{"--disk-mb", &opt.disk_mb, 1, 1L << 24},
				{"--max-open-files", &opt.nofile, 16, 1L << 20},
				{"--id-base", &opt.id_base, 1, 4294967294L - SANDBOX_UID},
				{"--report-fd", &n, 0, INT_MAX},
			};
			size_t k;
			for (k = 0; k < sizeof nums / sizeof nums[0]; k++)
				if (!strcmp(a, nums[k].name))
					break;
			if (k == sizeof nums / sizeof nums[0] ||
			    parse_long(argv[i + 1], nums[k].min, nums[k].max, nums[k].val) < 0) {
				fprintf(stderr, "glsb-confine sandbox: bad option %s %s\n", a, argv[i + 1]);
				return 2;
			}
			if (nums[k].val == &n) {
				if (fcntl((int)n, F_GETFD) < 0) {
					fprintf(stderr, "glsb-confine sandbox: --report-fd %ld is not open\n", n);
					return 2;
				}
				opt.report_fd = (int)n;
				fcntl(opt.report_fd, F_SETFD, FD_CLOEXEC);
			}
			i++;
		} else if (a[0] == '-') {
			fprintf(stderr, "glsb-confine sandbox: unknown option %s (see --help)\n", a);
			return 2;
		} else {
			break;
		}
	}
	if (i >= argc || !opt.workspace) {
		fputs(usage_text, stderr);
		return 2;
	}
	opt.argv = argv + i;
	root_mode = geteuid() == 0;
	host_uid = root_mode ? opt.id_base + SANDBOX_UID : (long)getuid();
	host_gid = root_mode ? opt.id_base + SANDBOX_UID : (long)getgid();

	/* The supervisor dies with its owner too, but gets to clean up: SIGHUP, handled below.
	 * If the owner is already gone, the signal will never come: stop here. */
	pid_t owner = getppid();
	prctl(PR_SET_PDEATHSIG, SIGHUP);
	if (getppid() != owner || owner == 1)
		return EXIT_SETUP;
	/* Pipes and the report must not land on 0-2 if a caller closed them. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return EXIT_SETUP;

	sigset_t sigs, oldmask;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigset_t blocked = sigs;
	sigaddset(&blocked, SIGPIPE); /* a vanished reader is an EPIPE, not our death */
	sigprocmask(SIG_BLOCK, &blocked, &oldmask);

	int pipes[2][2] = {{-1, -1}, {-1, -1}}, sfd = -1, have_cgroup = 0, exit_code = EXIT_SETUP;
	pid_t pid = -1;
	char name[64];

	if (prepare_workspace(err, sizeof err) < 0 || build_plan(err, sizeof err) < 0)
		goto fail;
	if (root_mode)
		give_stdio();
	snprintf(name, sizeof name, "sb-%d-%ld", (int)getpid(), (long)time(NULL));
	if (glsb_sb_cgroup_create(&cgroup, name, opt.memory_mb, opt.nproc) == 0)
		have_cgroup = 1;
	else
		add_missing("cgroup", 0);
	if (pipe2(pipes[0], O_CLOEXEC) < 0 || pipe2(pipes[1], O_CLOEXEC) < 0 ||
	    (sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0) {
		glsb_sb_fmt(err, sizeof err, "pipe/signalfd: %s", strerror(errno));
		goto fail;
	}
	sup_sfd = sfd;
	pid = start_child(pipes, err, sizeof err);
	if (pid < 0)
		goto fail;
	plan_close();
	close(pipes[0][0]);
	close(pipes[1][1]);
	pipes[0][0] = pipes[1][1] = -1;

	if (write_id_maps(pid, err, sizeof err) < 0)
		goto kill_fail;
	if (write(pipes[0][1], "1", 1) != 1) {
		glsb_sb_fmt(err, sizeof err, "sync: %s", strerror(errno));
		goto kill_fail;
	}
	/* Moving a task between cgroups waits for an RCU grace period (milliseconds, on v1
	 * especially): do it while the child builds its root, which allocates next to nothing. */
	if (have_cgroup && glsb_sb_cgroup_attach(&cgroup, pid) < 0) {
		glsb_sb_fmt(err, sizeof err, "joining cgroup %s: %s", cgroup.dirs[0], strerror(errno));
		goto kill_fail;
	}
	if (write(pipes[0][1], "2", 1) != 1) {
		glsb_sb_fmt(err, sizeof err, "sync: %s", strerror(errno));
		goto kill_fail;
	}

	/* Wait for the setup report, signals, and the end of the sandbox. */
	struct glsb_sb_buf msg = {.len = 0};
	int status_fd = pipes[1][0], terms = 0, st = 0;
	for (;;) {
		struct pollfd p[2] = {{sfd, POLLIN, 0}, {status_fd, POLLIN, 0}};
		if (poll(p, status_fd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (status_fd >= 0 && p[1].revents) {
			if (read_status(status_fd, &msg) == 0)
				continue;
			close(status_fd);
			status_fd = pipes[1][0] = -1;
			forward_status(&msg, pid);
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
				continue;
			if (si.ssi_signo == SIGCHLD) {
				if (waitpid(pid, &st, WNOHANG) == pid)
					break;
			} else if (si.ssi_signo == SIGHUP || terms++ > 0) {
				kill(pid, SIGKILL);
			} else {
				kill(pid, (int)si.ssi_signo);
			}
		}
	}
	if (status_fd >= 0) {
		/* The child is gone: whatever it wrote is in the pipe, then EOF. */
		while (read_status(status_fd, &msg) == 0)
			;
		close(status_fd);
		pipes[1][0] = -1;
		forward_status(&msg, pid);
	}
	exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (opt.report_fd >= 0) {
		/* Died before reporting (e.g. killed during set-up). */
		glsb_sb_fmt(err, sizeof err, "sandbox set-up ended early (status %d)", exit_code);
		report_failure(err);
		exit_code = EXIT_SETUP;
	}
	if (msg.len > 0 && msg.data[0] == 'E')
		exit_code = EXIT_SETUP;
	goto out;

kill_fail:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
fail:
	report_failure(err);
	exit_code = EXIT_SETUP;
out:
	plan_close();
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			if (pipes[a][b] >= 0)
				close(pipes[a][b]);
	if (sfd >= 0)
		close(sfd);
	if (have_cgroup)
		glsb_sb_cgroup_remove(&cgroup);
	if (opt.cleanup && ws_real[0] && glsb_sb_remove_tree(ws_real) < 0)
		fprintf(stderr, "glsb-confine sandbox: cleanup of %s incomplete: %s\n", ws_real,
			strerror(errno));
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	return exit_code;
}
