/* seccomp.c: the sandbox's seccomp-bpf filter: allow by default, EPERM for what a code
 * interpreter never needs (mounts, namespaces, tracing, kernel modules, clocks, keys, ...), and
 * an allowlist of socket families (everything else EAFNOSUPPORT). */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "sbkit.h"

/* Syscalls numbered 424 and up share one number on every architecture but alpha. */
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#define SYS_io_uring_enter 426
#define SYS_io_uring_register 427
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#define SYS_fsopen 430
#define SYS_fsconfig 431
#define SYS_fsmount 432
#define SYS_fspick 433
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

#if defined(__x86_64__)
#define GLSB_AUDIT_ARCH AUDIT_ARCH_X86_64
#define GLSB_X32_BIT 0x40000000U
#elif defined(__aarch64__)
#define GLSB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static const int denied[] = {
	/* the mount table and the root */
	SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_open_tree, SYS_move_mount,
	SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_mount_setattr,
	/* other processes' memory */
	SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_pidfd_getfd,
	/* the kernel itself */
	SYS_kexec_load, SYS_kexec_file_load, SYS_init_module, SYS_finit_module, SYS_delete_module,
	SYS_bpf, SYS_perf_event_open, SYS_reboot, SYS_swapon, SYS_swapoff, SYS_syslog, SYS_acct,
	SYS_quotactl, SYS_quotactl_fd, SYS_vhangup, SYS_userfaultfd,
	SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
	/* keyrings */
	SYS_keyctl, SYS_add_key, SYS_request_key,
	/* namespaces after start */
	SYS_unshare, SYS_setns, SYS_sethostname, SYS_setdomainname,
	/* clocks */
	SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex,
	/* file handles bypass path checks */
	SYS_open_by_handle_at, SYS_name_to_handle_at,
#ifdef SYS_lookup_dcookie
	SYS_lookup_dcookie,
#endif
#ifdef SYS_iopl
	SYS_iopl,
#endif
#ifdef SYS_ioperm
	SYS_ioperm,
#endif
#ifdef SYS_uselib
	SYS_uselib,
#endif
#ifdef SYS_nfsservctl
	SYS_nfsservctl,
#endif
#ifdef SYS__sysctl
	SYS__sysctl,
#endif
#ifdef SYS_create_module
	SYS_create_module,
#endif
#ifdef SYS_get_kernel_syms
	SYS_get_kernel_syms,
#endif
#ifdef SYS_query_module
	SYS_query_module,
#endif
};

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
		  CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME)
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + (n) * sizeof(uint64_t)) /* little endian */

int glsb_sb_seccomp_rule_count(void)
{
	/* + clone flags, clone3, ioctl, the socket families of socket and socketpair */
	return (int)(sizeof denied / sizeof denied[0]) + 5;
}

int glsb_sb_seccomp_install(void)
{
#ifndef GLSB_AUDIT_ARCH
	errno = ENOSYS;
	return -1;
#else
	struct sock_filter f[2 * sizeof denied / sizeof denied[0] + 32];
	unsigned n = 0;
	const unsigned eperm = SECCOMP_RET_ERRNO | EPERM;

#define EMIT(s) (f[n++] = (struct sock_filter)s)
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GLSB_AUDIT_ARCH, 1, 0));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
#ifdef GLSB_X32_BIT
	/* x32 syscalls reach the same table with this bit set: kill rather than mis-filter. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, GLSB_X32_BIT, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
	for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
		EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)denied[i], 0, 1));
		EMIT(BPF_STMT(BPF_RET | BPF_K, eperm));
	}
	/* clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to
	 * clone, whose flags we can check. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, eperm));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	/* TIOCSTI/TIOCLINUX push input into an inherited terminal: an escape to the host shell. */
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 5));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, eperm));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	/* Socket families: unix, IPv4/IPv6 (in the sandbox's own net namespace; with --network its
	 * tap0 reaches the outside through slirp4netns) and netlink's NETLINK_ROUTE (glibc's getaddrinfo asks it which
	 * address families are configured). Everything else (AF_VSOCK reaches the host's vsock
	 * port space, AF_PACKET, AF_ALG, AF_XDP, other netlink protocols, ...) is EAFNOSUPPORT,
	 * which libraries treat as "not built in". The family is an int: the low word. */
	const unsigned noafs = SECCOMP_RET_ERRNO | EAFNOSUPPORT;
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 1, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socketpair, 0, 10));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 3, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 1, 4));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	EMIT(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)));
	EMIT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0 /* NETLINK_ROUTE */, 0, 1));
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	EMIT(BPF_STMT(BPF_RET | BPF_K, noafs)); /* family, or netlink protocol, not allowed */
	EMIT(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
#undef EMIT

	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0 ? -1 : 0;
#endif
}
