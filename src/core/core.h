/* core.h: what the files of glsb.core share with each other. */
#ifndef GLSB_CORE_H
#define GLSB_CORE_H

#include <lua.h>
#include <lauxlib.h>

/* Each registers its functions into the module table at the top of the stack. */
void glsb_open_loop(lua_State *L);    /* loop.c: now, poll, watch, unwatch */
void glsb_open_http(lua_State *L);    /* http.c: http */
void glsb_open_process(lua_State *L); /* process.c: spawn */
void glsb_open_archive(lua_State *L); /* archive.c: tar_pack, tar_unpack */
void glsb_open_codec(lua_State *L);   /* codec.c: sha256, b64encode, b64decode, crc32 */
void glsb_open_fs(lua_State *L);      /* fs.c: mkdtemp, rmtree, write_file_atomic, realpath, getpid, module_path */

int luaopen_glsb_core(lua_State *L);

#endif
