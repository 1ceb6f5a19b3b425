/* sb_mounts.c: the sandbox's filesystem: the supervisor plans it (what to bind, copy or link,
 * from paths it can still reach), the child opens the sources and builds a private read-only
 * root on a tmpfs from the plan, then pivots into it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sb.h"
#include "files.h"
#include "text.h"

/* --- the plan (supervisor) ----------------------------------------------------------------- */

static int plan_add(struct sb *sb, enum sb_mkind kind, const char *src, const char *dst, int follow, char *err,
		    size_t errcap)
{
	struct sb_mount *m;
	struct stat st;

	if (sb->nplan >= (int)(sizeof sb->plan / sizeof sb->plan[0])) {
		glsb_fmt(err, errcap, "too many mounts");
		return -1;
	}
	m = &sb->plan[sb->nplan];
	memset(m, 0, sizeof *m);
	m->kind = kind;
	m->fd = -1;
	snprintf(m->dst, sizeof m->dst, "%s", dst);
	if (kind == M_SYMLINK) {
		snprintf(m->target, sizeof m->target, "%s", src);
		sb->nplan++;
		return 0;
	}
	if (strlen(src) >= sizeof m->src || (follow ? stat(src, &st) : lstat(src, &st)) < 0) {
		glsb_fmt(err, errcap, "cannot use %s: %s", src,
			    strlen(src) >= sizeof m->src ? "path too long" : strerror(errno));
		return -1;
	}
	snprintf(m->src, sizeof m->src, "%s", src);
	m->isdir = S_ISDIR(st.st_mode);
	m->follow = follow;
	sb->nplan++;
	return 0;
}

/* Add /NAME as on the host: a symlink is recreated, a directory or file bound read-only.
 * Absent entries are skipped. */
static int plan_host_entry(struct sb *sb, const char *path, int follow, char *err, size_t errcap)
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
		return plan_add(sb, M_SYMLINK, target, path, 0, err, errcap);
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return 0;
	if (S_ISREG(st.st_mode) && st.st_size <= SB_COPY_MAX)
		return plan_add(sb, M_COPY, path, path, follow, err, errcap);
	return plan_add(sb, M_BIND_RO, path, path, follow, err, errcap);
}

int glsb_sb_plan_mounts(struct sb *sb, char *err, size_t errcap)
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
		/* Debian's matplotlib reads its defaults there (python3-matplotlib's matplotlib_fname),
		 * and lists the fonts with fc-list, which reads /etc/fonts */
		"/etc/matplotlibrc", "/etc/fonts",
	};
	static const char *const dev[] = {"null", "zero", "full", "random", "urandom"};
	char src[PATH_MAX + 16], dst[300];

	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		if (plan_host_entry(sb, top[i], 0, err, errcap) < 0)
			return -1;
	for (size_t i = 0; i < sizeof etc / sizeof etc[0]; i++)
		if (plan_host_entry(sb, etc[i], 0, err, errcap) < 0)
			return -1;
	for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
		snprintf(src, sizeof src, "/dev/%s", dev[i]);
		if (plan_add(sb, M_DEV, src, src, 1, err, errcap) < 0)
			return -1;
	}
	if (!sb->opt.private_storage) {
		snprintf(src, sizeof src, "%s/home", sb->ws_real);
		if (plan_add(sb, M_BIND_RW, src, SANDBOX_HOME, 0, err, errcap) < 0)
			return -1;
		snprintf(src, sizeof src, "%s/files", sb->ws_real);
		if (plan_add(sb, M_BIND_RW, src, "/files", 0, err, errcap) < 0)
			return -1;
	}
	for (int i = 0; i < sb->opt.nbinds; i++) {
		char real[PATH_MAX];
		if (!realpath(sb->opt.binds[i].src, real)) {
			glsb_fmt(err, errcap, "bind source %s: %s", sb->opt.binds[i].src, strerror(errno));
			return -1;
		}
		snprintf(dst, sizeof dst, "%s", sb->opt.binds[i].dst);
		/* A small file bound read-only is copied instead: no host path in mountinfo (the
		 * kernel shows a bind's source path; a directory bind keeps showing it). */
		struct stat st;
		enum sb_mkind kind = sb->opt.binds[i].rw ? M_BIND_RW : M_BIND_RO;
		if (kind == M_BIND_RO && stat(real, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_size <= SB_COPY_MAX)
			kind = M_COPY;
		if (plan_add(sb, kind, real, dst, 0, err, errcap) < 0)
			return -1;
	}
	return 0;
}

void glsb_sb_plan_close(struct sb *sb)
{
	for (int i = 0; i < sb->nplan; i++)
		if (sb->plan[i].fd >= 0)
			close(sb->plan[i].fd);
	sb->nplan = 0;
}

/* --- the root (child) ---------------------------------------------------------------------- */

/* Open every bind source now: a bind needs a source in our own mount namespace, and only
 * before the switch to the sandbox's ids can we cross a 0700 workspace owned by the caller. */
int glsb_sb_open_mount_sources(struct sb *sb, char *err, size_t errcap)
{
	for (int i = 0; i < sb->nplan; i++) {
		struct sb_mount *m = &sb->plan[i];
		if (m->kind == M_SYMLINK)
			continue;
		if (m->kind != M_COPY && sb->detached_sources) {
			/* A detached copy of the mount (open_tree), attached by the child with move_mount:
			 * the child owns its mount namespace but not these paths. */
			m->fd = (int)syscall(SYS_open_tree, AT_FDCWD, m->src,
					     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
					     (m->follow ? 0 : AT_SYMLINK_NOFOLLOW));
		} else {
			m->fd = open(m->src, (m->kind == M_COPY ? O_RDONLY : O_PATH) | O_CLOEXEC |
					     (m->follow ? 0 : O_NOFOLLOW));
		}
		if (m->fd < 0) {
			glsb_fmt(err, errcap, "open %s: %s", m->src, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void mkdirs_or_fail(struct sb *sb, const char *path)
{
	if (glsb_mkdirs(path, 0755) < 0)
		glsb_sb_child_fail(sb, "mkdir %s: %s", path, strerror(errno));
}

/* Make a bind read-only (and nosuid/nodev unless a device), recursively when the kernel has
 * mount_setattr. Plain remount keeps the flags the kernel locked on the source. */
static void seal_mount(struct sb *sb, const char *path, int rdonly, int nodev)
{
	struct glsb_mount_attr a = {
		.attr_set = (rdonly ? MOUNT_ATTR_RDONLY : 0) | MOUNT_ATTR_NOSUID |
			    (nodev ? MOUNT_ATTR_NODEV : 0)};
	if (glsb_sys_mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &a) == 0)
		return;
	if (errno != ENOSYS)
		glsb_sb_child_fail(sb, "mount_setattr %s: %s", path, strerror(errno));
	struct statvfs sv;
	unsigned long fl = MS_REMOUNT | MS_BIND | MS_NOSUID | (rdonly ? MS_RDONLY : 0) |
			   (nodev ? MS_NODEV : 0);
	if (statvfs(path, &sv) == 0)
		fl |= sv.f_flag & (ST_NODEV | ST_NOEXEC | ST_NOATIME | ST_NODIRATIME | ST_RELATIME);
	if (mount(NULL, path, NULL, fl, NULL) < 0)
		glsb_sb_child_fail(sb, "remount %s: %s", path, strerror(errno));
}

static void do_bind(struct sb *sb, const struct sb_mount *m, const char *dst)
{
	char src[64];

	if (m->isdir) {
		mkdirs_or_fail(sb, dst);
	} else {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s", dst);
		*strrchr(parent, '/') = '\0';
		mkdirs_or_fail(sb, parent);
		int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST && errno != EISDIR)
			glsb_sb_child_fail(sb, "create %s: %s", dst, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	/* The source was opened while it could still be reached (a 0700 workspace, a template in
	 * root's home): by the supervisor as a detached mount (root), else by us before our ids
	 * changed; a bind needs a source in our own mount namespace, which /proc/self/fd gives. */
	int rc;
	if (sb->detached_sources) {
		rc = (int)syscall(SYS_move_mount, m->fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
	} else {
		snprintf(src, sizeof src, "/proc/self/fd/%d", m->fd);
		rc = mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
	}
	if (rc < 0)
		glsb_sb_child_fail(sb, "bind %s on %s: %s", m->src, m->dst, strerror(errno));
	seal_mount(sb, dst, m->kind != M_BIND_RW, m->kind != M_DEV);
}

static void do_copy(struct sb *sb, const struct sb_mount *m, const char *dst)
{
	char buf[16384];
	size_t total = 0;
	struct stat st;
	/* the source's permission bits, less write for others (an executable stays one) */
	mode_t mode = fstat(m->fd, &st) == 0 ? (st.st_mode & 0755) : 0644;
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);

	if (out < 0)
		glsb_sb_child_fail(sb, "create %s: %s", m->dst, strerror(errno));
	for (;;) {
		ssize_t n = read(m->fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			glsb_sb_child_fail(sb, "read %s: %s", m->src, strerror(errno));
		if (n == 0)
			break;
		total += (size_t)n;
		/* A file that grew past the cap since the plan: refuse rather than fill the root. */
		if (total > SB_COPY_MAX || glsb_write_all(out, buf, (size_t)n) < 0)
			glsb_sb_child_fail(sb, "copy %s: %s", m->src, total > SB_COPY_MAX ? "too large" : strerror(errno));
	}
	close(out);
}

static void generate_etc(struct sb *sb)
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
		if (glsb_write_file(p, files[i].text, 0644) < 0)
			glsb_sb_child_fail(sb, "write /etc/%s: %s", files[i].name, strerror(errno));
	}
	if (!sb->opt.network)
		return;
	/* The resolver is slirp4netns's (the host's, asked by slirp4netns: never the host's own
	 * resolv.conf, whose 127.0.0.53 would be the sandbox's loopback); the names --net-allow pinned
	 * follow localhost in hosts (nsswitch: files first). */
	int fd = open(NEWROOT "/etc/hosts", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || glsb_write_all(fd, sb->net.hosts, strlen(sb->net.hosts)) < 0)
		glsb_sb_child_fail(sb, "write /etc/hosts: %s", strerror(errno));
	close(fd);
	if (glsb_write_file(NEWROOT "/etc/resolv.conf", "nameserver 10.0.2.3\n", 0644) < 0)
		glsb_sb_child_fail(sb, "write /etc/resolv.conf: %s", strerror(errno));
}

/* Private storage: one tmpfs of --disk-mb bytes and --max-inodes inodes holds /tmp,
 * /home/user and /files (bound from its tmp/, home/ and files/), so everything the sandbox can
 * write is bounded together and a full disk is ENOSPC. It lives in the sandbox's mount
 * namespace only: gone with it, never on the host, and no host path in mountinfo. */
static void mount_private_storage(struct sb *sb)
{
	static const struct {
		const char *sub, *dst;
		mode_t mode;
		int user;
	} dirs[] = {
		{"tmp", "/tmp", 01777, 0},
		{"home", SANDBOX_HOME, 0700, 1},
		{"files", "/files", 0700, 1},
	};
	const char *at = NEWROOT "/.storage";
	char opts[96], src[64], dst[64];

	mkdirs_or_fail(sb, at);
	snprintf(opts, sizeof opts, "mode=0755,size=%ldm,nr_inodes=%ld", sb->opt.disk_mb,
		 sb->opt.max_inodes);
	if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		glsb_sb_child_fail(sb, "mount the storage tmpfs (%s): %s", opts, strerror(errno));
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(src, sizeof src, "%s/%s", at, dirs[i].sub);
		snprintf(dst, sizeof dst, NEWROOT "%s", dirs[i].dst);
		if (mkdir(src, dirs[i].mode) < 0 || chmod(src, dirs[i].mode) < 0 ||
		    (dirs[i].user && chown(src, SANDBOX_UID, SANDBOX_UID) < 0))
			glsb_sb_child_fail(sb, "storage %s: %s", dirs[i].sub, strerror(errno));
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			glsb_sb_child_fail(sb, "bind storage %s on %s: %s", dirs[i].sub, dirs[i].dst,
					   strerror(errno));
	}
	if (umount2(at, MNT_DETACH) < 0 || rmdir(at) < 0)
		glsb_sb_child_fail(sb, "storage: %s", strerror(errno));
}

void glsb_sb_build_root(struct sb *sb)
{
	char dst[PATH_MAX], opts[64];

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		glsb_sb_child_fail(sb, "make mounts private: %s", strerror(errno));
	/* room for /etc and up to 64 copied --ro-bind files of at most 1 MiB (pages are used as
	 * written, not reserved) */
	if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=80m") < 0)
		glsb_sb_child_fail(sb, "mount root tmpfs: %s", strerror(errno));
	mkdirs_or_fail(sb, NEWROOT "/etc");
	mkdirs_or_fail(sb, NEWROOT "/proc");
	mkdirs_or_fail(sb, NEWROOT "/dev");
	mkdirs_or_fail(sb, NEWROOT "/tmp");
	mkdirs_or_fail(sb, NEWROOT "/home/user");
	mkdirs_or_fail(sb, NEWROOT "/files");

	/* /dev: a small tmpfs holding bind-mounted host devices and the usual symlinks. */
	if (mount("tmpfs", NEWROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		glsb_sb_child_fail(sb, "mount /dev tmpfs: %s", strerror(errno));
	static const char *const links[][2] = {
		{"/proc/self/fd", "fd"},         {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"},   {"/proc/self/fd/2", "stderr"},
		{"/tmp", "shm"}, /* POSIX shm and semaphores land in the size-capped /tmp */
	};
	for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
		snprintf(dst, sizeof dst, NEWROOT "/dev/%s", links[i][1]);
		if (symlink(links[i][0], dst) < 0)
			glsb_sb_child_fail(sb, "symlink %s: %s", dst, strerror(errno));
	}

	for (int i = 0; i < sb->nplan; i++) {
		const struct sb_mount *m = &sb->plan[i];
		snprintf(dst, sizeof dst, NEWROOT "%s", m->dst);
		if (m->kind == M_SYMLINK) {
			char parent[PATH_MAX];
			snprintf(parent, sizeof parent, "%s", dst);
			*strrchr(parent, '/') = '\0';
			mkdirs_or_fail(sb, parent);
			if (symlink(m->target, dst) < 0 && errno != EEXIST)
				glsb_sb_child_fail(sb, "symlink %s: %s", m->dst, strerror(errno));
			continue;
		}
		if (m->kind == M_COPY) {
			char parent[PATH_MAX];
			snprintf(parent, sizeof parent, "%s", dst);
			*strrchr(parent, '/') = '\0';
			mkdirs_or_fail(sb, parent);
			do_copy(sb, m, dst);
			continue;
		}
		do_bind(sb, m, dst);
	}
	glsb_sb_plan_close(sb);

	if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		glsb_sb_child_fail(sb, "mount /proc: %s", strerror(errno));
	if (sb->opt.private_storage) {
		mount_private_storage(sb);
	} else {
		snprintf(opts, sizeof opts, "mode=1777,size=%ldm", sb->opt.disk_mb);
		if (mount("tmpfs", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
			glsb_sb_child_fail(sb, "mount /tmp: %s", strerror(errno));
	}
	generate_etc(sb);
	seal_mount(sb, NEWROOT "/dev", 1, 0);

	/* pivot_root(".", ".") stacks the old root on the new one; detaching it leaves only ours. */
	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		glsb_sb_child_fail(sb, "pivot_root: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		glsb_sb_child_fail(sb, "remount / read-only: %s", strerror(errno));
}
