/* landlock.c: build and enforce a Landlock ruleset with the best ABI the kernel offers. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbkit.h"

int glsb_sb_landlock_abi(void)
{
	long abi = glsb_sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi < 0 ? 0 : (int)abi;
}

uint64_t glsb_sb_landlock_fs_rights(int abi)
{
	uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

int glsb_sb_landlock_begin(struct glsb_sb_landlock *ll, int abi, int scope)
{
	struct glsb_landlock_ruleset_attr attr;
	size_t size;

	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = glsb_sb_landlock_fs_rights(abi);
	/* Network rights (ABI 4) stay unhandled: the net namespace already isolates, and handling
	 * TCP connect would also break loopback servers inside the sandbox. */
	if (abi >= 6 && scope)
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	/* Older kernels reject a larger struct with E2BIG unless the tail is zero; pass the size
	 * of the ABI we target. */
	size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
	ll->abi = abi;
	ll->handled = attr.handled_access_fs;
	ll->fd = (int)glsb_sys_landlock_create_ruleset(&attr, size, 0);
	return ll->fd < 0 ? -1 : 0;
}

int glsb_sb_landlock_allow(struct glsb_sb_landlock *ll, const char *path, uint64_t access)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;

	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -1;
	memset(&pb, 0, sizeof pb);
	pb.parent_fd = fd;
	pb.allowed_access = access & ll->handled;
	/* Directory-only rights on a file are EINVAL: keep file rights for non-directories. */
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
				     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
				     LANDLOCK_ACCESS_FS_IOCTL_DEV;
	long rc = glsb_sys_landlock_add_rule(ll->fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc < 0 ? -1 : 0;
}

int glsb_sb_landlock_enforce(struct glsb_sb_landlock *ll)
{
	long rc = glsb_sys_landlock_restrict_self(ll->fd, 0);
	int saved = errno;
	close(ll->fd);
	ll->fd = -1;
	errno = saved;
	return rc < 0 ? -1 : 0;
}

void glsb_sb_landlock_abort(struct glsb_sb_landlock *ll)
{
	if (ll->fd >= 0)
		close(ll->fd);
	ll->fd = -1;
}
