/* test_codec.c: SHA-256 against the NIST vectors, HMAC-SHA256 against RFC 4231, base64 round trips and rejections, CRC-32 known values. */
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
		CHECK(glsb_sha256(NIST[i].msg, strlen(NIST[i].msg), d) == 0);
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
	CHECK(glsb_sha256(buf, 1000000, d) == 0);
	hex(d, 32, h);
	CHECK_STR(h, want);
	/* Streamed in uneven pieces the digest is the same. */
	CHECK(glsb_sha256_init(&c) == 0);
	while (off < 1000000) {
		size_t take = step < 1000000 - off ? step : 1000000 - off;
		CHECK(glsb_sha256_update(&c, buf + off, take) == 0);
		off += take;
		step = step * 7 % 997 + 1;
	}
	CHECK(glsb_sha256_final(&c, d) == 0);
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
		CHECK(glsb_sha256_final(&c, b) == 0);
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
	/* An abandoned incremental hash frees its context (valgrind counts it). */
	{
		glsb_sha256_ctx c;
		CHECK(glsb_sha256_init(&c) == 0);
		CHECK(glsb_sha256_update(&c, "ab", 2) == 0);
		glsb_sha256_abort(&c);
		CHECK(c.md == NULL);
		glsb_sha256_abort(&c); /* twice is harmless */
	}
}

/* RFC 4231 section 4: every HMAC-SHA-256 test case (case 5 is compared on its 128-bit truncation). */
static void test_hmac_sha256_rfc4231(void)
{
	static const char msg7[] = "This is a test using a larger than block-size key and a larger than block-size data. "
				   "The key needs to be hashed before being used by the HMAC algorithm.";
	unsigned char k0b[20], kaa20[20], k25[25], k0c[20], kaa131[131], ddd[50], dcd[50], d[32];
	struct {
		const unsigned char *key;
		size_t klen;
		const char *msg;
		size_t mlen;
		const char *want;
	} cases[7];
	char h[65];
	size_t i;

	memset(k0b, 0x0b, sizeof k0b);
	memset(kaa20, 0xaa, sizeof kaa20);
	for (i = 0; i < sizeof k25; i++)
		k25[i] = (unsigned char)(i + 1);
	memset(k0c, 0x0c, sizeof k0c);
	memset(kaa131, 0xaa, sizeof kaa131);
	memset(ddd, 0xdd, sizeof ddd);
	memset(dcd, 0xcd, sizeof dcd);
	cases[0].key = k0b, cases[0].klen = 20, cases[0].msg = "Hi There", cases[0].mlen = 8;
	cases[0].want = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
	cases[1].key = (const unsigned char *)"Jefe", cases[1].klen = 4;
	cases[1].msg = "what do ya want for nothing?", cases[1].mlen = 28;
	cases[1].want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
	cases[2].key = kaa20, cases[2].klen = 20, cases[2].msg = (const char *)ddd, cases[2].mlen = 50;
	cases[2].want = "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe";
	cases[3].key = k25, cases[3].klen = 25, cases[3].msg = (const char *)dcd, cases[3].mlen = 50;
	cases[3].want = "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b";
	cases[4].key = k0c, cases[4].klen = 20, cases[4].msg = "Test With Truncation", cases[4].mlen = 20;
	cases[4].want = "a3b6167473100ee06e0c796c2955552b";
	cases[5].key = kaa131, cases[5].klen = 131;
	cases[5].msg = "Test Using Larger Than Block-Size Key - Hash Key First", cases[5].mlen = 54;
	cases[5].want = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54";
	cases[6].key = kaa131, cases[6].klen = 131, cases[6].msg = msg7, cases[6].mlen = sizeof msg7 - 1;
	cases[6].want = "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2";

	for (i = 0; i < 7; i++) {
		size_t wlen = strlen(cases[i].want);
		CHECK(glsb_hmac_sha256(cases[i].key, cases[i].klen, cases[i].msg, cases[i].mlen, d) == 0);
		hex(d, 32, h);
		CHECK(strncmp(h, cases[i].want, wlen) == 0);
		/* and through Lua, hex and raw */
		lua_getglobal(L, "core");
		lua_getfield(L, -1, "hmac_sha256");
		lua_pushlstring(L, (const char *)cases[i].key, cases[i].klen);
		lua_pushlstring(L, cases[i].msg, cases[i].mlen);
		CHECK(lua_pcall(L, 2, 1, 0) == 0);
		CHECK(lua_rawlen(L, -1) == 64 && strncmp(lua_tostring(L, -1), cases[i].want, wlen) == 0);
		lua_pop(L, 1);
		lua_getfield(L, -1, "hmac_sha256");
		lua_pushlstring(L, (const char *)cases[i].key, cases[i].klen);
		lua_pushlstring(L, cases[i].msg, cases[i].mlen);
		lua_pushboolean(L, 1);
		CHECK(lua_pcall(L, 3, 1, 0) == 0);
		CHECK(lua_rawlen(L, -1) == 32 && memcmp(lua_tostring(L, -1), d, 32) == 0);
		lua_pop(L, 2);
	}
	/* misuse raises: a missing message, a table key */
	CHECK(luaL_dostring(L, "return core.hmac_sha256('k')") != 0);
	lua_pop(L, 1);
	CHECK(luaL_dostring(L, "return core.hmac_sha256({}, 'm')") != 0);
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
	RUN(test_hmac_sha256_rfc4231);
	RUN(test_b64_rfc4648);
	RUN(test_b64_round_trip);
	RUN(test_b64_invalid);
	RUN(test_crc32);
	CHECK(lua_gettop(L) == 0);
	lua_close(L);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return CHECK_EXIT();
}
