/* digest.c: SHA-256 and HMAC-SHA256 for Lua and C, from OpenSSL's libcrypto (a part of the core loaded
 * on first use: a script that never hashes does not map libcrypto). */
#include <limits.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "codec.h"
#include "core.h"

GLSB_PART_DEFINE();

int glsb_sha256_init(glsb_sha256_ctx *c)
{
	c->md = EVP_MD_CTX_new();
	if (c->md && EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) == 1)
		return 0;
	EVP_MD_CTX_free(c->md);
	c->md = NULL;
	return -1;
}

int glsb_sha256_update(glsb_sha256_ctx *c, const void *data, size_t n)
{
	return EVP_DigestUpdate(c->md, data, n) == 1 ? 0 : -1;
}

int glsb_sha256_final(glsb_sha256_ctx *c, unsigned char out[32])
{
	unsigned int len = 0;
	int ok = EVP_DigestFinal_ex(c->md, out, &len) == 1 && len == 32;

	EVP_MD_CTX_free(c->md);
	c->md = NULL;
	return ok ? 0 : -1;
}

void glsb_sha256_abort(glsb_sha256_ctx *c)
{
	EVP_MD_CTX_free(c->md);
	c->md = NULL;
}

int glsb_sha256(const void *data, size_t n, unsigned char out[32])
{
	unsigned int len = 0;

	return EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -1;
}

int glsb_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, unsigned char out[32])
{
	unsigned int len = 0;

	/* HMAC() keeps a key longer than the 64-byte block as its digest (RFC 2104 section 2). */
	if (keylen > INT_MAX)
		return -1;
	return HMAC(EVP_sha256(), key, (int)keylen, msg, n, out, &len) && len == 32 ? 0 : -1;
}

/* Pushes a 32-byte digest as lowercase hex, or raw when raw is set. */
static int push_digest(lua_State *L, const unsigned char d[32], int raw)
{
	char hex[64];
	int i;

	if (raw) {
		lua_pushlstring(L, (const char *)d, 32);
		return 1;
	}
	for (i = 0; i < 32; i++) {
		hex[2 * i] = "0123456789abcdef"[d[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[d[i] & 15];
	}
	lua_pushlstring(L, hex, sizeof hex);
	return 1;
}

/* core.sha256(s [, raw]) -> lowercase hex digest, or the 32 raw bytes when raw is true. */
static int l_sha256(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	int raw = lua_toboolean(L, 2);
	unsigned char d[32];

	/* libcrypto fails only when it cannot allocate: Lua's own answer to that is a memory error. */
	if (glsb_sha256(s, n, d) != 0)
		return luaL_error(L, "sha256: libcrypto failed (out of memory)");
	return push_digest(L, d, raw);
}

/* core.hmac_sha256(key, msg [, raw]) -> lowercase hex HMAC-SHA256 (RFC 2104), or the 32 raw bytes. */
static int l_hmac_sha256(lua_State *L)
{
	size_t klen, n;
	const char *key = luaL_checklstring(L, 1, &klen);
	const char *msg = luaL_checklstring(L, 2, &n);
	int raw = lua_toboolean(L, 3);
	unsigned char d[32];

	if (glsb_hmac_sha256(key, klen, msg, n, d) != 0)
		return luaL_error(L, "hmac_sha256: libcrypto failed (out of memory)");
	return push_digest(L, d, raw);
}

/* core.sha256_stream() -> a digest fed in pieces: h:update(s) (any number of times), then
 * h:digest([raw]) once, as sha256 of the pieces joined would be; for data that is never whole in
 * memory (a snapshot's archive as it streams). A hasher that is dropped unfinished frees its context
 * (__gc); a second digest, or an update after it, is an error. */
#define STREAM_MT "glsb.sha256_stream"

static glsb_sha256_ctx *stream_ctx(lua_State *L)
{
	glsb_sha256_ctx *c = luaL_checkudata(L, 1, STREAM_MT);
	if (!c->md)
		luaL_error(L, "sha256_stream: already digested");
	return c;
}

static int l_stream_update(lua_State *L)
{
	glsb_sha256_ctx *c = stream_ctx(L);
	size_t n;
	const char *s = luaL_checklstring(L, 2, &n);

	if (glsb_sha256_update(c, s, n) != 0)
		return luaL_error(L, "sha256_stream: libcrypto failed");
	lua_settop(L, 1);
	return 1;
}

static int l_stream_digest(lua_State *L)
{
	glsb_sha256_ctx *c = stream_ctx(L);
	unsigned char d[32];

	if (glsb_sha256_final(c, d) != 0)
		return luaL_error(L, "sha256_stream: libcrypto failed");
	return push_digest(L, d, lua_toboolean(L, 2));
}

static int l_stream_gc(lua_State *L)
{
	glsb_sha256_ctx *c = luaL_checkudata(L, 1, STREAM_MT);
	if (c->md)
		glsb_sha256_abort(c);
	return 0;
}

static int l_sha256_stream(lua_State *L)
{
	glsb_sha256_ctx *c = lua_newuserdatauv(L, sizeof *c, 0);

	c->md = NULL;
	if (luaL_newmetatable(L, STREAM_MT)) {
		static const luaL_Reg methods[] = {{"update", l_stream_update}, {"digest", l_stream_digest}, {NULL, NULL}};
		luaL_newlib(L, methods);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, l_stream_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_setmetatable(L, -2);
	if (glsb_sha256_init(c) != 0)
		return luaL_error(L, "sha256_stream: libcrypto failed (out of memory)");
	return 1;
}

void glsb_open_digest(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"sha256", l_sha256},
		{"sha256_stream", l_sha256_stream},
		{"hmac_sha256", l_hmac_sha256},
		{NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
