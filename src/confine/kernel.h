/* kernel.h: Linux interfaces newer than the build host's uapi headers (Debian 12 ships 6.1),
 * defined here under #ifndef, plus raw syscall wrappers musl does not provide. */
#ifndef GLSB_SB_KERNEL_H
#define GLSB_SB_KERNEL_H

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>

/* --- syscall numbers (x86_64 / generic numbering since 5.x is shared by all arches) --- */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

/* --- namespaces --- */
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080 /* unshare() only: the bit is CSIGNAL space for clone() */
#endif

/* --- open_tree / move_mount (5.2) --- */
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC 02000000 /* O_CLOEXEC */
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

/* --- mount_setattr (5.12) --- */
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
struct glsb_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* --- openat2 (5.6) --- */
struct glsb_open_how {
	uint64_t flags, mode, resolve;
};
#ifndef RESOLVE_NO_XDEV
#define RESOLVE_NO_XDEV 0x01
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04
#endif
#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif

/* --- Landlock: ABI 1..7. The 6.1 header knows ABI 2 (REFER) only. --- */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
/* The ruleset attribute grew fields with the ABI; the kernel takes the size we pass. */
struct glsb_landlock_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

/* --- seccomp --- */
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif

static inline long glsb_sys_landlock_create_ruleset(const void *attr, size_t size, uint32_t flags)
{
	return syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

static inline long glsb_sys_landlock_add_rule(int fd, int type, const void *attr, uint32_t flags)
{
	return syscall(SYS_landlock_add_rule, fd, type, attr, flags);
}

static inline long glsb_sys_landlock_restrict_self(int fd, uint32_t flags)
{
	return syscall(SYS_landlock_restrict_self, fd, flags);
}

static inline long glsb_sys_mount_setattr(int dfd, const char *path, unsigned flags,
					  struct glsb_mount_attr *attr)
{
	return syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof *attr);
}

static inline long glsb_sys_openat2(int dfd, const char *path, struct glsb_open_how *how)
{
	return syscall(SYS_openat2, dfd, path, how, sizeof *how);
}

static inline long glsb_sys_close_range(unsigned first, unsigned last, unsigned flags)
{
	return syscall(SYS_close_range, first, last, flags);
}

static inline long glsb_sys_pidfd_open(pid_t pid, unsigned flags)
{
	return syscall(SYS_pidfd_open, pid, flags);
}

#endif
