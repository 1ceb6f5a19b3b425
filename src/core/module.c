/* module.c: luaopen_glsb_core, the one entry point that registers every part of the core. */
#include "core.h"

int luaopen_glsb_core(lua_State *L)
{
	lua_newtable(L);
	glsb_open_loop(L);
	glsb_open_framer(L);
	glsb_open_process(L);
	glsb_open_codec(L);
	glsb_open_fs(L);
	glsb_open_random(L);
	glsb_open_codes(L);
	glsb_open_stdio(L);
	glsb_open_load(L);
	glsb_open_buffer(L);
	glsb_open_parts(L); /* http, archives, redis, digests: loaded on first use */
	lua_pushliteral(L, "glsb.core");
	lua_setfield(L, -2, "_NAME");
	return 1;
}
