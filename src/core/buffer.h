/* buffer.h: the byte buffer of buffer.c, which reads land in (process.c's read into a buffer). */
#ifndef GLSB_BUFFER_H
#define GLSB_BUFFER_H

#include <stddef.h>

#include <lua.h>

struct glsb_buffer {
	char *data; /* mapped, cap bytes; NULL when closed or of capacity 0 */
	size_t len, cap;
};

/* The buffer at idx, or raises as luaL_checkudata. */
struct glsb_buffer *glsb_check_buffer(lua_State *L, int idx);

#endif
