/* class.c: userdata classes: a named metatable with methods, __index, __gc and __close. */
#include "core.h"

void glsb_new_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction index,
		    lua_CFunction close)
{
	if (luaL_newmetatable(L, name)) {
		lua_newtable(L);
		luaL_setfuncs(L, methods, 0);
		lua_setfield(L, -2, "methods");
		lua_pushcfunction(L, index);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, close);
		lua_setfield(L, -2, "__gc");
		lua_pushcfunction(L, close);
		lua_setfield(L, -2, "__close");
	}
	lua_pop(L, 1);
}

int glsb_method(lua_State *L, const char *name, const char *key)
{
	luaL_getmetatable(L, name);
	lua_getfield(L, -1, "methods");
	lua_getfield(L, -1, key);
	return 1;
}
