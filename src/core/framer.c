/* framer.c: the framer registry (framer_list.h), the calls every framer answers, and core.decode_frames. */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "framer.h"

#define GLSB_FRAMER(name) extern const struct glsb_framer_type glsb_framer_##name;
#include "framer_list.h"
#undef GLSB_FRAMER

static const struct glsb_framer_type *const types[] = {
#define GLSB_FRAMER(name) &glsb_framer_##name,
#include "framer_list.h"
#undef GLSB_FRAMER
};

glsb_framer *glsb_framer_new(const char *name, size_t max_frame)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		if (strcmp(types[i]->name, name) != 0)
			continue;
		glsb_framer *f = calloc(1, types[i]->size);
		if (!f)
			return NULL;
		f->type = types[i];
		f->max_frame = max_frame;
		return f;
	}
	return NULL;
}

int glsb_framer_set_oversized(glsb_framer *f, enum glsb_oversized policy)
{
	if (policy != GLSB_OVERSIZED_FAIL && !f->type->can_cut)
		return -1;
	f->oversized = policy;
	return 0;
}

int glsb_framer_feed(glsb_framer *f, const char *s, size_t n, glsb_frame_queue *q)
{
	if (f->error)
		return -1;
	return f->type->feed(f, s, n, q);
}

int glsb_framer_finish(glsb_framer *f, glsb_frame_queue *q)
{
	if (f->error)
		return -1;
	return f->type->finish(f, q);
}

void glsb_framer_push_frames(lua_State *L, const glsb_framer *f, glsb_frame_queue *q)
{
	lua_createtable(L, (int)q->count, 0);
	lua_Integer i = 0;
	for (glsb_frame *fr = q->head; fr; fr = fr->next) {
		f->type->push(L, fr);
		lua_rawseti(L, -2, ++i);
	}
	glsb_queue_clear(q);
}

const char *glsb_framer_error(const glsb_framer *f)
{
	return glsb_code_name(f->error);
}

void glsb_framer_free(glsb_framer *f)
{
	if (!f)
		return;
	if (f->type->free)
		f->type->free(f);
	glsb_buf_free(&f->pending);
	free(f);
}

/* What decode_frames holds while it works, owned by a userdata so that a Lua error (out of memory
 * while building the result) still frees it. */
typedef struct {
	glsb_framer *framer;
	glsb_frame_queue q;
} decode_state;

static int decode_state_gc(lua_State *L)
{
	decode_state *d = luaL_checkudata(L, 1, "glsb.DecodeState");
	glsb_queue_clear(&d->q);
	glsb_framer_free(d->framer);
	d->framer = NULL;
	return 0;
}

/* The "oversized" option of core.http and decode_frames: "fail" (default) or "cut". Raises on a
 * value it does not know or a framer that cannot cut. */
void glsb_framer_check_oversized(lua_State *L, int arg, glsb_framer *f, const char *policy)
{
	static const char *const names[] = {"fail", "cut", NULL};
	static const enum glsb_oversized values[] = {GLSB_OVERSIZED_FAIL, GLSB_OVERSIZED_CUT};
	if (!policy)
		return;
	int i = 0;
	while (names[i] && strcmp(names[i], policy) != 0)
		i++;
	if (!names[i])
		luaL_argerror(L, arg, lua_pushfstring(L, "oversized must be 'fail' or 'cut', not '%s'", policy));
	if (glsb_framer_set_oversized(f, values[i]) != 0)
		luaL_argerror(L, arg, lua_pushfstring(L, "framer '%s' cannot cut oversized frames", f->type->name));
}

/* decode_frames(framer, chunks [, max_frame [, oversized]]) -> frames, or nil, message, code, the frames
 * decoded before the failure. The framers without a transfer: for bodies that arrived another way, and
 * tests. */
static int l_decode_frames(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	luaL_checktype(L, 2, LUA_TTABLE);
	size_t max_frame = (size_t)luaL_optinteger(L, 3, 16 << 20);
	const char *oversized = luaL_optstring(L, 4, NULL);
	decode_state *d = lua_newuserdatauv(L, sizeof *d, 0);
	memset(d, 0, sizeof *d);
	luaL_setmetatable(L, "glsb.DecodeState");
	if (!(d->framer = glsb_framer_new(name, max_frame)))
		return luaL_argerror(L, 1, lua_pushfstring(L, "unknown framer '%s'", name));
	glsb_framer_check_oversized(L, 4, d->framer, oversized);
	int rc = 0;
	lua_Integer n = luaL_len(L, 2);
	for (lua_Integer i = 1; i <= n && rc == 0; i++) {
		lua_rawgeti(L, 2, i);
		size_t len;
		const char *chunk = lua_tolstring(L, -1, &len);
		if (!chunk)
			return luaL_argerror(L, 2, "chunks must be strings");
		rc = glsb_framer_feed(d->framer, chunk, len, &d->q);
		lua_pop(L, 1);
	}
	if (rc == 0)
		rc = glsb_framer_finish(d->framer, &d->q);
	glsb_framer_push_frames(L, d->framer, &d->q);
	if (!rc)
		return 1;
	const char *code = glsb_framer_error(d->framer);
	lua_pushnil(L);
	lua_pushfstring(L, "decode_frames: %s: %s", name, code);
	lua_pushstring(L, code);
	lua_rotate(L, -4, -1); /* nil, message, code, frames */
	return 4;
}

void glsb_open_framer(lua_State *L)
{
	if (luaL_newmetatable(L, "glsb.DecodeState")) {
		lua_pushcfunction(L, decode_state_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
	lua_pushcfunction(L, l_decode_frames);
	lua_setfield(L, -2, "decode_frames");
}
