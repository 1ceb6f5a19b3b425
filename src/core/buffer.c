/* buffer.c: a byte buffer outside the Lua heap that reads land in, made into one Lua string at the end.
 *
 * A 100 MB download read as 1 MiB Lua strings and joined was copied three times (the read's buffer into
 * each piece, the pieces into the join) and its fresh pages faulted in twice: most of its time. Reads go
 * straight into one of these (proc:read(which, max, buffer)), and buffer:take() makes the one string.
 * Its memory is mapped, not allocated: untouched capacity costs address space only (a buffer the size of
 * the largest download allowed is cheap until bytes arrive). Kept and filled again (take and clear give
 * its pages back lazily), it is not faulted in again: the local provider keeps one per sandbox.
 *
 *   core.buffer(capacity) -> buffer       capacity 0 .. 2^40 bytes
 *   buffer:len() -> bytes held            buffer:capacity() -> capacity
 *   buffer:append(s[, i[, j]])            s:sub(i, j) appended (raises past the capacity)
 *   buffer:sub(i, j) -> string            a copy of bytes i..j (as string.sub, positive indices)
 *   buffer:find(s[, init]) -> position    plain find of s from init (default 1), or nil
 *   buffer:take([from]) -> string         bytes from..len as one string (default 1); the buffer is then
 *                                         empty, its pages given back lazily (MADV_FREE): refilled before
 *                                         the kernel needs them, they are neither faulted nor zeroed again
 *   buffer:clear()                        empties it, its pages given back lazily as by take
 *   buffer:close()                        unmaps it (also __gc, __close); a closed buffer holds 0 bytes
 */
#include <string.h>
#include <sys/mman.h>

#include "buffer.h"
#include "core.h"

#define BUFFER_MT "glsb.Buffer"
#define MAX_CAPACITY ((size_t)1 << 40)

struct glsb_buffer *glsb_check_buffer(lua_State *L, int idx)
{
	return luaL_checkudata(L, idx, BUFFER_MT);
}

static void release(struct glsb_buffer *b)
{
	if (b->data && b->cap > 0)
		munmap(b->data, b->cap);
	b->data = NULL;
	b->cap = b->len = 0;
}

static int l_buffer(lua_State *L)
{
	lua_Integer cap = luaL_checkinteger(L, 1);
	luaL_argcheck(L, cap >= 0 && (size_t)cap <= MAX_CAPACITY, 1, "capacity must be in 0..2^40");
	struct glsb_buffer *b = lua_newuserdatauv(L, sizeof *b, 0);
	b->data = NULL;
	b->cap = b->len = 0;
	luaL_setmetatable(L, BUFFER_MT);
	if (cap > 0) {
		void *m = mmap(NULL, (size_t)cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
		if (m == MAP_FAILED)
			return luaL_error(L, "buffer: cannot map %I bytes", cap);
		b->data = m;
		b->cap = (size_t)cap;
	}
	return 1;
}

static int l_len(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)glsb_check_buffer(L, 1)->len);
	return 1;
}

static int l_capacity(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)glsb_check_buffer(L, 1)->cap);
	return 1;
}

/* 1-based i..j of a length-n sequence, string.sub's way for positive and negative indices -> start, count */
static void range(lua_Integer n, lua_Integer i, lua_Integer j, size_t *start, size_t *count)
{
	if (i < 0)
		i = n + i + 1;
	if (j < 0)
		j = n + j + 1;
	if (i < 1)
		i = 1;
	if (j > n)
		j = n;
	*start = (size_t)(i - 1);
	*count = i > j ? 0 : (size_t)(j - i + 1);
}

static int l_append(lua_State *L)
{
	struct glsb_buffer *b = glsb_check_buffer(L, 1);
	size_t n;
	const char *s = luaL_checklstring(L, 2, &n);
	size_t start, count;
	range((lua_Integer)n, luaL_optinteger(L, 3, 1), luaL_optinteger(L, 4, -1), &start, &count);
	luaL_argcheck(L, count <= b->cap - b->len, 2, "more than the buffer's capacity");
	if (count > 0)
		memcpy(b->data + b->len, s + start, count);
	b->len += count;
	return 0;
}

static int l_sub(lua_State *L)
{
	struct glsb_buffer *b = glsb_check_buffer(L, 1);
	size_t start, count;
	range((lua_Integer)b->len, luaL_checkinteger(L, 2), luaL_checkinteger(L, 3), &start, &count);
	lua_pushlstring(L, count ? b->data + start : "", count);
	return 1;
}

static int l_find(lua_State *L)
{
	struct glsb_buffer *b = glsb_check_buffer(L, 1);
	size_t n;
	const char *s = luaL_checklstring(L, 2, &n);
	lua_Integer init = luaL_optinteger(L, 3, 1);
	luaL_argcheck(L, init >= 1, 3, "init must be >= 1");
	if (n == 0 || (size_t)init > b->len || n > b->len - (size_t)(init - 1))
		return 0;
	const char *hit = memmem(b->data + init - 1, b->len - (size_t)(init - 1), s, n);
	if (!hit)
		return 0;
	lua_pushinteger(L, (lua_Integer)(hit - b->data) + 1);
	return 1;
}

static int l_take(lua_State *L)
{
	struct glsb_buffer *b = glsb_check_buffer(L, 1);
	lua_Integer from = luaL_optinteger(L, 2, 1);
	luaL_argcheck(L, from >= 1 && (size_t)from <= b->len + 1, 2, "from must be in 1..len+1");
	size_t n = b->len - (size_t)(from - 1);
	lua_pushlstring(L, n ? b->data + from - 1 : "", n);
	if (b->len > 0)
		madvise(b->data, b->len, MADV_FREE); /* best effort: the pages stay ours until memory is short */
	b->len = 0;
	return 1;
}

static int l_clear(lua_State *L)
{
	struct glsb_buffer *b = glsb_check_buffer(L, 1);
	if (b->len > 0)
		madvise(b->data, b->len, MADV_FREE);
	b->len = 0;
	return 0;
}

static int l_close(lua_State *L)
{
	release(glsb_check_buffer(L, 1));
	return 0;
}

static int l_index(lua_State *L)
{
	glsb_check_buffer(L, 1);
	return glsb_method(L, BUFFER_MT, luaL_checkstring(L, 2));
}

void glsb_open_buffer(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"len", l_len}, {"capacity", l_capacity}, {"append", l_append}, {"sub", l_sub},
		{"find", l_find}, {"take", l_take}, {"clear", l_clear}, {"close", l_close},
		{NULL, NULL},
	};
	glsb_new_class(L, BUFFER_MT, methods, l_index, l_close);
	lua_pushcfunction(L, l_buffer);
	lua_setfield(L, -2, "buffer");
}
