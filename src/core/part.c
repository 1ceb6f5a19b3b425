/* part.c: the core's heavy parts (libcurl, libarchive, hiredis and libssl, libcrypto) load on first use. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "fs.h"

/*
 * A part is a shared object beside the core, core_<name>.so, holding the files that need a big library.
 * Until one of its functions is called the core table holds a stub for it: the first call loads the
 * part, which registers its real functions in the table, and the call goes through. A process that
 * never makes a request never maps libcurl and its ~30 dependencies (glsb-lua starts like lua5.4).
 * Where a part is linked into the same binary (the C tests, sanitizer builds) its open function is
 * found as a weak symbol and called directly.
 *
 * A part resolves the core's own symbols (the loop, the framers, the code table) from the global scope:
 * glsb-lua exports them (-rdynamic); a core.so that plain Lua loaded RTLD_LOCAL is promoted to the
 * global scope before its first part is opened.
 */

#define WEAK __attribute__((weak))
void glsb_open_http(lua_State *L) WEAK;
void glsb_open_archive(lua_State *L) WEAK;
void glsb_open_redis(lua_State *L) WEAK;
void glsb_open_digest(lua_State *L) WEAK;

static struct part {
	const char *name;
	void (*linked)(lua_State *L); /* the open function when linked in, else NULL */
	const char *functions[4];
	void (*open)(lua_State *L);   /* once found: the part's glsb_open_<name> */
} parts[] = {
	{"http", glsb_open_http, {"http"}, NULL},
	{"archive", glsb_open_archive, {"tar_pack", "tar_unpack"}, NULL},
	{"redis", glsb_open_redis, {"redis_connect"}, NULL},
	{"digest", glsb_open_digest, {"sha256", "hmac_sha256", "sha256_stream"}, NULL},
};

/* Finds and opens part p (process-wide, once). Raises naming every place tried. */
static void find_part(lua_State *L, struct part *p)
{
	static const char *const beside[] = {"", "/lib/glsb", "/../lib/lua/" LUA_VERSION_MAJOR "." LUA_VERSION_MINOR "/glsb"};
	char self[PATH_MAX], path[PATH_MAX + 64], sym[64];
	luaL_Buffer tried;
	Dl_info info;
	int top = lua_gettop(L);

	if (p->linked) {
		p->open = p->linked;
		return;
	}
	if (!glsb_core_file(self))
		luaL_error(L, "glsb.core: cannot find the file holding the core, so not its %s part", p->name);
	/* Plain Lua loads core.so RTLD_LOCAL: make its symbols visible to the part. */
	if (dladdr((void *)find_part, &info) && info.dli_fname)
		(void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(sym, sizeof sym, "glsb_open_%s", p->name);
	luaL_buffinit(L, &tried);
	for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
		snprintf(path, sizeof path, "%s%s/core_%s.so", self, beside[i], p->name);
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			luaL_addstring(&tried, "\n\t");
			luaL_addstring(&tried, dlerror());
			continue;
		}
		int *abi = dlsym(h, "glsb_part_abi");
		*(void **)&p->open = dlsym(h, sym);
		if (p->open && abi && *abi == GLSB_PART_ABI) {
			lua_settop(L, top); /* the buffer */
			return;
		}
		p->open = NULL;
		luaL_addstring(&tried, "\n\t");
		luaL_addstring(&tried, path);
		luaL_addstring(&tried, abi ? ": built for another version of the core" : ": not a glsb.core part");
		dlclose(h);
	}
	luaL_pushresult(&tried);
	luaL_error(L, "glsb.core: cannot load its %s part (core_%s.so):%s", p->name, p->name, lua_tostring(L, -1));
}

/* The stub of one part function: upvalues part index, function name, the core table. */
static int stub(lua_State *L)
{
	int nargs = lua_gettop(L);
	struct part *p = &parts[lua_tointeger(L, lua_upvalueindex(1))];
	const char *fn = lua_tostring(L, lua_upvalueindex(2));

	lua_getfield(L, lua_upvalueindex(3), fn);
	if (lua_tocfunction(L, -1) == stub) {
		lua_pop(L, 1);
		if (!p->open)
			find_part(L, p);
		lua_pushvalue(L, lua_upvalueindex(3));
		p->open(L); /* registers the part's functions into the table on top */
		lua_getfield(L, -1, fn);
		lua_remove(L, -2);
		if (lua_tocfunction(L, -1) == stub)
			return luaL_error(L, "glsb.core: the %s part has no function %s", p->name, fn);
	}
	lua_insert(L, 1);
	lua_call(L, nargs, LUA_MULTRET);
	return lua_gettop(L);
}

void glsb_open_parts(lua_State *L)
{
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		for (size_t k = 0; k < sizeof parts[i].functions / sizeof parts[i].functions[0]; k++) {
			const char *fn = parts[i].functions[k];
			if (!fn)
				break;
			lua_pushinteger(L, (lua_Integer)i);
			lua_pushstring(L, fn);
			lua_pushvalue(L, -3); /* the core table */
			lua_pushcclosure(L, stub, 3);
			lua_setfield(L, -2, fn);
		}
	}
}
