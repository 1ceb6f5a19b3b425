/* ws_landlock.c: the Landlock domain `write` installs right before it mutates;
 * raw syscalls and our own copies of the uapi structs, so any header set works. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ws_landlock.h"

/* Facts from linux/landlock.h (Documentation/userspace-api/landlock.rst). */
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)     /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)  /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

/* struct landlock_ruleset_attr grows with the ABI; the size passed tells the
 * kernel which fields we know. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

int glsb_ws_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	return abi < 0 ? 0 : (int)abi;
}

int glsb_ws_landlock_confine_writes(int rootfd, int abi, char *why, size_t whylen)
{
	if (abi < 3) {
		snprintf(why, whylen, "Landlock ABI %d is too old (3 or newer handles REFER and TRUNCATE)", abi);
		return -1;
	}
	struct ll_ruleset_attr attr = {0};
	size_t attr_size = offsetof(struct ll_ruleset_attr, handled_access_net);
	attr.handled_access_fs = LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_READ_DIR |
				 LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_CHAR | LL_FS_MAKE_DIR |
				 LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_MAKE_BLOCK |
				 LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_TRUNCATE;
	if (abi >= 4) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		attr_size = offsetof(struct ll_ruleset_attr, scoped);
	}
	if (abi >= 5)
		attr.handled_access_fs |= LL_FS_IOCTL_DEV;
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
		attr_size = sizeof attr;
	}
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0U);
	if (rs < 0) {
		snprintf(why, whylen, "landlock_create_ruleset: %s", strerror(errno));
		return -1;
	}
	struct ll_path_beneath_attr rule = {
		.allowed_access = LL_FS_WRITE_FILE | LL_FS_READ_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR |
				  LL_FS_MAKE_REG | LL_FS_REFER | LL_FS_TRUNCATE,
		.parent_fd = rootfd,
	};
	int ret = -1;
	if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &rule, 0U) < 0)
		snprintf(why, whylen, "landlock_add_rule on the root: %s", strerror(errno));
	else if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		snprintf(why, whylen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	else if (syscall(SYS_landlock_restrict_self, rs, 0U) < 0)
		snprintf(why, whylen, "landlock_restrict_self: %s", strerror(errno));
	else
		ret = 0;
	close(rs);
	return ret;
}
