/* test_archive.c: tar_pack/tar_unpack round trips, deterministic bytes, and each refusal on hostile archives built with libarchive. */
#include <archive.h>
#include <archive_entry.h>
#include <locale.h>
#include <stdlib.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "check.h"
#include "core.h"

static lua_State *L;

/* ---- hostile archives, written with libarchive directly ---- */

struct spec {
	const char *name;
	int type;            /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, ...; 0 = hardlink */
	const char *target;  /* symlink or hardlink target */
	const char *data;
};

static char abuf[1 << 20];
static size_t alen;

/* Writes the entries as format ("pax", "ustar", "gnutar"), gzipped or not, into abuf. */
static int build(const struct spec *s, size_t n, const char *format, int gzip)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t i;
	int ok = 1;

	if (strcmp(format, "gnutar") == 0)
		archive_write_set_format_gnutar(a);
	else if (strcmp(format, "ustar") == 0)
		archive_write_set_format_ustar(a);
	else
		archive_write_set_format_pax_restricted(a);
	if (gzip)
		archive_write_add_filter_gzip(a);
	archive_write_set_bytes_in_last_block(a, 1); /* so a gzip trailer is at the very end */
	archive_write_open_memory(a, abuf, sizeof abuf, &alen);
	for (i = 0; i < n; i++) {
		archive_entry_clear(e);
		archive_entry_copy_pathname(e, s[i].name);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_mtime(e, 1, 0);
		if (s[i].type == 0) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_copy_hardlink(e, s[i].target);
		} else {
			archive_entry_set_filetype(e, (unsigned)s[i].type);
		}
		if (s[i].type == AE_IFLNK)
			archive_entry_copy_symlink(e, s[i].target);
		if (s[i].type == AE_IFCHR || s[i].type == AE_IFBLK)
			archive_entry_set_rdev(e, 0x0103);
		archive_entry_set_size(e, s[i].data ? (la_int64_t)strlen(s[i].data) : 0);
		if (archive_write_header(a, e) != ARCHIVE_OK) {
			fprintf(stderr, "  build: %s: %s\n", s[i].name, archive_error_string(a));
			ok = 0;
		}
		if (s[i].data)
			archive_write_data(a, s[i].data, strlen(s[i].data));
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		ok = 0;
	archive_write_free(a);
	archive_entry_free(e);
	return ok;
}

/* A raw ustar header: what libarchive will not write (an empty name). */
static void raw_header(unsigned char *h, const char *name, char type, size_t size)
{
	unsigned sum = 0;
	int i;

	memset(h, 0, 512);
	memcpy(h, name, strlen(name));
	memcpy(h + 100, "0000644", 7);
	memcpy(h + 108, "0000000", 7);
	memcpy(h + 116, "0000000", 7);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)size);
	memcpy(h + 136, "00000000000", 11);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

/* ---- calling the core ---- */

/* core.tar_unpack(abuf[:n], opts): 1 with the entries on the stack, 0 with the message on the stack. */
static int unpack(const char *data, size_t n, const char *opts)
{
	lua_getglobal(L, "core");
	lua_getfield(L, -1, "tar_unpack");
	lua_remove(L, -2);
	lua_pushlstring(L, data, n);
	if (opts) {
		if (luaL_dostring(L, opts) != 0) {
			fprintf(stderr, "  opts: %s\n", lua_tostring(L, -1));
			lua_pop(L, 3);
			lua_pushliteral(L, "bad opts");
			return 0;
		}
	} else {
		lua_pushnil(L);
	}
	if (lua_pcall(L, 2, 2, 0) != 0) {
		fprintf(stderr, "  raised: %s\n", lua_tostring(L, -1));
		return 0;
	}
	if (lua_istable(L, -2)) {
		lua_pop(L, 1);
		return 1;
	}
	lua_remove(L, -2);
	return 0;
}

/* Expects the archive in abuf to be refused with a message holding both `who` and `why`. */
static void expect_refused(const char *opts, const char *who, const char *why)
{
	int ok = unpack(abuf, alen, opts);
	const char *msg = lua_tostring(L, -1);

	CHECK(!ok);
	CHECK(!ok && msg && strstr(msg, who) && strstr(msg, why));
	if (ok || !msg || !strstr(msg, who) || !strstr(msg, why))
		fprintf(stderr, "  wanted '%s' / '%s', got: %s\n", who, why, ok ? "(accepted)" : msg);
	lua_pop(L, 1);
}

static void expect_accepted(const char *opts)
{
	int ok = unpack(abuf, alen, opts);

	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  refused: %s\n", lua_tostring(L, -1));
	lua_pop(L, 1);
}

/* Runs Lua code with core as `...`; returns 1 when it ran and returned true. */
static int lua_true(const char *code)
{
	int ok;

	if (luaL_loadstring(L, code) != 0) {
		fprintf(stderr, "  load: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
		return 0;
	}
	lua_getglobal(L, "core");
	if (lua_pcall(L, 1, 2, 0) != 0) {
		fprintf(stderr, "  lua: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
		return 0;
	}
	ok = lua_toboolean(L, -2);
	if (!ok && lua_isstring(L, -1))
		fprintf(stderr, "  lua: %s\n", lua_tostring(L, -1));
	lua_pop(L, 2);
	return ok;
}

/* Runs Lua code with core as `...`; returns 1 when it raised an error containing "bad argument". */
static int raises_misuse(const char *code)
{
	int hit;

	if (luaL_loadstring(L, code) != 0) {
		lua_pop(L, 1);
		return 0;
	}
	lua_getglobal(L, "core");
	if (lua_pcall(L, 1, 0, 0) == 0)
		return 0;
	hit = strstr(lua_tostring(L, -1), "bad argument") != NULL;
	lua_pop(L, 1);
	return hit;
}

/* ---- round trips and determinism ---- */

static const char ENTRIES[] =
	"local big = {} for i = 1, 70000 do big[i] = string.char(i % 251) end big = table.concat(big) "
	"return {"
	" {name = 'dir', type = 'dir', mode = 493},"
	" {name = 'dir/a.txt', data = 'hello\\0world', mode = 384},"
	" {name = 'dir/empty', data = ''},"
	" {name = 'dir/big.bin', data = big, mode = 493},"
	" {name = 'dir/sub', type = 'dir', mode = 448},"
	" {name = 'link', type = 'symlink', target = 'dir/a.txt'},"
	" {name = 'dir/sub/up', type = 'symlink', target = '../../dir/sub'},"
	" {name = 'hard', type = 'hardlink', target = 'dir/a.txt'},"
	" {name = 'x/' .. string.rep('long-name-', 30), data = 'long'},"
	" {name = 'l2', type = 'symlink', target = string.rep('t', 300)},"
	" {name = 'caf\\u{e9}.txt', data = 'utf8'},"
	"}";

static void test_round_trip(void)
{
	char code[4096];
	int gz;

	for (gz = 0; gz < 2; gz++) {
		snprintf(code, sizeof code,
			 "local core = ... local E = (function() %s end)() "
			 "local t = core.tar_pack(E, {gzip = %s}) "
			 "local out, err = core.tar_unpack(t) if not out then return false, err end "
			 "if #out ~= #E then return false, 'count ' .. #out end "
			 "for i, e in ipairs(E) do local o = out[i] "
			 "  local want_mode = e.mode or (e.type == 'dir' and 493 or e.type == 'symlink' and 511 or 420) "
			 "  if o.name ~= e.name or o.type ~= (e.type or 'file') or o.mode ~= want_mode "
			 "     or o.data ~= (((e.type or 'file') == 'file') and e.data or nil) or o.target ~= e.target then "
			 "    return false, 'entry ' .. i .. ' ' .. o.name .. ' ' .. o.type .. ' ' .. o.mode end "
			 "end return true",
			 ENTRIES, gz ? "true" : "false");
		CHECK(lua_true(code));
	}
}

static void test_names_canonical(void)
{
	CHECK(lua_true("local core = ... "
		       "local t = core.tar_pack({{name = './a//b/./c/', data = 'x'}, {name = 'd/', type = 'dir'}}) "
		       "local out = assert(core.tar_unpack(t)) "
		       "return out[1].name == 'a/b/c' and out[2].name == 'd' and out[2].type == 'dir'"));
	/* a "./" root entry, as `tar -C dir .` writes first, is skipped */
	{
		static const struct spec s[] = {
			{"./", AE_IFDIR, NULL, NULL},
			{"./f", AE_IFREG, NULL, "x"},
			{"./d/", AE_IFDIR, NULL, NULL},
		};
		CHECK(build(s, 3, "ustar", 0));
		CHECK(unpack(abuf, alen, NULL));
		CHECK(lua_rawlen(L, -1) == 2);
		lua_rawgeti(L, -1, 1);
		lua_getfield(L, -1, "name");
		CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "f") == 0);
		lua_pop(L, 3);
	}
}

static void test_deterministic(void)
{
	char code[4096];

	snprintf(code, sizeof code,
		 "local core = ... local E = (function() %s end)() "
		 "local a, b = core.tar_pack(E), core.tar_pack(E) "
		 "local ga, gb = core.tar_pack(E, {gzip = true}), core.tar_pack(E, {gzip = true}) "
		 "if a ~= b then return false, 'tar differs' end "
		 "if ga ~= gb then return false, 'tar.gz differs' end "
		 "if ga:sub(1, 2) ~= '\\31\\139' then return false, 'not gzip' end "
		 "if ga:sub(5, 8) ~= '\\0\\0\\0\\0' then return false, 'gzip mtime set' end "
		 "if a:sub(258, 262) ~= 'ustar' then return false, 'not ustar' end "
		 /* mtime, uid, gid zero; uname, gname empty in the first header */
		 "if a:sub(137, 147) ~= '00000000000' then return false, 'mtime ' .. a:sub(137, 147) end "
		 "if tonumber(a:sub(109, 114), 8) ~= 0 or tonumber(a:sub(117, 122), 8) ~= 0 then return false, 'ids' end "
		 "if a:sub(266, 297) ~= string.rep('\\0', 32) or a:sub(298, 329) ~= string.rep('\\0', 32) then "
		 "  return false, 'names' end "
		 "local swapped = {E[2], E[1]} for i = 3, #E do swapped[i] = E[i] end "
		 "if core.tar_pack(swapped) == a then return false, 'order ignored' end "
		 "return true",
		 ENTRIES);
	CHECK(lua_true(code));
	/* Default modes are 0644 files, 0755 dirs, 0777 symlinks. */
	CHECK(lua_true("local core = ... "
		       "return core.tar_pack({{name = 'a', data = 'b'}, {name = 'd', type = 'dir'}}) == core.tar_pack("
		       "{{name = 'a', data = 'b', mode = 420}, {name = 'd', type = 'dir', mode = 493}})"));
	/* Pinned bytes (libarchive 3.6 pax_restricted): a change here changes every template
	 * hash, so it must be deliberate. The gzip form depends on zlib's deflate, so only the
	 * tar is pinned. */
	CHECK(lua_true("local core = ... "
		       "local t = core.tar_pack({{name = 'a', data = 'b'}, {name = 'd', type = 'dir'}, "
		       "  {name = 'd/l', type = 'symlink', target = '../a'}}) "
		       "return #t == 10240 and core.sha256(t) == "
		       "'6aabbfe54b78f9377621f332eff2d397e3ba56d1dc9c246a8092c6dccf42417e'"));
}

static void test_pack_misuse(void)
{
	static const char *const bad[] = {
		"return core.tar_pack('x')",
		"return core.tar_pack({}, 'gzip')",
		"return core.tar_pack({'x'})",
		"return core.tar_pack({{data = 'x'}})",
		"return core.tar_pack({{name = ''}})",
		"return core.tar_pack({{name = '/abs'}})",
		"return core.tar_pack({{name = 'a/../b'}})",
		"return core.tar_pack({{name = '.'}})",
		"return core.tar_pack({{name = 'a\\0b'}})",
		"return core.tar_pack({{name = 'a', type = 'fifo'}})",
		"return core.tar_pack({{name = 'a', mode = 4096}})",
		"return core.tar_pack({{name = 'a', mode = 'rw'}})",
		"return core.tar_pack({{name = 'a', data = {}}})",
		"return core.tar_pack({{name = 'a', type = 'symlink'}})",
		"return core.tar_pack({{name = 'a', type = 'hardlink', target = '../x'}})",
		"return core.tar_pack({{name = 'a', data = 'x'}, {name = 'b', data = 'y'}, {name = '/c'}})",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char code[256];
		int rc;
		snprintf(code, sizeof code, "local core = ... %s", bad[i]);
		CHECK(luaL_loadstring(L, code) == 0);
		lua_getglobal(L, "core");
		rc = lua_pcall(L, 1, 1, 0);
		CHECK(rc != 0 && strstr(lua_tostring(L, -1), "bad argument") != NULL);
		if (rc == 0 || !strstr(lua_tostring(L, -1), "bad argument"))
			fprintf(stderr, "  %s -> %s\n", bad[i], rc ? lua_tostring(L, -1) : "(no error)");
		lua_pop(L, 1);
	}
	/* tar_pack runs in C.UTF-8 for this thread; an error must not leave it there */
	CHECK(uselocale((locale_t)0) == LC_GLOBAL_LOCALE);
	/* unpack misuse */
	CHECK(raises_misuse("local core = ... return core.tar_unpack({})"));
	CHECK(raises_misuse("local core = ... return core.tar_unpack('', 5)"));
	CHECK(raises_misuse("local core = ... return core.tar_unpack('', {max_bytes = -1})"));
	CHECK(raises_misuse("local core = ... return core.tar_unpack('', {max_entries = 'many'})"));
}

/* ---- refusals ---- */

static void test_refuse_names(void)
{
	static const struct spec abs[] = {{"/etc/passwd", AE_IFREG, NULL, "x"}};
	static const struct spec dotdot[] = {{"ok", AE_IFREG, NULL, "x"}, {"a/../../evil", AE_IFREG, NULL, "x"}};
	static const struct spec dotdot_dir[] = {{"..", AE_IFDIR, NULL, NULL}};
	static const struct spec inner[] = {{"a/b/../c", AE_IFREG, NULL, "x"}};
	unsigned char raw[512 * 4];

	CHECK(build(abs, 1, "pax", 0));
	expect_refused(NULL, "/etc/passwd", "absolute name");
	CHECK(build(dotdot, 2, "pax", 1));
	expect_refused(NULL, "a/../../evil", "'..' component");
	CHECK(build(dotdot_dir, 1, "ustar", 0));
	expect_refused(NULL, "..", "'..' component");
	/* even a ".." that would stay inside: there is no reason for one */
	CHECK(build(inner, 1, "gnutar", 0));
	expect_refused(NULL, "a/b/../c", "'..' component");
	/* an empty name (libarchive will not write one; a raw header will) */
	raw_header(raw, "", '0', 0);
	memset(raw + 512, 0, 1024);
	memcpy(abuf, raw, 1536);
	alen = 1536;
	expect_refused(NULL, "entry", "empty name");
	/* a file named "." */
	raw_header(raw, ".", '0', 0);
	memcpy(abuf, raw, 1536);
	expect_refused(NULL, "'.'", "empty name");
}

static void test_refuse_symlinks(void)
{
	static const struct spec absolute[] = {{"etc", AE_IFLNK, "/etc", NULL}};
	static const struct spec up[] = {{"a", AE_IFDIR, NULL, NULL}, {"a/b", AE_IFLNK, "../../x", NULL}};
	/* each alone lexically inside; together "t" climbs out through "s" (defined later) */
	static const struct spec chain[] = {{"t", AE_IFLNK, "s/s/..", NULL}, {"s", AE_IFLNK, ".", NULL}};
	/* the link's own directory is a symlink to somewhere deeper: resolution follows it */
	static const struct spec via_dir[] = {
		{"deep/er", AE_IFDIR, NULL, NULL}, {"d", AE_IFLNK, "deep/er", NULL},
		{"d/l", AE_IFLNK, "../../..", NULL}};
	static const struct spec loop[] = {{"a", AE_IFLNK, "b", NULL}, {"b", AE_IFLNK, "a/x", NULL}};
	static const struct spec dup[] = {{"a", AE_IFREG, NULL, "x"}, {"a", AE_IFLNK, "b", NULL}};
	static const struct spec dup2[] = {{"a", AE_IFLNK, "b", NULL}, {"a", AE_IFDIR, NULL, NULL}};
	static const struct spec fine[] = {
		{"a/b", AE_IFLNK, "../c", NULL},        /* stays inside */
		{"dangling", AE_IFLNK, "no/such/file", NULL},
		{"s", AE_IFLNK, ".", NULL},
		{"t", AE_IFLNK, "s/s/a", NULL},
		{"u", AE_IFLNK, "a/../a/./b", NULL},    /* lexically in, and "a" is no link */
		{"deep/er", AE_IFDIR, NULL, NULL}, {"d", AE_IFLNK, "deep/er", NULL},
		{"d/l", AE_IFLNK, "../..", NULL},       /* deep/er/../.. is the root: inside */
		{"a/c", AE_IFREG, NULL, "x"}, {"a/c", AE_IFREG, NULL, "y"}, /* plain duplicates are fine */
	};

	CHECK(build(absolute, 1, "pax", 0));
	expect_refused(NULL, "etc", "absolute");
	CHECK(build(up, 2, "pax", 0));
	expect_refused(NULL, "a/b", "escapes the archive root");
	CHECK(build(chain, 2, "pax", 0));
	expect_refused(NULL, "'t'", "escapes the archive root");
	CHECK(build(via_dir, 3, "pax", 0));
	expect_refused(NULL, "d/l", "escapes the archive root");
	CHECK(build(loop, 2, "pax", 0));
	expect_refused(NULL, "'a'", "too many levels of symlinks");
	CHECK(build(dup, 2, "pax", 0));
	expect_refused(NULL, "'a'", "name used twice");
	CHECK(build(dup2, 2, "pax", 0));
	expect_refused(NULL, "'a/'", "name used twice");
	CHECK(build(fine, sizeof fine / sizeof fine[0], "pax", 1));
	expect_accepted(NULL);
}

static void test_refuse_hardlinks(void)
{
	static const struct spec outside[] = {{"h", 0, "../etc/passwd", NULL}};
	static const struct spec absolute[] = {{"h", 0, "/etc/passwd", NULL}};
	static const struct spec missing[] = {{"f", AE_IFREG, NULL, "x"}, {"h", 0, "g", NULL}};
	static const struct spec later[] = {{"h", 0, "f", NULL}, {"f", AE_IFREG, NULL, "x"}};
	static const struct spec to_dir[] = {{"d", AE_IFDIR, NULL, NULL}, {"h", 0, "d", NULL}};
	/* a hardlink to a symlink is that symlink in another directory: "../x" is fine from a/,
	 * not from the root */
	static const struct spec to_link[] = {
		{"a", AE_IFDIR, NULL, NULL}, {"a/s", AE_IFLNK, "../x", NULL}, {"h", 0, "a/s", NULL}};
	static const struct spec to_link2[] = {
		{"a", AE_IFDIR, NULL, NULL}, {"a/s", AE_IFLNK, "../x", NULL}, {"a/h", 0, "a/s", NULL},
		{"h2", 0, "a/h", NULL}};
	static const struct spec fine[] = {
		{"f", AE_IFREG, NULL, "x"}, {"h", 0, "./f", NULL}, {"h2", 0, "h", NULL},
		{"s", AE_IFLNK, "f", NULL}, {"h3", 0, "s", NULL}};

	CHECK(build(outside, 1, "pax", 0));
	expect_refused(NULL, "'h'", "'..' component");
	CHECK(build(absolute, 1, "pax", 0));
	expect_refused(NULL, "'h'", "absolute");
	CHECK(build(missing, 2, "pax", 0));
	expect_refused(NULL, "'h'", "not an earlier entry");
	CHECK(build(later, 2, "pax", 0));
	expect_refused(NULL, "'h'", "not an earlier entry");
	CHECK(build(to_dir, 2, "pax", 0));
	expect_refused(NULL, "'h'", "hardlink to a directory");
	CHECK(build(to_link, 3, "pax", 0));
	expect_refused(NULL, "'h'", "escapes the archive root");
	CHECK(build(to_link2, 4, "pax", 0));
	expect_refused(NULL, "'h2'", "escapes the archive root");
	CHECK(build(fine, 5, "pax", 0));
	CHECK(unpack(abuf, alen, NULL));
	lua_rawgeti(L, -1, 2);
	lua_getfield(L, -1, "type");
	lua_getfield(L, -2, "target");
	CHECK(lua_isstring(L, -2) && strcmp(lua_tostring(L, -2), "hardlink") == 0);
	CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "f") == 0);
	lua_pop(L, 4);
}

static void test_refuse_devices(void)
{
	static const struct spec chr[] = {{"dev/null", AE_IFCHR, NULL, NULL}};
	static const struct spec blk[] = {{"dev/sda", AE_IFBLK, NULL, NULL}};
	static const struct spec fifo[] = {{"pipe", AE_IFIFO, NULL, NULL}};

	CHECK(build(chr, 1, "pax", 0));
	expect_refused(NULL, "dev/null", "character device");
	CHECK(build(blk, 1, "ustar", 0));
	expect_refused(NULL, "dev/sda", "block device");
	CHECK(build(fifo, 1, "gnutar", 1));
	expect_refused(NULL, "pipe", "fifo");
}

static void test_limits(void)
{
	static const struct spec five[] = {
		{"a", AE_IFREG, NULL, "12345"}, {"b", AE_IFREG, NULL, "12345"}, {"c", AE_IFDIR, NULL, NULL},
		{"d", AE_IFREG, NULL, "12345"}, {"e", AE_IFREG, NULL, "12345"}};

	CHECK(build(five, 5, "pax", 0));
	expect_accepted("return {max_bytes = 20, max_entries = 5}");
	expect_refused("return {max_bytes = 19}", "'e'", "max_bytes (19)");
	expect_refused("return {max_entries = 4}", "max_entries (4)", "entries");
	/* the data limit counts bytes out, not bytes in: a gzip bomb stops at the limit */
	CHECK(lua_true("local core = ... "
		       "local t = core.tar_pack({{name = 'zeros', data = string.rep('\\0', 4 << 20)}}, {gzip = true}) "
		       "if #t > 64 << 10 then return false, 'compressed size ' .. #t end "
		       "local out, err = core.tar_unpack(t, {max_bytes = 1 << 20}) "
		       "return out == nil and err:find('zeros', 1, true) and err:find('max_bytes', 1, true)"));
}

static void test_bad_input(void)
{
	static const struct spec one[] = {{"f", AE_IFREG, NULL, "some data that is long enough"}};
	char saved[4096];

	/* not an archive at all */
	memcpy(abuf, "this is not a tar archive", 25);
	alen = 25;
	CHECK(!unpack(abuf, alen, NULL));
	CHECK(strstr(lua_tostring(L, -1), "tar_unpack") != NULL);
	lua_pop(L, 1);
	CHECK(!unpack("", 0, NULL));
	lua_pop(L, 1);
	/* truncated inside the data of an entry */
	CHECK(build(one, 1, "ustar", 0));
	CHECK(!unpack(abuf, 512 + 10, NULL));
	CHECK(strstr(lua_tostring(L, -1), "tar_unpack") != NULL);
	lua_pop(L, 1);
	/* a bad header checksum */
	CHECK(build(one, 1, "ustar", 0));
	abuf[148] ^= 1;
	CHECK(!unpack(abuf, alen, NULL));
	lua_pop(L, 1);
	/* a gzip stream cut short (libarchive does not check the gzip trailer's CRC, so a cut,
	 * not a flipped CRC byte, is the corruption it can see) */
	CHECK(build(one, 1, "pax", 1));
	CHECK(alen > 40 && alen < sizeof saved);
	memcpy(saved, abuf, alen);
	CHECK(!unpack(abuf, alen / 2, NULL));
	CHECK(strstr(lua_tostring(L, -1), "tar_unpack") != NULL);
	lua_pop(L, 1);
	/* the intact copy is fine, so the failure above was the corruption */
	memcpy(abuf, saved, alen);
	expect_accepted(NULL);
	/* an archive with no entries (two zero blocks) is an empty array */
	memset(abuf, 0, 1024);
	CHECK(unpack(abuf, 1024, NULL));
	CHECK(lua_rawlen(L, -1) == 0);
	lua_pop(L, 1);
}

/* Other writers' formats read back the same: GNU long names, pax long link targets. */
static void test_foreign_formats(void)
{
	char longname[300], longtarget[300];
	struct spec s[3] = {
		{NULL, AE_IFREG, NULL, "long"}, {"l", AE_IFLNK, NULL, NULL}, {"d/", AE_IFDIR, NULL, NULL}};
	int f;

	memset(longname, 'n', 250);
	memcpy(longname, "dir/", 4);
	longname[250] = '\0';
	memset(longtarget, 't', 200);
	longtarget[200] = '\0';
	s[0].name = longname;
	s[1].target = longtarget;
	for (f = 0; f < 2; f++) {
		CHECK(build(s, 3, f ? "gnutar" : "pax", f));
		CHECK(unpack(abuf, alen, NULL));
		CHECK(lua_rawlen(L, -1) == 3);
		lua_rawgeti(L, -1, 1);
		lua_getfield(L, -1, "name");
		CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), longname) == 0);
		lua_pop(L, 2);
		lua_rawgeti(L, -1, 2);
		lua_getfield(L, -1, "target");
		CHECK(lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), longtarget) == 0);
		lua_pop(L, 3);
	}
}

int main(void)
{
	L = luaL_newstate();
	luaL_openlibs(L);
	luaL_requiref(L, "glsb.core", luaopen_glsb_core, 0);
	lua_setglobal(L, "core");

	RUN(test_round_trip);
	RUN(test_names_canonical);
	RUN(test_deterministic);
	RUN(test_pack_misuse);
	RUN(test_refuse_names);
	RUN(test_refuse_symlinks);
	RUN(test_refuse_hardlinks);
	RUN(test_refuse_devices);
	RUN(test_limits);
	RUN(test_bad_input);
	RUN(test_foreign_formats);
	CHECK(lua_gettop(L) == 0);
	lua_close(L);
	printf("%d checks, %d failed\n", check_count, check_failures);
	return CHECK_EXIT();
}
