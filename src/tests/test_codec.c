/* test_codec.c: SHA-256 against the NIST vectors, base64 round trips and rejections, CRC-32 known values. */
#include <stdlib.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "check.h"
#include "core.h"
#include "codec.h"

static lua_State *L;

static void hex(const unsigned char *d, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

/* Calls core.<fn>(s, opt) where opt is a string (or absent when NULL); leaves one result on the stack. */
static int call(const char *fn, const char *s, size_t n, const char *opt)
{
	int rc;

	lua_getglobal(L, "core");
	lua_getfield(L, -1, fn);
	lua_remove(L, -2);
	lua_pushlstring(L, s, n);
	if (opt)
		lua_pushstring(L, opt);
	rc = lua_pcall(L, opt ? 2 : 1, 1, 0);
	return rc;
}

static const struct {
	const char *msg;
	const char *digest;
} NIST[] = {
	{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	{"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
	 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

static void test_sha256_nist(void)
{
	unsigned char d[32];
	char h[65];
	size_t i;

	for (i = 0; i < sizeof NIST / sizeof NIST[0]; i++) {
		glsb_sha256(NIST[i].msg, strlen(NIST[i].msg), d);
		hex(d, 32, h);
		CHECK_STR(h, NIST[i].digest);
		/* and through Lua */
		CHECK(call("sha256", NIST[i].msg, strlen(NIST[i].msg), NULL) == 0);
		CHECK_STR(lua_tostring(L, -1), NIST[i].digest);
		lua_pop(L, 1);
	}
}

static void test_sha256_million_a(void)
{
	static const char want[] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
	char *buf = malloc(1000000);
	glsb_sha256_ctx c;
	unsigned char d[32];
	char h[65];
	size_t off = 0, step = 1;

	CHECK(buf != NULL);
	if (!buf)
		return;
	memset(buf, 'a', 1000000);
	glsb_sha256(buf, 1000000, d);
	hex(d, 32, h);
	CHECK_STR(h, want);
	/* Streamed in uneven pieces the digest is the same. */
	glsb_sha256_init(&c);
	while (off < 1000000) {
		size_t take = step < 1000000 - off ? step : 1000000 - off;
		glsb_sha256_update(&c, buf + off, take);
		off += take;
		step = step * 7 % 997 + 1;
	}
	glsb_sha256_final(&c, d);
	hex(d, 32, h);
	CHECK_STR(h, want);
	free(buf);
}

/* Every length around the 55/56/64-byte padding boundaries, streamed byte by byte vs one-shot. */
static void test_sha256_boundaries(void)
{
	unsigned char msg[200], a[32], b[32];
	size_t n, i;

	for (i = 0; i < sizeof msg; i++)
		msg[i] = (unsigned char)(i * 31 + 7);
	for (n = 0; n <= sizeof msg; n++) {
		glsb_sha256_ctx c;
		glsb_sha256(msg, n, a);
		glsb_sha256_init(&c);
		for (i = 0; i < n; i++)
			glsb_sha256_update(&c, msg + i, 1);
		glsb_sha256_final(&c, b);
		CHECK_MEM(a, b, 32);
	}
	/* Known: 55 and 56 bytes of 'a' (one and two padding blocks). */
	memset(msg, 'a', 64);
	glsb_sha256(msg, 55, a);
	{
		char h[65];
		hex(a, 32, h);
		CHECK_STR(h, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
		glsb_sha256(msg, 56, a);
		hex(a, 32, h);
		CHECK_STR(h, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
	}
}

static void test_sha256_raw(void)
{
	unsigned char d[32];

	glsb_sha256("abc", 3, d);
	lua_getglobal(L, "core");
	lua_getfield(L, -1, "sha256");
	lua_pushliteral(L, "abc");
	lua_pushboolean(L, 1);
	CHECK(lua_pcall(L, 2, 1, 0) == 0);
	CHECK(lua_rawlen(L, -1) == 32);
	CHECK_MEM(lua_tostring(L, -1), d, 32);
	lua_pop(L, 2);
	/* misuse raises */
	CHECK(luaL_dostring(L, "return core.sha256({})") != 0);
	lua_pop(L, 1);
}

static void test_b64_rfc4648(void)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	static const char *const nopad[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
	size_t i;

	for (i = 0; i < 7; i++) {
		CHECK(call("b64encode", plain[i], strlen(plain[i]), NULL) == 0);
		CHECK_STR(lua_tostring(L, -1), enc[i]);
		lua_pop(L, 1);
		CHECK(call("b64encode", plain[i], strlen(plain[i]), "url") == 0);
		CHECK_STR(lua_tostring(L, -1), nopad[i]);
		lua_pop(L, 1);
		CHECK(call("b64decode", enc[i], strlen(enc[i]), NULL) == 0);
		CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), plain[i]) == 0);
		lua_pop(L, 1);
		/* missing padding is accepted */
		CHECK(call("b64decode", nopad[i], strlen(nopad[i]), NULL) == 0);
		CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), plain[i]) == 0);
		lua_pop(L, 1);
	}
	/* the two alphabets differ in 62 and 63 */
	CHECK(call("b64encode", "\xfb\xff\xbf", 3, NULL) == 0);
	CHECK_STR(lua_tostring(L, -1), "+/+/");
	lua_pop(L, 1);
	CHECK(call("b64encode", "\xfb\xff\xbf", 3, "url") == 0);
	CHECK_STR(lua_tostring(L, -1), "-_-_");
	lua_pop(L, 1);
}

static void test_b64_round_trip(void)
{
	unsigned char buf[300];
	size_t n, i;
	int variant;

	for (i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 73 + 11); /* covers every byte value */
	for (variant = 0; variant < 2; variant++) {
		const char *opt = variant ? "url" : NULL;
		for (n = 0; n <= sizeof buf; n++) {
			size_t elen;
			const char *e;
			CHECK(call("b64encode", (const char *)buf, n, opt) == 0);
			e = lua_tolstring(L, -1, &elen);
			CHECK(elen == (variant ? (n * 4 + 2) / 3 : (n + 2) / 3 * 4));
			CHECK(strcspn(e, variant ? "+/=" : "-_") == elen);
			CHECK(call("b64decode", e, elen, opt) == 0);
			CHECK(lua_rawlen(L, -1) == n && memcmp(lua_tostring(L, -1), buf, n) == 0);
			lua_pop(L, 2);
		}
	}
}

static void test_b64_invalid(void)
{
	static const struct {
		const char *s;
		size_t n;
		const char *opt;
	} bad[] = {
		{"Z", 1, NULL},          /* 6 bits cannot make a byte */
		{"Zm9vY", 5, NULL},
		{"Zg=", 3, NULL},        /* padding present but incomplete */
		{"Zg===", 5, NULL},      /* too much padding */
		{"=", 1, NULL},
		{"==", 2, NULL},
		{"====", 4, NULL},
		{"=Zg=", 4, NULL},       /* padding in the middle */
		{"Zm=v", 4, NULL},
		{"Zm9v!", 5, NULL},      /* outside the alphabet */
		{"Zm 9v", 5, NULL},      /* whitespace is not skipped */
		{"Zm9v\n", 5, NULL},
		{"Zm\0v", 4, NULL},      /* embedded NUL */
		{"-_-_", 4, NULL},       /* url alphabet under std */
		{"+/+/", 4, "url"},      /* std alphabet under url */
		{"\xc3\xa9Zg", 4, NULL},
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(call("b64decode", bad[i].s, bad[i].n, bad[i].opt) == 0);
		if (!lua_isnil(L, -1))
			fprintf(stderr, "  accepted bad input #%zu\n", i);
		CHECK(lua_isnil(L, -1));
		lua_pop(L, 1);
	}
	CHECK(call("b64decode", "-_-_", 4, "url") == 0);
	CHECK(lua_rawlen(L, -1) == 3 && memcmp(lua_tostring(L, -1), "\xfb\xff\xbf", 3) == 0);
	lua_pop(L, 1);
	/* an unknown variant is misuse and raises */
	CHECK(call("b64encode", "x", 1, "base32") != 0);
	lua_pop(L, 1);
	CHECK(call("b64decode", "x", 1, "hex") != 0);
	lua_pop(L, 1);
}

static void test_crc32(void)
{
	const char *fox = "The quick brown fox jumps over the lazy dog";

	CHECK(glsb_crc32(0, "", 0) == 0);
	CHECK(glsb_crc32(0, "123456789", 9) == 0xcbf43926u);
	CHECK(glsb_crc32(0, fox, strlen(fox)) == 0x414fa339u);
	CHECK(glsb_crc32(glsb_crc32(0, "12345", 5), "6789", 4) == 0xcbf43926u);
	CHECK(glsb_crc32(0, "a", 1) == 0xe8b7be43u);

	CHECK(luaL_dostring(L, "return core.crc32('123456789')") == 0);
	CHECK(lua_isinteger(L, -1) && lua_tointeger(L, -1) == 0xcbf43926);
	lua_pop(L, 1);
	CHECK(luaL_dostring(L, "return core.crc32('6789', core.crc32('12345'))") == 0);
	CHECK(lua_tointeger(L, -1) == 0xcbf43926);
	lua_pop(L, 1);
	CHECK(luaL_dostring(L, "return core.crc32('')") == 0);
	CHECK(lua_isinteger(L, -1) && lua_tointeger(L, -1) == 0);
	lua_pop(L, 1);
	/* init out of range is misuse */
	CHECK(luaL_dostring(L, "return core.crc32('x', -1)") != 0);
	lua_pop(L, 1);
	CHECK(luaL_dostring(L, "return core.crc32('x', 0x100000000)") != 0);
	lua_pop(L, 1);
}

int main(void)
{
	L = luaL_newstate();
	luaL_openlibs(L);
	luaL_requiref(L, "glsb.core", luaopen_glsb_core, 0);
	lua_setglobal(L, "core");

	RUN(test_sha256_nist);
	RUN(test_sha256_million_a);
	RUN(test_sha256_boundaries);
	RUN(test_sha256_raw);
	RUN(test_b64_rfc4648);
	RUN(test_b64_round_trip);
	RUN(test_b64_invalid);
	RUN(test_crc32);
	CHECK(lua_gettop(L) == 0);
	lua_close(L);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return CHECK_EXIT();
}
