/* sb_ids.c: who the sandbox is: its id maps (run as root: a shifted range, so host root never
 * owns what the sandbox writes; unprivileged: the caller's own ids), the workspace and stdio
 * handed to that host id, and the child's switch to uid 1000 without capabilities. */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "sb.h"
#include "files.h"
#include "text.h"

int glsb_sb_prepare_workspace(struct sb *sb, char *err, size_t errcap)
{
	static const char *const sub[] = {"home", "files"};
	char p[PATH_MAX + 16];

	if (glsb_mkdirs(sb->opt.workspace, 0700) < 0 || !realpath(sb->opt.workspace, sb->ws_real)) {
		glsb_fmt(err, errcap, "workspace %s: %s", sb->opt.workspace, strerror(errno));
		return -1;
	}
	for (int i = 0; i < 2 && !sb->opt.private_storage; i++) {
		struct stat st;
		glsb_fmt(p, sizeof p, "%s/%s", sb->ws_real, sub[i]);
		if ((mkdir(p, 0700) < 0 && errno != EEXIST) || lstat(p, &st) < 0 ||
		    (!S_ISDIR(st.st_mode) && (errno = ENOTDIR))) {
			glsb_fmt(err, errcap, "workspace %s: %s", p, strerror(errno));
			return -1;
		}
		if (sb->root_mode && lchown(p, (uid_t)sb->host_uid, (gid_t)sb->host_gid) < 0) {
			glsb_fmt(err, errcap, "workspace %s: chown: %s", p, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Scripts reopen their output through /dev/stdout (/proc/self/fd/1), which checks the
 * owner of the pipe: hand anonymous pipes and sockets on 0-2 to the sandbox user (with the
 * shifted ids they are root's otherwise). Files and terminals are left alone. */
void glsb_sb_give_stdio(struct sb *sb)
{
	for (int fd = 0; fd < 3; fd++) {
		struct statfs sf;
		struct stat st;
		if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0 || st.st_uid != geteuid())
			continue;
		if ((S_ISFIFO(st.st_mode) && sf.f_type == 0x50495045 /* PIPEFS_MAGIC */) ||
		    (S_ISSOCK(st.st_mode) && sf.f_type == 0x534F434B /* SOCKFS_MAGIC */))
			if (fchown(fd, (uid_t)sb->host_uid, (gid_t)sb->host_gid) < 0)
				continue; /* only /dev/stdout-style reopening is lost */
	}
}

int glsb_sb_write_id_maps(struct sb *sb, pid_t pid, char *err, size_t errcap)
{
	char path[64], map[128];

	if (sb->root_mode) {
		glsb_fmt(map, sizeof map, "0 %ld 1\n%d %ld 1\n", sb->opt.id_base, SANDBOX_UID,
			    sb->host_uid);
	} else {
		/* Unprivileged, only our own id can be mapped, and setgroups must be denied. */
		glsb_fmt(path, sizeof path, "/proc/%d/setgroups", (int)pid);
		if (glsb_write_knob(path, "deny") < 0 && errno != ENOENT)
			goto fail;
		glsb_fmt(map, sizeof map, "%d %ld 1\n", SANDBOX_UID, sb->host_uid);
	}
	glsb_fmt(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	if (glsb_write_knob(path, map) < 0)
		goto fail;
	if (sb->root_mode)
		glsb_fmt(map, sizeof map, "0 %ld 1\n%d %ld 1\n", sb->opt.id_base, SANDBOX_UID,
			    sb->host_gid);
	else
		glsb_fmt(map, sizeof map, "%d %ld 1\n", SANDBOX_UID, sb->host_gid);
	glsb_fmt(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	if (glsb_write_knob(path, map) < 0)
		goto fail;
	return 0;
fail:
	glsb_fmt(err, errcap, "writing %s: %s", path, strerror(errno));
	return -1;
}

void glsb_sb_become_userns_root(struct sb *sb)
{
	if (sb->root_mode &&
	    (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0))
		glsb_sb_child_fail(sb, "become root of the user namespace: %s", strerror(errno));
	/* Cleared by credential changes. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

void glsb_sb_drop_privileges(struct sb *sb)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0 ||
	    setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0)
		glsb_sb_child_fail(sb, "switch to uid %d: %s", SANDBOX_UID, strerror(errno));
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		glsb_sb_child_fail(sb, "capset: %s", strerror(errno));
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* --- one host id range per sandbox (root) ------------------------------------------------- */

/* Each sandbox started by root without --id-base claims a slot k of the range: its ids are
 * DEFAULT_ID_BASE + k * SB_ID_SLOT_SIZE (+ 1000), like the subordinate id ranges container
 * runtimes hand out, so per-user kernel limits (inotify instances, RLIMIT_NPROC, ...) are per
 * sandbox. A slot is claimed by an exclusive flock on SB_ID_LOCK_DIR/slot-<k>: atomic across
 * processes, released when the supervisor exits however it exits (a crash included). */
static int open_lock_dir(char *err, size_t errcap)
{
	static const char *const parts[] = {"run", "glsb-confine", "ids"};
	int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; dir >= 0 && i < sizeof parts / sizeof parts[0]; i++) {
		struct stat st;
		mode_t mode = i == 0 ? 0755 : 0700;
		if (mkdirat(dir, parts[i], mode) < 0 && errno != EEXIST)
			goto fail;
		int next = openat(dir, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			goto fail;
		close(dir);
		dir = next;
		/* only root may be able to create or remove slots */
		if (fstat(dir, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
			errno = EPERM;
			goto fail;
		}
	}
	return dir;
fail:
	glsb_fmt(err, errcap, "id slots in /%s: %s", "run/glsb-confine/ids", strerror(errno));
	if (dir >= 0)
		close(dir);
	return -1;
}

int glsb_sb_claim_id_slot(struct sb *sb, char *err, size_t errcap)
{
	char name[32];
	int dir = open_lock_dir(err, errcap);
	if (dir < 0)
		return -1;
	long n = sb->opt.id_slots;
	long start = (long)(((unsigned long)getpid() * 2654435761UL) % (unsigned long)n);
	for (long i = 0; i < n; i++) {
		long k = (start + i) % n;
		glsb_fmt(name, sizeof name, "slot-%ld", k);
		int fd = openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			continue;
		}
		close(dir);
		sb->id_lock_fd = fd;
		sb->id_slot = k;
		sb->opt.id_base = DEFAULT_ID_BASE + k * SB_ID_SLOT_SIZE;
		return 0;
	}
	close(dir);
	glsb_fmt(err, errcap, "no free id slot: %ld sandboxes started by root run now (--id-slots)", n);
	return -1;
}
