/* random.c: random bytes from the kernel's generator (getrandom(2)), with no file descriptor to leak. */
#include <errno.h>
#include <sys/random.h>

#include "codes.h"
#include "core.h"

#define RANDOM_MAX (1 << 20) /* one call's ceiling: callers want ids, not bulk data */

/* core.random_bytes(n) -> n bytes (0 <= n <= 1 MiB), or nil, message, CODE when the kernel cannot give
 * them (ENOSYS before Linux 3.17). getrandom blocks only until the pool is first initialised at boot. */
static int l_random_bytes(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	luaL_Buffer b;
	char *out;
	size_t got = 0;

	luaL_argcheck(L, n >= 0 && n <= RANDOM_MAX, 1, "must be 0 .. 1048576");
	out = luaL_buffinitsize(L, &b, (size_t)n);
	while (got < (size_t)n) {
		ssize_t r = getrandom(out + got, (size_t)n - got, 0);
		if (r < 0) {
			int err = errno;
			if (err == EINTR)
				continue;
			return glsb_push_failure(L, "random_bytes: getrandom failed", glsb_errno_code(err));
		}
		got += (size_t)r;
	}
	luaL_pushresultsize(&b, (size_t)n);
	return 1;
}

void glsb_open_random(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"random_bytes", l_random_bytes},
		{NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
