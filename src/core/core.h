/* core.h: what the files of glsb.core share with each other. */
#ifndef GLSB_CORE_H
#define GLSB_CORE_H

#include <lua.h>
#include <lauxlib.h>

/* Each registers its functions into the module table at the top of the stack. */
void glsb_open_loop(lua_State *L);    /* loop.c: now, poll, watch, unwatch */
void glsb_open_http(lua_State *L);    /* http.c: http */
void glsb_open_framer(lua_State *L);  /* framer.c: decode_frames */
void glsb_open_process(lua_State *L); /* process.c: spawn */
void glsb_open_archive(lua_State *L); /* archive.c: tar_pack, tar_unpack */
void glsb_open_codec(lua_State *L);   /* codec.c: sha256, hmac_sha256, b64encode, b64decode, crc32 */
void glsb_open_fs(lua_State *L);      /* fs.c: mkdtemp, rmtree, write_file_atomic, realpath, getpid, module_path */
void glsb_open_codes(lua_State *L);   /* codes.c: codes */
void glsb_open_redis(lua_State *L);   /* redis.c: redis_connect */

int luaopen_glsb_core(lua_State *L);

/* class.c: a userdata class: metatable `name` with `methods` (looked up by glsb_method from the
 * class's own __index, which serves its fields first), __gc and __close both `close`. */
void glsb_new_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction index,
		    lua_CFunction close);
/* Pushes the method `key` of class `name` (nil when none); returns 1, for use as __index's tail. */
int glsb_method(lua_State *L, const char *name, const char *key);

#endif
