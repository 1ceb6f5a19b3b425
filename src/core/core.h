/* core.h: what the files of glsb.core share with each other. */
#ifndef GLSB_CORE_H
#define GLSB_CORE_H

#include <lua.h>
#include <lauxlib.h>

/* Each registers its functions into the module table at the top of the stack. */
void glsb_open_loop(lua_State *L);    /* loop.c: now, realtime_ns, poll, watch, unwatch */
void glsb_open_framer(lua_State *L);  /* framer.c: decode_frames */
void glsb_open_process(lua_State *L); /* process.c: spawn */
void glsb_open_codec(lua_State *L);   /* codec.c: b64encode, b64decode, crc32 */
void glsb_open_fs(lua_State *L);      /* fs.c: mkdtemp, rmtree, write_file_atomic, realpath, getpid, module_path, ... */
void glsb_open_random(lua_State *L);  /* random.c: random_bytes (getrandom(2)) */
void glsb_open_codes(lua_State *L);   /* codes.c: codes */
void glsb_open_stdio(lua_State *L);   /* stdio.c: take_stdio, fd_read, fd_write, close_fd, signal_fd */
void glsb_open_parts(lua_State *L);   /* part.c: a stub for each function of the parts below */
void glsb_open_load(lua_State *L);    /* load.c: loadfile (from precompiled bytecode when fresh) */
void glsb_open_buffer(lua_State *L);  /* buffer.c: buffer (bytes outside the Lua heap that reads land in) */

/* load.c: glsb-lua's module folders and their bytecode folders (<src>/a/b.lua -> <bc>/a/b.luac), and
 * package.searchers' Lua-file searcher that loads through them. */
int glsb_load_add_root(const char *src, const char *bc);
void glsb_load_install_searcher(lua_State *L);

/* The parts (part.c): each a shared object of its own, loaded on first use, and each built with
 * GLSB_PART_DEFINE(name) in one of its files. A change in what parts use of the core bumps the ABI. */
#define GLSB_PART_ABI 1
extern const int glsb_part_abi;
/* weak: parts linked together into one binary (the C tests) define it once each, harmlessly */
#define GLSB_PART_DEFINE() __attribute__((weak)) const int glsb_part_abi = GLSB_PART_ABI
void glsb_open_http(lua_State *L);    /* core_http.so (http.c, multi.c; libcurl): http */
void glsb_open_archive(lua_State *L); /* core_archive.so (archive.c; libarchive): tar_pack, tar_unpack */
void glsb_open_redis(lua_State *L);   /* core_redis.so (redis.c; hiredis, libssl): redis_connect */
void glsb_open_digest(lua_State *L);  /* core_digest.so (digest.c; libcrypto): sha256, hmac_sha256, sha256_stream */

int luaopen_glsb_core(lua_State *L);

/* class.c: a userdata class: metatable `name` with `methods` (looked up by glsb_method from the
 * class's own __index, which serves its fields first), __gc and __close both `close`. */
void glsb_new_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction index,
		    lua_CFunction close);
/* Pushes the method `key` of class `name` (nil when none); returns 1, for use as __index's tail. */
int glsb_method(lua_State *L, const char *name, const char *key);

#endif
