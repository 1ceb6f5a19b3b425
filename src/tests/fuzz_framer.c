/* fuzz_framer.c: libFuzzer target: every framer on arbitrary bytes, split where the input says, and
 * every frame it makes pushed to Lua by the framer's own push. */
#include <stddef.h>
#include <stdint.h>

#include <lauxlib.h>

#include "framer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const types[] = {"raw", "lines", "sse", "connect", "eventstream"};
	if (size < 2)
		return 0;
	const char *type = types[data[0] % 5];
	/* lines also with oversized lines cut (chosen by the same first byte) */
	int cut = type[0] == 'l' && (data[0] / 5) % 2;
	size_t max_frame = (size_t)(data[1] % 64) + 1;
	data += 2;
	size -= 2;
	glsb_framer *f = glsb_framer_new(type, max_frame);
	if (cut && glsb_framer_set_oversized(f, GLSB_OVERSIZED_CUT) != 0)
		__builtin_trap();
	glsb_frame_queue q = {0};
	/* Feed in chunks whose sizes come from the data itself, so splits are explored too. */
	size_t pos = 0;
	while (pos < size) {
		size_t n = (size_t)(data[pos] % 17) + 1;
		if (n > size - pos)
			n = size - pos;
		if (glsb_framer_feed(f, (const char *)data + pos, n, &q) != 0)
			break;
		if (f->pending.len > max_frame && type[0] == 'l')
			__builtin_trap(); /* lines never holds more than max_frame bytes of a line */
		pos += n;
	}
	glsb_framer_finish(f, &q);
	for (glsb_frame *fr = q.head; fr; fr = fr->next)
		if (fr->data_len > max_frame && type[0] != 'r')
			__builtin_trap(); /* a frame over the limit must never come out */
		else if (cut && fr->number >= 0 && (fr->data_len != max_frame || (size_t)fr->number <= max_frame))
			__builtin_trap(); /* a cut line is its first max_frame bytes and a longer length */
	static lua_State *L;
	if (!L)
		L = luaL_newstate();
	size_t count = q.count;
	glsb_framer_push_frames(L, f, &q);
	if (luaL_len(L, -1) != (lua_Integer)count || q.count != 0)
		__builtin_trap(); /* every frame pushed, the queue moved out */
	lua_settop(L, 0);
	glsb_framer_free(f);
	return 0;
}
