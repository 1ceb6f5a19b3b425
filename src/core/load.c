/* load.c: loading glsb's Lua modules from their precompiled bytecode.
 *
 * Parsing glsb's Lua (some 400 KB for a script that creates one local sandbox) took about 10 ms of every
 * glsb-lua start; loading the same modules from bytecode made at build or install time takes under 1 ms.
 * glsb-lua registers its module folders with glsb_load_add_root(source folder, bytecode folder): a source
 * file <source folder>/a/b.lua has its bytecode at <bytecode folder>/a/b.luac. A module is loaded from
 * that bytecode only when all of these hold, else from its source, as plain Lua would:
 *   - the bytecode file is not older than the source (an edited checkout runs what was edited);
 *   - this liblua can load it (a bytecode of another Lua version fails to load: the source is used);
 *   - the chunk's own name is "@" + the source's path, so debug.getinfo and the modules that find files
 *     beside themselves (glsb.fs.source_dir) see the source's path (a moved tree runs from source).
 * A module outside the registered folders (GLSB_PATH providers, the user's own) always runs from source.
 * Nothing here changes what a module does; only how long it takes to load. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

#define MAX_ROOTS 4
#define ROOT_MAX 1024

static struct {
	char src[ROOT_MAX];
	char bc[ROOT_MAX];
	size_t src_len;
} roots[MAX_ROOTS];
static int nroots;

int glsb_load_add_root(const char *src, const char *bc)
{
	size_t sl = strlen(src), bl = strlen(bc);
	if (nroots >= MAX_ROOTS || sl == 0 || sl >= ROOT_MAX || bl >= ROOT_MAX)
		return -1;
	memcpy(roots[nroots].src, src, sl + 1);
	memcpy(roots[nroots].bc, bc, bl + 1);
	roots[nroots].src_len = sl;
	nroots++;
	return 0;
}

static int newer_or_same(const struct stat *a, const struct stat *b)
{
	if (a->st_mtim.tv_sec != b->st_mtim.tv_sec)
		return a->st_mtim.tv_sec > b->st_mtim.tv_sec;
	return a->st_mtim.tv_nsec >= b->st_mtim.tv_nsec;
}

/* Reads the whole file at fd (size bytes) and loads it as a binary chunk named name. */
static int load_fd(lua_State *L, int fd, size_t size, const char *name)
{
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	int ok = got == size && luaL_loadbufferx(L, buf, size, name, "b") == LUA_OK;
	free(buf);
	if (!ok && got == size)
		lua_pop(L, 1); /* the load's message: the source is loaded instead */
	return ok;
}

/* Pushes the function of path's fresh bytecode and returns 1, or pushes nothing and returns 0.
 * src: path's own stat. One open, fstat and read of the bytecode file (luaL_loadfilex opens a binary
 * chunk twice and reads it by getc: 15 us for a small module against 3 here). */
static int load_bytecode(lua_State *L, const char *path, const struct stat *src)
{
	size_t len = strlen(path);
	if (len < 5 || strcmp(path + len - 4, ".lua") != 0)
		return 0;
	for (int i = 0; i < nroots; i++) {
		size_t sl = roots[i].src_len;
		if (len <= sl || strncmp(path, roots[i].src, sl) != 0 || path[sl] != '/')
			continue;
		char bc[ROOT_MAX * 2 + 8];
		int n = snprintf(bc, sizeof bc, "%s%.*sc", roots[i].bc, (int)(len - sl), path + sl);
		if (n < 0 || (size_t)n >= sizeof bc)
			return 0;
		int fd = open(bc, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 0;
		struct stat bst;
		int ok = fstat(fd, &bst) == 0 && S_ISREG(bst.st_mode) && newer_or_same(&bst, src) &&
			 load_fd(L, fd, (size_t)bst.st_size, path);
		close(fd);
		if (!ok)
			return 0;
		lua_Debug ar;
		lua_pushvalue(L, -1);
		lua_getinfo(L, ">S", &ar);
		if (ar.source[0] != '@' || strcmp(ar.source + 1, path) != 0) {
			lua_pop(L, 1);
			return 0;
		}
		return 1;
	}
	return 0;
}

/* Loads path (source or bytecode, as loadfile) into a function on the stack -> LUA_OK, else pushes
 * the message and returns the status. */
static int load_path(lua_State *L, const char *path, const struct stat *st)
{
	struct stat own;
	if (!st && nroots > 0 && stat(path, &own) == 0)
		st = &own;
	if (st && load_bytecode(L, path, st))
		return LUA_OK;
	return luaL_loadfilex(L, path, NULL);
}

/* core.loadfile(path) -> function, or nil, message: loadfile(path), from the bytecode glsb-lua made for it
 * when it is fresh (above). */
static int l_loadfile(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	if (load_path(L, path, NULL) == LUA_OK)
		return 1;
	lua_pushnil(L);
	lua_insert(L, -2);
	return 2;
}

/* template with every '?' replaced by module (its dots already made slashes) into out -> its length, or
 * 0 when it does not fit. */
static size_t fill(char *out, size_t size, const char *template, size_t tlen, const char *module)
{
	size_t o = 0, mlen = strlen(module);
	for (size_t i = 0; i < tlen; i++) {
		if (template[i] == *LUA_PATH_MARK) {
			if (o + mlen >= size)
				return 0;
			memcpy(out + o, module, mlen);
			o += mlen;
		} else {
			if (o + 1 >= size)
				return 0;
			out[o++] = template[i];
		}
	}
	out[o] = '\0';
	return o;
}

/* package.searchpath's walk over path for name (a template's file is found when it opens for reading),
 * keeping the file's stat. Pushes the file name and returns 1, or pushes searchpath's list of the files
 * tried ("no file 'x'\n\tno file 'y'") and returns 0. */
static int find_file(lua_State *L, const char *name, const char *path, struct stat *st)
{
	char module[PATH_MAX], file[PATH_MAX];
	size_t nlen = strlen(name);
	if (nlen >= sizeof module)
		nlen = sizeof module - 1;
	for (size_t i = 0; i < nlen; i++)
		module[i] = name[i] == '.' ? *LUA_DIRSEP : name[i];
	module[nlen] = '\0';
	for (int pass = 0; pass < 2; pass++) {
		luaL_Buffer tried;
		int first = 1;
		if (pass == 1)
			luaL_buffinit(L, &tried);
		for (const char *p = path;;) {
			const char *end = strchr(p, *LUA_PATH_SEP);
			size_t n = end ? (size_t)(end - p) : strlen(p);
			if (n > 0 && fill(file, sizeof file, p, n, module) > 0) {
				if (pass == 0) {
					int fd = open(file, O_RDONLY | O_CLOEXEC);
					if (fd >= 0) {
						if (fstat(fd, st) != 0)
							memset(st, 0, sizeof *st);
						close(fd);
						lua_pushstring(L, file);
						return 1;
					}
				} else {
					if (!first)
						luaL_addstring(&tried, "\n\t");
					first = 0;
					luaL_addstring(&tried, "no file '");
					luaL_addstring(&tried, file);
					luaL_addstring(&tried, "'");
				}
			}
			if (!end)
				break;
			p = end + 1;
		}
		if (pass == 1)
			luaL_pushresult(&tried);
	}
	return 0;
}

/* package.searchers' Lua-file searcher, as Lua's own (package.path walked as package.searchpath does),
 * loading through load_path. Upvalue 1: the package table. */
static int searcher_lua(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	lua_getfield(L, lua_upvalueindex(1), "path");
	const char *path = lua_tostring(L, -1);
	if (!path)
		return luaL_error(L, "'package.path' must be a string");
	struct stat st;
	if (!find_file(L, name, path, &st))
		return 1; /* the files tried */
	const char *filename = lua_tostring(L, -1);
	if (load_path(L, filename, &st) != LUA_OK)
		return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, filename,
				  lua_tostring(L, -1));
	lua_insert(L, -2);
	return 2;
}

void glsb_load_install_searcher(lua_State *L)
{
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "searchers");
	lua_pushvalue(L, -2);
	lua_pushcclosure(L, searcher_lua, 1);
	lua_rawseti(L, -2, 2); /* Lua's own file searcher is the second: preload, Lua files, C, all-in-one */
	lua_pop(L, 2);
}

void glsb_open_load(lua_State *L)
{
	lua_pushcfunction(L, l_loadfile);
	lua_setfield(L, -2, "loadfile");
}
