/* landlock.c: glsb-confine's one Landlock layer: rulesets with the best ABI the kernel offers,
 * and the two policies built on them: the sandbox's (read+exec on the system, read+write on its
 * storage) and `write`'s (writes beneath one root only, installed right before it mutates). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbkit.h"
#include "text.h"

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

int glsb_sb_landlock_begin(struct glsb_sb_landlock *ll, int abi, unsigned flags)
{
	struct glsb_landlock_ruleset_attr attr;
	size_t size = sizeof(uint64_t);

	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = glsb_sb_landlock_fs_rights(abi);
	if (abi >= 4 && (flags & GLSB_LL_HANDLE_NET)) {
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
		size = 2 * sizeof(uint64_t);
	}
	if (abi >= 6 && (flags & GLSB_LL_SCOPE)) {
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		size = sizeof attr;
	}
	/* Older kernels reject a larger struct with E2BIG unless the tail is zero; pass the size
	 * of the fields we use. */
	ll->abi = abi;
	ll->handled = attr.handled_access_fs;
	ll->fd = (int)glsb_sys_landlock_create_ruleset(&attr, size, 0);
	return ll->fd < 0 ? -1 : 0;
}

int glsb_sb_landlock_allow_fd(struct glsb_sb_landlock *ll, int fd, uint64_t access)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;

	memset(&pb, 0, sizeof pb);
	pb.parent_fd = fd;
	pb.allowed_access = access & ll->handled;
	/* Directory-only rights on a file are EINVAL: keep file rights for non-directories. */
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
				     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
				     LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return glsb_sys_landlock_add_rule(ll->fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0 ? -1 : 0;
}

int glsb_sb_landlock_allow(struct glsb_sb_landlock *ll, const char *path, uint64_t access)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = glsb_sb_landlock_allow_fd(ll, fd, access);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
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

/* --- the sandbox's policy ------------------------------------------------------------------ */

int glsb_sb_landlock_sandbox(int abi, const struct glsb_sb_ll_path *extra, int nextra, char *why,
			     size_t whylen)
{
	static const struct glsb_sb_ll_path rules[] = {
		{"/", GLSB_LL_READ},
		{"/usr", GLSB_LL_RX},
		{"/dev", GLSB_LL_READ | GLSB_LL_DEV},
		{"/tmp", GLSB_LL_RW},
		{"/home/user", GLSB_LL_RW},
		{"/files", GLSB_LL_RW},
	};
	/* Real directories among /lib*, /bin, /sbin (not merged into /usr). */
	static const char *const top[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
	struct glsb_sb_landlock ll;

	/* Network rights (ABI 4) stay unhandled: the net namespace already isolates, and handling
	 * TCP connect would also break loopback servers inside the sandbox. Abstract unix sockets
	 * are per net namespace (the sandbox always has its own); the scope keeps them out too. */
	if (glsb_sb_landlock_begin(&ll, abi, GLSB_LL_SCOPE) < 0) {
		glsb_fmt(why, whylen, "landlock ruleset (ABI %d): %s", abi, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
		if (glsb_sb_landlock_allow(&ll, rules[i].path, rules[i].access) < 0) {
			glsb_fmt(why, whylen, "landlock rule %s: %s", rules[i].path, strerror(errno));
			goto fail;
		}
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
		struct stat st;
		if (lstat(top[i], &st) == 0 && S_ISDIR(st.st_mode) &&
		    glsb_sb_landlock_allow(&ll, top[i], GLSB_LL_RX) < 0) {
			glsb_fmt(why, whylen, "landlock rule %s: %s", top[i], strerror(errno));
			goto fail;
		}
	}
	for (int i = 0; i < nextra; i++)
		if (glsb_sb_landlock_allow(&ll, extra[i].path, extra[i].access) < 0) {
			glsb_fmt(why, whylen, "landlock rule %s: %s", extra[i].path, strerror(errno));
			goto fail;
		}
	if (glsb_sb_landlock_enforce(&ll) < 0) {
		glsb_fmt(why, whylen, "landlock restrict_self: %s", strerror(errno));
		return -1;
	}
	return 0;
fail:
	glsb_sb_landlock_abort(&ll);
	return -1;
}

/* --- `write`'s policy ---------------------------------------------------------------------- */

int glsb_sb_landlock_confine_writes(int rootfd, int abi, char *why, size_t whylen)
{
	struct glsb_sb_landlock ll;

	if (abi < 3) {
		glsb_fmt(why, whylen, "Landlock ABI %d is too old (3 or newer handles REFER and TRUNCATE)", abi);
		return -1;
	}
	/* Everything is handled (TCP bind/connect too from ABI 4, signals and abstract sockets
	 * scoped from ABI 6); the only rule is what a write needs beneath the root. */
	if (glsb_sb_landlock_begin(&ll, abi, GLSB_LL_HANDLE_NET | GLSB_LL_SCOPE) < 0) {
		glsb_fmt(why, whylen, "landlock_create_ruleset: %s", strerror(errno));
		return -1;
	}
	const uint64_t access = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
				LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |
				LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_REFER |
				LANDLOCK_ACCESS_FS_TRUNCATE;
	if (glsb_sb_landlock_allow_fd(&ll, rootfd, access) < 0) {
		glsb_fmt(why, whylen, "landlock_add_rule on the root: %s", strerror(errno));
	} else if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		glsb_fmt(why, whylen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	} else if (glsb_sb_landlock_enforce(&ll) < 0) {
		glsb_fmt(why, whylen, "landlock_restrict_self: %s", strerror(errno));
		return -1;
	} else {
		return 0;
	}
	glsb_sb_landlock_abort(&ll);
	return -1;
}
